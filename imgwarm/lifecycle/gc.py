"""gc: remove the variants that no manifest names and that nobody has named for longer than the
grace period (HTML that still names an old variant may be cached that long).

Where to look, in one of two ways:

- the references (the usual run): the variants that lost a reference (``dropped/`` markers),
  each checked for a source that names it again. It costs what changed, not the origin's size.
- a full pass (``full``, or a store whose references were never built): every manifest read,
  every variant listed (S3: the shard folders' listings in parallel pages), compared. Variants
  no manifest names (a settings change, a source replaced, a writer killed midway) are found
  whatever left them; missing markers are made and stale ones removed; deletes killed midway
  are finished.

A variant goes once it is unnamed and the later of its own write and its last drop is older
than the grace period; a claim the full pass finds no record behind (a writer killed midway)
counts as a drop when it is removed, so the clock never falls back to an older write time.
The full pass reads each record again, as it stands, before it adds or removes a claim: a
source made again while the pass ran keeps what it names now and loses what it dropped.
A tombstone's variants go at once (a takedown does not wait), unless a live source dropped
them since: another source named them at the takedown (so it kept them), and its drop waits
the grace like any other (the drop marker says whose drop it was).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import PurePosixPath
from typing import Any

from imgwarm.config import Settings
from imgwarm.lifecycle.spool import GONE, NAMED, Spool
from imgwarm.manifest import Manifest, Tombstone, named
from imgwarm.racepoints import reached
from imgwarm.reporting import Progress, mib
from imgwarm.store import Stores
from imgwarm.store.format import READ, WRITE
from imgwarm.store.listing import Listings, ahead, listed_times, sharded, write_time
from imgwarm.store.manifests import ManifestStore
from imgwarm.store.reclaim import reclaim, reclaim_listed
from imgwarm.store.references import key_digest
from imgwarm.store.shard import Shard, merged_shard

STALE_CLAIM = 3600.0  # seconds: a claim with no manifest younger than this may be in flight
THREADS = 16  # candidates looked at in flight (each a few round trips on S3)
PATHS_KEPT = 100_000  # removed paths a report keeps (its counts stay exact): bounded memory
Candidate = tuple[str, float, bool]  # variant path, unnamed since, a tombstone's (no grace)


@dataclass
class GcReport:
    dry_run: bool = False
    full: bool = False
    grace: float = 0.0  # seconds
    looked_at: int = 0  # candidate variants
    removed: int = 0
    removed_bytes: int = 0
    waiting: int = 0  # unnamed, but not for as long as the grace period
    named: int = 0  # candidates some source names again: kept
    taken_down: int = 0  # of removed: a tombstone's (a delete killed midway, finished)
    listed: int = 0  # full: variants listed in the origin
    manifests: int = 0  # full: records read
    claims_added: int = 0  # full: markers a manifest needed and lacked
    claims_removed: int = 0  # full: markers no manifest stood behind
    damaged: int = 0  # full: records that could not be read (skipped; their claims kept)
    damaged_records: list[str] = field(default_factory=list)  # full: theirs, in the store
    paths: list[str] = field(default_factory=list)  # what went (or would go): the first
    tiers: dict[str, Any] | None = None  # PATHS_KEPT; the cache tiers' part (cache/collect.py)
    shard: str = "1/1"  # full: the slice (its first-level folders of the variants)
    seconds: float = 0.0

    def note(self, path: str) -> None:
        """A variant that went (counted by the caller): kept while there is room."""
        if len(self.paths) < PATHS_KEPT:
            self.paths.append(path)

    def to_object(self) -> dict[str, Any]:
        return {**vars(self), "paths_kept": PATHS_KEPT}

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> GcReport:
        """A report from its ``to_object`` (a slice's, sent back by a worker)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in known})

    @classmethod
    def merged(cls, reports: list[GcReport]) -> GcReport:
        """The union of slices: counts added, paths concatenated and sorted; ``shard`` is
        "1/1" when they are every slice of one count; the seconds of the longest; the
        tiers' part of the first slice that has one (a slice runs the origin's part)."""
        first = reports[0] if reports else cls()
        counts = {f.name: sum(getattr(r, f.name) for r in reports) for f in fields(cls)
                  if f.type in ("int", int)}
        return cls(dry_run=any(r.dry_run for r in reports), full=any(r.full for r in reports),
                   grace=first.grace, **counts,
                   damaged_records=sorted(p for r in reports for p in r.damaged_records),
                   paths=sorted(p for r in reports for p in r.paths),
                   tiers=next((r.tiers for r in reports if r.tiers is not None), None),
                   shard=merged_shard([r.shard for r in reports]),
                   seconds=max((r.seconds for r in reports), default=0.0))

    def line(self) -> str:
        would = "would remove" if self.dry_run else "removed"
        text = (f"gc: {would} {self.removed:,} variant(s) ({mib(self.removed_bytes)})"
                " from the origin; {self.waiting:,} unnamed within the grace period, "
                f"{self.named:,} named again; {self.looked_at:,} looked at")
        if self.shard != "1/1":
            text += f"; slice {self.shard}"
        if self.full:
            text += (f"; full pass: {self.listed:,} variants, {self.manifests:,} records, "
                     f"claims +{self.claims_added:,} -{self.claims_removed:,}")
            text += f", {self.damaged:,} damaged record(s) skipped" if self.damaged else ""
        if self.tiers is not None:
            text += "; tiers: " + ", ".join(
                f"{name} -{t['removed']:,} ({mib(t['bytes'])})"
                for name, t in self.tiers.items())
        return text + f"; {self.seconds:.1f} s"


def collect(stores: Stores, *, grace: float, now: float | None = None, full: bool = False,
            dry_run: bool = False, progress: Progress | None = None,
            shard: Shard | None = None) -> GcReport:
    """One gc of the origin (see the module's docstring), or with ``full`` one slice of the
    full pass (``shard``: the variants in its first-level folders); FormatTooNew first when
    the store is newer than this code removes from (or reads, for a dry run)."""
    if shard is not None and not shard.is_whole and not full:
        raise ValueError(f"gc --shard {shard}: a slice is of a full pass (--full)")
    stores.check(READ if dry_run else WRITE)
    started = time.monotonic()
    now = time.time() if now is None else now
    references = stores.manifests.references
    report = GcReport(dry_run=dry_run, full=full or not references.built(), grace=grace,
                      shard=str(shard or Shard.whole()))
    tick = progress or (lambda *_: None)
    if report.full:
        _full_pass(stores, report, now, shard or Shard.whole(), tick)
    else:
        candidates = [(path, since, False) for path, since in references.dropped()]
        report.looked_at = len(candidates)
        reached("gc.candidates")
        _remove(stores, report, candidates, None, now, tick)
    report.paths.sort()
    report.seconds = time.monotonic() - started
    return report


def _remove(stores: Stores, report: GcReport, candidates: list[Candidate],
            listed: tuple[list[str], dict[str, set[str]]] | None, now: float,
            tick: Progress) -> None:
    """The candidates that may go, removed. ``listed``: the first-level folders the full
    pass listed the claims of, and those claims (path -> digests)."""
    references = stores.manifests.references
    tops = listed[0] if listed else None
    # On S3 each look-up is a request: past about one a top folder, one listing of every
    # claim (a page a top folder, in parallel) costs less than two look-ups a candidate.
    folders = len(tops) if tops is not None else len(stores.layout.tops())
    if not references.local and candidates and len(candidates) >= folders:
        claims = listed[1] if listed else references.by_variant()
        _batched(stores, report, candidates, claims, now, tick, tops)
    else:
        _one_by_one(stores, report, candidates, now, tick)


def _one_by_one(stores: Stores, report: GcReport, candidates: list[Candidate], now: float,
                tick: Callable[[str, int, int], None]) -> None:
    """Each candidate's claims looked up before and after it goes (``reclaim``)."""
    references = stores.manifests.references

    def one(candidate: Candidate) -> tuple[str, int | None, str]:
        path, since, urgent = candidate
        if references.holders(path):
            if not report.dry_run:
                references.forget_dropped(path)
            return path, None, "named"
        if urgent:
            urgent = _taken_down(stores.manifests, path)
        if not urgent and since > now - report.grace:
            return path, None, "waiting"
        if report.dry_run:
            return path, stores.origin.size(path) or 0, "removed"
        freed = reclaim(stores.origin, references, path)
        references.forget_dropped(path)
        return path, freed, "removed" if freed is not None else "named"

    urgent = {path for path, _, taken_down in candidates if taken_down}
    with ThreadPoolExecutor(THREADS) as pool:
        for done, (path, freed, outcome) in enumerate(pool.map(one, candidates)):
            tick("origin", done + 1, len(candidates))
            _count(report, path, freed, outcome, path in urgent)


def _batched(stores: Stores, report: GcReport, candidates: list[Candidate],
             claims: dict[str, set[str]], now: float,
             tick: Callable[[str, int, int], None], tops: list[str] | None) -> None:
    """The claims from one listing before and one after (``reclaim_listed``)."""
    references = stores.manifests.references
    named = [path for path, _, _ in candidates if claims.get(path)]
    going = [(path, urgent) for path, since, urgent in (
                 (path, since, urgent and _taken_down(stores.manifests, path))
                 for path, since, urgent in candidates if not claims.get(path))
             if urgent or since <= now - report.grace]
    report.waiting += len(candidates) - len(named) - len(going)
    report.named += len(named)
    paths = [path for path, _ in going]
    counted = len(candidates) - len(paths)

    def ticked(done: int) -> None:
        tick("origin", counted + done, len(candidates))

    if report.dry_run:
        with ThreadPoolExecutor(THREADS) as pool:
            freed: dict[str, int | None] = dict(zip(paths, pool.map(
                lambda p: stores.origin.size(p) or 0, paths), strict=True))
        ticked(len(paths))
    else:
        freed = reclaim_listed(stores.origin, references, paths, ticked, tops)
        with ThreadPoolExecutor(THREADS) as pool:  # gone or named: nothing left for gc
            list(pool.map(references.forget_dropped, named + paths))
    for path, urgent in going:
        found = freed[path]
        _count(report, path, found, "removed" if found is not None else "named", urgent)


def _count(report: GcReport, path: str, freed: int | None, outcome: str, urgent: bool) -> None:
    if outcome == "named":
        report.named += 1
    elif outcome == "waiting":
        report.waiting += 1
    elif freed:
        report.removed += 1
        report.removed_bytes += freed
        report.taken_down += urgent
        report.note(path)


def _full_pass(stores: Stores, report: GcReport, now: float, shard: Shard,
               tick: Progress) -> None:
    """Every record and every variant (of the slice's folders), compared; the claims set
    right; what may go removed. In bounded memory: one streaming read of the records
    spools their (variant, source) pairs and tombstones' variants by the variant's
    first-level folder; then each folder is done alone (its claims, drop markers and
    variants listed, compared, set right, its candidates removed)."""
    manifests = stores.manifests
    with Spool(stores.layout, shard) as spool:
        mine = set(spool.tops)
        seen = len(manifests.damaged)
        for record in manifests.everything():
            digest = key_digest(record.key)
            report.manifests += manifests.layout.folder_for(digest).parts[0] in mine
            if isinstance(record, Manifest):
                for variant in record.variants:
                    spool.add(NAMED, variant.path, digest)
            elif isinstance(record, Tombstone):
                for path in record.variants:
                    spool.add(GONE, path)
        reached("gc.records_read")
        found = sorted({str(p) for p in manifests.damaged[seen:]})
        damaged = {PurePosixPath(p).stem for p in found}  # unread: their claims stand
        report.damaged_records = [p for p in found if PurePosixPath(p).parts[0] in mine]
        report.damaged = len(report.damaged_records)
        folders = spool.folders()
        # the next folders' listings made while this one is done (each a round trip on S3)
        listings = Listings()  # (a small store: each tree listed once, not once a folder)
        lists = ahead(stores.origin, folders, lambda top: _lists(stores, top, listings))
        for done, (top, listed) in enumerate(lists, start=1):
            _folder(stores, report, spool, top, listed, damaged, now, tick)
            tick("folders", done, len(folders))
    if not report.dry_run and shard.is_whole:
        # every manifest's markers exist: only a whole pass can say so (a slice set right
        # its folders alone; the fan-out marks it once every slice ended, see fanout.py)
        manifests.references.mark_built()


Listed = tuple[list[tuple[str, str, float]], dict[str, float], list[tuple[PurePosixPath, float]]]


def _lists(stores: Stores, top: str, listings: Listings) -> Listed:
    """One first-level folder's claims, drop markers and origin files, listed in this
    order (none for the other paths' folder). A file written or dropped after its listing
    is not seen by this pass: it is kept (the next pass finds it)."""
    if not top:
        return [], {}, []
    references = stores.manifests.references
    times = listed_times(stores.origin)
    return (list(references.claimed(times=times, tops=[top], listings=listings)),
            dict(references.dropped(tops=[top], listings=listings)),
            list(sharded(stores.origin, stores.layout, times=times, tops=[top],
                         listings=listings)))


def _folder(stores: Stores, report: GcReport, spool: Spool, top: str, lists: Listed,
            damaged: set[str], now: float, tick: Progress) -> None:
    """One first-level folder of the full pass, from its listings (``_lists``)."""
    references = stores.manifests.references
    manifests = stores.manifests
    named: dict[str, set[str]] = {}  # variant path -> digests of the sources naming it
    gone: set[str] = set()  # variants of tombstones
    for kind, path, digest, _ in spool.read(top):
        if kind == NAMED:
            named.setdefault(path, set()).add(digest)
        else:
            gone.add(path)
    times = listed_times(stores.origin)  # else looked up for the few that need it
    claims: dict[str, set[str]] = {}
    released: set[str] = set()  # variants whose last claim goes now: their grace starts now
    listed, dropped, files = lists
    reached("gc.claims_listed")
    # The records were read before the claims were listed, and a source may have been made
    # again in between: a claim is removed or added only after its record, read again as it
    # stands now (by the claim's digest), says so. A stale view of a source must neither take
    # a live claim away nor give it back one it dropped (which would later hide the drop).
    for path, digest, when in listed:
        claims.setdefault(path, set()).add(digest)
        if digest in named.get(path, ()) or digest in damaged:
            continue
        if (when if times else references.claimed_at(path, digest)) < now - STALE_CLAIM:
            if path in _named_now(manifests, digest):
                named.setdefault(path, set()).add(digest)
                continue
            report.claims_removed += 1
            claims[path].discard(digest)
            released.add(path)
            if not report.dry_run:
                references.release_digest(digest, path)
    for path, digests in sorted(named.items()):
        for digest in sorted(digests - claims.get(path, set())):
            if path not in _named_now(manifests, digest):
                continue  # made again since it was read: its own put noted the drop
            report.claims_added += 1
            claims.setdefault(path, set()).add(digest)
            if not report.dry_run:
                references.claim_digest(digest, path)
    if not top:
        return  # paths outside the shard folders: never listed, never removed
    released = {path for path in released if not claims.get(path)}
    if released and not report.dry_run:  # the clock of the grace period starts now
        references.note_dropped(sorted(released))
    candidates: list[Candidate] = []
    for key, written_at in files:
        path = str(key)
        if not stores.layout.holds(path):
            continue  # an original, or a file of another kind: never a variant
        report.listed += 1
        dropped_at = now if path in released else dropped.pop(path, 0.0)
        dropped.pop(path, None)
        if path not in named:
            if not times:
                written_at = write_time(stores.origin, path)
            candidates.append((path, max(written_at, dropped_at), path in gone))
    if not report.dry_run:
        for path in dropped:  # markers of variants no longer there
            references.forget_dropped(path)
    report.looked_at += len(candidates)
    reached("gc.candidates")
    _remove(stores, report, candidates, ([top], claims), now, tick)


def _taken_down(manifests: ManifestStore, path: str) -> bool:
    """Whether a tombstone's unnamed variant goes at once: its last drop was a takedown's
    (or no drop was noted: a delete killed before its marker). A live source's drop, or one
    that does not say whose (gc's own, imgwarm 0.2.0's), waits the grace. Asked after its
    claims were found gone: a put notes its drop before it releases its claims."""
    by = manifests.references.dropped_by(path)
    return by is None or (bool(by) and isinstance(manifests.record_of(by), Tombstone))


def _named_now(manifests: ManifestStore, digest: str) -> set[str]:
    """The variants the source with this digest names as its record stands now."""
    return named(manifests.record_of(digest))


def gc(settings: Settings, *, grace: float | None = None, now: float | None = None,
       full: bool = False, dry_run: bool = False, progress: Progress | None = None,
       shard: Shard | None = None) -> GcReport:
    """gc of the origin, then of this machine's tiers when it has them (``cache_state``
    holds a warm index; not for a slice of a full pass, ``shard``: the tiers are this
    machine's, not the slice's). ``grace`` defaults to the ``gc_grace`` setting."""
    from imgwarm.cache.collect import collect_tiers  # the tiers' part: only on a cache server

    grace = settings.store.gc_grace if grace is None else grace
    now = time.time() if now is None else now
    report = collect(Stores.for_settings(settings.store), grace=grace, now=now, full=full,
                     dry_run=dry_run, progress=progress, shard=shard)
    if shard is not None and not shard.is_whole:
        return report
    started = time.monotonic()
    report.tiers = collect_tiers(settings, grace=grace, now=now, dry_run=dry_run)
    report.seconds += time.monotonic() - started
    return report
