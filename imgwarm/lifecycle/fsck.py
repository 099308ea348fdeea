"""fsck: the bad states of a store, counted with their paths, and repaired where that is safe.

What it reads: every record, every claim marker, the origin's listing. What it finds:

    missing    a manifest names a variant whose file is not in the origin (I1 broken)
    unclaimed  a manifest names a variant without its claim marker: gc could take the file
    dangling   a claim marker no manifest stands behind, older than STALE_CLAIM (a younger
               one may be an upload in flight: counted as ``in_flight``, always left alone)
    damaged    a record that cannot be read (its claims stand, as gc leaves them)

What ``repair`` does, each only where it cannot make a source worse:

    unclaimed  the claim is made (the record read again first: it must still name it)
    dangling   the variant noted dropped, then the claim removed: gc's grace starts now
    missing    the source made again from its original (optimize finds a file missing and
               makes it); an original that cannot be read leaves the manifest as it is (a
               failed read is no takedown) and is reported ``unrepaired``, with why
    damaged    nothing: nothing says what the record held (making its source again does)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from imgwarm.config import Settings
from imgwarm.exceptions import ImgwarmError
from imgwarm.lifecycle.gc import STALE_CLAIM
from imgwarm.manifest import Credits, Manifest, named, parse_record
from imgwarm.store import Stores
from imgwarm.store.format import READ, WRITE
from imgwarm.store.listing import listed_times, sharded
from imgwarm.store.manifests import sound
from imgwarm.store.references import REFS, key_digest

if TYPE_CHECKING:
    from imgwarm.pipeline.isolate import PixelWork
    from imgwarm.pipeline.optimize import Outcome

Progress = Callable[[str, int, int], None]
KINDS = ("missing", "unclaimed", "dangling", "damaged")


@dataclass
class Finding:
    """One kind of bad state: where it was found (sorted), and which of those are right after
    the run (repaired, or found right when looked at again before the repair)."""

    paths: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

    def left(self) -> list[str]:
        done = set(self.repaired)
        return [p for p in self.paths if p not in done]

    def to_object(self) -> dict[str, Any]:
        return {"count": len(self.paths), "paths": self.paths, "repaired": self.repaired}


@dataclass
class FsckReport:
    repair: bool = False
    built: bool = True  # the references were built (else gc's first run builds them)
    records: int = 0  # read
    variants: int = 0  # distinct paths the manifests name
    claims: int = 0  # markers listed
    missing: Finding = field(default_factory=Finding)  # variant paths
    unclaimed: Finding = field(default_factory=Finding)  # markers: refs/<variant>/<digest>
    dangling: Finding = field(default_factory=Finding)  # markers
    damaged: Finding = field(default_factory=Finding)  # records, in the manifest store
    in_flight: list[str] = field(default_factory=list)  # young markers no manifest names
    sources: dict[str, list[str]] = field(default_factory=dict)  # key -> its missing paths
    unrepaired: dict[str, str] = field(default_factory=dict)  # key or marker -> why
    seconds: float = 0.0

    def found(self) -> int:
        return sum(len(getattr(self, kind).paths) for kind in KINDS)

    def left(self) -> int:
        return sum(len(getattr(self, kind).left()) for kind in KINDS)

    def to_object(self) -> dict[str, Any]:
        kinds = {kind: getattr(self, kind).to_object() for kind in KINDS}
        return {"repair": self.repair, "built": self.built, "records": self.records,
                "variants": self.variants, "claims": self.claims, **kinds,
                "in_flight": {"count": len(self.in_flight), "paths": self.in_flight},
                "sources": self.sources, "unrepaired": self.unrepaired,
                "found": self.found(), "left": self.left(), "seconds": self.seconds}

    def lines(self) -> list[str]:
        """One line a kind found."""
        what = {"missing": "variant file(s) a manifest names are not in the origin",
                "unclaimed": "claim(s) a manifest needs are not there",
                "dangling": "claim(s) no manifest stands behind",
                "damaged": "record(s) cannot be read (make their sources again)"}
        done = {"missing": "made again", "unclaimed": "added", "dangling": "dropped",
                "damaged": "repaired"}
        text = []
        for kind in KINDS:
            finding: Finding = getattr(self, kind)
            if finding.paths:
                fixed = f"; {len(finding.repaired):,} {done[kind]}" if self.repair else ""
                text.append(f"{kind}: {len(finding.paths):,} {what[kind]}{fixed}")
        if not self.built:
            text.append("references: not built yet (gc's first run builds them): manifests "
                        "made before them have no claims")
        if self.in_flight:
            text.append(f"in flight: {len(self.in_flight):,} young claim(s) no manifest "
                        "names yet (an upload under way?): left alone")
        return text

    def line(self) -> str:
        state = "clean" if not self.found() else (
            f"{self.found():,} problem(s), {self.left():,} left")
        return (f"fsck: {state}; {self.records:,} records, {self.variants:,} variants, "
                f"{self.claims:,} claims looked at; {self.seconds:.1f} s")


def check(stores: Stores, *, repair: bool = False, now: float | None = None,
          settings: Settings | None = None, progress: Progress | None = None,
          pixels: PixelWork | None = None) -> FsckReport:
    """Check the store (see the module's docstring); ``repair`` needs ``settings`` (the
    missing files are made with them) and runs the pixel work in ``pixels`` (by default a
    worker process, so that a decoder crash fails its source alone)."""
    if repair and settings is None:
        raise ValueError("check(repair=True) needs the settings to make missing files again")
    stores.check(WRITE if repair else READ)  # a check reads; a repair writes and removes
    started = time.monotonic()
    now = time.time() if now is None else now
    tick = progress or (lambda *_: None)
    report = FsckReport(repair=repair, built=stores.manifests.references.built())
    manifests, keys = _read(stores, report)
    _find_missing(stores, report, keys)
    _find_claims(stores, report, keys, now)
    if repair:
        assert settings is not None
        _repair_claims(stores, report, tick)  # first: a source made again claims only what
        _remake(stores, report, manifests, settings, pixels, tick)  # its last manifest did not
    report.seconds = time.monotonic() - started
    return report


def _read(stores: Stores, report: FsckReport) -> tuple[dict[str, Manifest], dict[str, set[str]]]:
    """Every record: the manifests by key, and variant path -> keys of those naming it."""
    seen = len(stores.manifests.damaged)  # (the list keeps what earlier reads found too)
    manifests: dict[str, Manifest] = {}
    keys: dict[str, set[str]] = {}
    for record in stores.manifests.everything():
        report.records += 1
        if isinstance(record, Manifest):
            manifests[record.key] = record
            for path in named(record):
                keys.setdefault(path, set()).add(record.key)
    report.damaged.paths = sorted({str(p) for p in stores.manifests.damaged[seen:]})
    report.variants = len(keys)
    return manifests, keys


def _find_missing(stores: Stores, report: FsckReport, keys: dict[str, set[str]]) -> None:
    listed = {str(path) for path, _ in sharded(stores.origin, stores.layout, times=False)}
    for path in sorted(keys):
        if path in listed or stores.origin.exists(path):  # (written since it was listed)
            continue
        report.missing.paths.append(path)
        for key in keys[path]:
            report.sources.setdefault(key, []).append(path)


def _find_claims(stores: Stores, report: FsckReport, keys: dict[str, set[str]],
                 now: float) -> None:
    references = stores.manifests.references
    digests = {path: {key_digest(k) for k in found} for path, found in keys.items()}
    unread = {PurePosixPath(p).stem for p in report.damaged.paths}  # a record is its digest
    times = listed_times(references.store)  # else looked up for the few that need it
    claimed: dict[str, set[str]] = {}
    for path, digest, when in references.claimed(times=times):
        report.claims += 1
        claimed.setdefault(path, set()).add(digest)
        if digest in digests.get(path, ()) or digest in unread:
            continue
        when = when if times else references.written(path, digest)
        if when:  # (0.0: removed since it was listed)
            young = when > now - STALE_CLAIM
            (report.in_flight if young else report.dangling.paths).append(_marker(path, digest))
    for path, wanted in digests.items():
        if stores.layout.holds(path):  # a path of another shape (written by hand) has none
            report.unclaimed.paths += [_marker(path, d) for d in wanted - claimed.get(path, set())]
    for found in (report.in_flight, report.dangling.paths, report.unclaimed.paths):
        found.sort()


def _marker(path: str, digest: str) -> str:
    return f"{REFS}/{path}/{digest}"


def _parts(marker: str) -> tuple[str, str]:
    """(variant path, digest) of a marker."""
    path, digest = marker[len(REFS) + 1:].rsplit("/", 1)
    return path, digest


def _names(stores: Stores, digest: str, path: str) -> bool | None:
    """Whether the record of this digest names ``path`` now; None when it cannot be read."""
    manifests = stores.manifests
    place = manifests.layout.path_for(f"{digest}.json", digest)
    raw = manifests.store.read(place)
    if raw is None:
        return False
    found = sound(parse_record(raw))
    if found is None or key_digest(found.key) != digest:
        return None
    return path in named(found)


def _repair_claims(stores: Stores, report: FsckReport, tick: Progress) -> None:
    """Each claim's record read again just before it is set right: a run that changed it
    meanwhile wins."""
    todo = [(report.unclaimed, m) for m in report.unclaimed.paths]
    todo += [(report.dangling, m) for m in report.dangling.paths]
    for done, (finding, marker) in enumerate(todo, start=1):
        try:
            if finding is report.unclaimed:
                _claim(stores, *_parts(marker))
            else:
                _drop(stores, *_parts(marker))
        except ImgwarmError as error:
            report.unrepaired[marker] = str(error)
        else:
            finding.repaired.append(marker)
        tick("claims", done, len(todo))


def _claim(stores: Stores, path: str, digest: str) -> None:
    if _names(stores, digest, path) is not False:  # (unreadable: a claim too many only
        stores.manifests.references.claim_digest(digest, path)  # keeps a file a while)


def _drop(stores: Stores, path: str, digest: str) -> None:
    references = stores.manifests.references
    state = _names(stores, digest, path)
    if state is None:
        raise ImgwarmError("its record cannot be read now: left")
    if state:
        return  # named again since it was listed: nothing dangles
    # Noted before the claim goes (a crash between leaves a note that gc finds named and
    # forgets) and after (a gc between the two may have forgotten the first): the grace
    # always starts after the claim went.
    references.note_dropped([path])
    references.release_digest(digest, path)
    references.note_dropped([path])
    if _names(stores, digest, path) is not False:  # its source claimed it meanwhile
        references.claim_digest(digest, path)


def _remake(stores: Stores, report: FsckReport, manifests: dict[str, Manifest],
            settings: Settings, pixels: PixelWork | None, tick: Progress) -> None:
    """Each source with a missing file made again from its original, one failing alone."""
    if not report.sources:
        return
    remade: set[str] = set()
    with _pixel_work(pixels) as work:
        for done, key in enumerate(sorted(report.sources), start=1):
            try:
                current = stores.manifests.record(key)
                if current != manifests[key]:
                    report.unrepaired[key] = "its record changed while fsck ran: run it again"
                    continue
                made = _made_again(manifests[key], settings, stores, work)
                gone = [v.path for v in made.manifest.variants
                        if not stores.origin.exists(v.path)]
                if gone:
                    report.unrepaired[key] = f"made again, still missing {', '.join(gone)}"
                else:
                    remade.add(key)
            except Exception as error:  # one source's failure is its own
                report.unrepaired[key] = _reason(error)
            tick("made again", done, len(report.sources))
    named_by: dict[str, set[str]] = {}
    for key, paths in report.sources.items():
        for path in paths:
            named_by.setdefault(path, set()).add(key)
    report.missing.repaired = [p for p in report.missing.paths
                               if named_by[p] <= remade or stores.origin.exists(p)]


def _made_again(manifest: Manifest, settings: Settings, stores: Stores,
                pixels: PixelWork) -> Outcome:
    """Through optimize, which finds a file missing and makes the source again; when the
    original cannot be read it raises, and records no failure over the manifest (I4)."""
    from imgwarm.pipeline.optimize import optimize_file, optimize_key

    key, credits = manifest.key, _credits(manifest, settings)
    if os.path.isabs(key):  # a local source: its key is the file's real path
        return optimize_file(Path(key), key=key, settings=settings, stores=stores,
                             credits=credits, pixels=pixels)
    return optimize_key(key, settings=settings, stores=stores, credits=credits, pixels=pixels)


def _credits(manifest: Manifest, settings: Settings) -> Credits | None:
    """None when the source was made with its own EXIF's text (its digest says so); else its
    manifest's text, given again: text given once (``--description``) is never lost."""
    from imgwarm.pipeline.optimize import settings_digest

    if settings_digest(settings, Credits()) == manifest.settings_digest:
        return None
    return Credits(description=manifest.description, copyright=manifest.copyright,
                   artist=manifest.artist)


def _pixel_work(pixels: PixelWork | None) -> contextlib.AbstractContextManager[PixelWork]:
    if pixels is not None:
        return contextlib.nullcontext(pixels)
    from imgwarm.pipeline.isolate import Isolated

    return Isolated(1)


def _reason(error: Exception) -> str:
    reason = getattr(error, "reason", None)  # a SourceError's, without its source repeated
    return str(reason) if reason else str(error) or type(error).__name__
