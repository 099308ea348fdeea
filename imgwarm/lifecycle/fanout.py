"""The queued fan-out of the store-wide passes: one slice of ``fsck`` or ``gc --full`` as a
worker runs it (small JSON in: the pass, the slice as "I/N", a few options; the slice's report
as JSON out), and the slices' reports merged into what one whole pass reports.

The queue side (sending the slices, waiting for them) is ``imgwarm.workers.fanout``: this
module knows nothing of Celery."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from imgwarm.config import Settings
from imgwarm.lifecycle.fsck import FsckReport
from imgwarm.lifecycle.gc import GcReport
from imgwarm.store.shard import Shard

PASSES = ("fsck", "gc")  # gc: always a full pass (a usual gc is not store-wide)
DEFAULT_SHARDS = 16  # slices: enough to keep a fleet busy, few enough to follow
MAX_SHARDS = 4096  # a slice is at least one first-level folder of the layout


def slices(count: int) -> list[str]:
    """The slices of a fan-out in ``count`` parts, "1/N" to "N/N"; ValueError with one line
    for a count out of range."""
    if not 1 <= count <= MAX_SHARDS:
        raise ValueError(f"--shards must be from 1 to {MAX_SHARDS}, not {count}")
    return [str(Shard(index, count)) for index in range(1, count + 1)]


def run_slice(kind: str, shard: str, settings: Settings, *, repair: bool = False,
              grace: float | None = None, now: float | None = None,
              dry_run: bool = False) -> dict[str, Any]:
    """One slice of a pass, as a worker runs it: the slice's report as JSON (``to_object``).
    ``grace`` defaults to the ``gc_grace`` setting. The pixel work of a repair runs in this
    process (a worker's pool process is already apart, and is replaced if it dies)."""
    from imgwarm.store import Stores

    part = Shard.parse(shard)
    stores = Stores.for_settings(settings.store)
    if kind == "fsck":
        from imgwarm.lifecycle.fsck import check
        from imgwarm.pipeline.isolate import IN_PROCESS

        return check(stores, repair=repair, now=now, settings=settings,
                     pixels=IN_PROCESS if repair else None, shard=part).to_object()
    if kind == "gc":
        from imgwarm.lifecycle.gc import collect

        return collect(stores, grace=settings.store.gc_grace if grace is None else grace,
                       now=now, full=True, dry_run=dry_run, shard=part).to_object()
    raise ValueError(f"no such pass {kind!r}: one of {', '.join(PASSES)}")


@dataclass
class FanOut:
    """A fan-out's end: the merged report of the slices that ended, and why each other
    slice failed (slice "I/N" -> its one line)."""

    kind: str
    shards: int
    report: FsckReport | GcReport
    failed: dict[str, str] = field(default_factory=dict)

    def to_object(self) -> dict[str, Any]:
        return {**self.report.to_object(), "shards": self.shards,
                "failed_slices": {name: self.failed[name] for name in _ordered(self.failed)}}

    def line(self) -> str:
        """The summary's last line: the slices, and which failed."""
        done = self.shards - len(self.failed)
        text = f"{self.kind} --queue: {done} of {self.shards} slice(s) done"
        if self.failed:
            text += "; FAILED: " + ", ".join(_ordered(self.failed))
            text += " (their part is not in the summary: run them again, e.g. --shard I/N)"
        return text


def _ordered(names: Iterable[str]) -> list[str]:
    """Slices "I/N" by I."""
    return sorted(names, key=lambda name: int(name.partition("/")[0]))


def merge(kind: str, shards: int, ended: dict[str, dict[str, Any]],
          failed: dict[str, str]) -> FanOut:
    """The slices' reports (slice -> ``to_object``) merged into one; ``failed``: the slices
    that did not end well, and why."""
    order = _ordered(ended)
    merged: FsckReport | GcReport
    if kind == "fsck":
        merged = FsckReport.merged([FsckReport.from_object(ended[name]) for name in order])
    else:
        merged = GcReport.merged([GcReport.from_object(ended[name]) for name in order])
    return FanOut(kind, shards, merged, dict(failed))


def settle(fanned: FanOut, settings: Settings, *, dry_run: bool = False) -> bool:
    """After a queued ``gc --full``: when every slice ended well (and removed for real), the
    slices together set right every folder's claims, as one whole pass does, so the store's
    references are built (a slice alone never says so). True when marked."""
    if fanned.kind != "gc" or fanned.failed or dry_run:
        return False
    from imgwarm.store import Stores

    Stores.for_settings(settings.store).manifests.references.mark_built()
    return True
