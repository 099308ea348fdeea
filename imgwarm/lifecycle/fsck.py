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
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from imgwarm.config import Settings
from imgwarm.exceptions import ImgwarmError
from imgwarm.lifecycle.gc import STALE_CLAIM
from imgwarm.lifecycle.spool import NAMED, Spool
from imgwarm.manifest import Credits, Manifest, named, parse_record
from imgwarm.reporting import Progress
from imgwarm.store import Stores
from imgwarm.store.format import READ, WRITE
from imgwarm.store.listing import Listings, ahead, listed_times, sharded
from imgwarm.store.manifests import sound
from imgwarm.store.references import REFS, key_digest
from imgwarm.store.shard import Shard, merged_shard

if TYPE_CHECKING:
    from imgwarm.pipeline.isolate import PixelWork
    from imgwarm.pipeline.optimize import Outcome

KINDS = ("missing", "unclaimed", "dangling", "damaged")
PATHS_KEPT = 100_000  # paths a report keeps a kind (its counts stay exact): memory is bounded


@dataclass
class Finding:
    """One kind of bad state: where it was found (sorted; the first PATHS_KEPT), and which
    of those are right after the run (repaired, or found right when looked at again before
    the repair); ``count`` and ``fixed`` are exact."""

    paths: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    count: int = 0
    fixed: int = 0

    def add(self, path: str) -> None:
        self.count += 1
        if len(self.paths) < PATHS_KEPT:
            self.paths.append(path)

    def fix(self, path: str) -> None:
        self.fixed += 1
        if len(self.repaired) < PATHS_KEPT:
            self.repaired.append(path)

    def left(self) -> int:
        return self.count - self.fixed

    def to_object(self) -> dict[str, Any]:
        return {"count": self.count, "paths": self.paths, "repaired": self.repaired,
                "repaired_count": self.fixed}

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Finding:
        return cls(list(obj["paths"]), list(obj["repaired"]), int(obj["count"]),
                   int(obj.get("repaired_count", len(obj["repaired"]))))

    @classmethod
    def merged(cls, findings: list[Finding]) -> Finding:
        return cls(sorted(p for f in findings for p in f.paths),
                   sorted(p for f in findings for p in f.repaired),
                   sum(f.count for f in findings), sum(f.fixed for f in findings))


@dataclass
class FsckReport:
    repair: bool = False
    built: bool = True  # the references were built (else gc's first run builds them)
    records: int = 0  # read (of a slice: those in its folders of the manifest store)
    variants: int = 0  # distinct paths the manifests name
    claims: int = 0  # markers listed
    missing: Finding = field(default_factory=Finding)  # variant paths
    unclaimed: Finding = field(default_factory=Finding)  # markers: refs/<variant>/<digest>
    dangling: Finding = field(default_factory=Finding)  # markers
    damaged: Finding = field(default_factory=Finding)  # records, in the manifest store
    in_flight: list[str] = field(default_factory=list)  # young markers no manifest names
    in_flight_count: int = 0
    sources: dict[str, list[str]] = field(default_factory=dict)  # key -> its missing paths
    unrepaired: dict[str, str] = field(default_factory=dict)  # key or marker -> why
    shard: str = "1/1"
    seconds: float = 0.0

    def found(self) -> int:
        return sum(getattr(self, kind).count for kind in KINDS)

    def left(self) -> int:
        return sum(getattr(self, kind).left() for kind in KINDS)

    def young(self, marker: str) -> None:
        self.in_flight_count += 1
        if len(self.in_flight) < PATHS_KEPT:
            self.in_flight.append(marker)

    def to_object(self) -> dict[str, Any]:
        kinds = {kind: getattr(self, kind).to_object() for kind in KINDS}
        return {"repair": self.repair, "built": self.built, "records": self.records,
                "variants": self.variants, "claims": self.claims, **kinds,
                "in_flight": {"count": self.in_flight_count, "paths": self.in_flight},
                "sources": self.sources, "unrepaired": self.unrepaired,
                "found": self.found(), "left": self.left(), "paths_kept": PATHS_KEPT,
                "shard": self.shard, "seconds": self.seconds}

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> FsckReport:
        """A report from its ``to_object`` (a slice's, sent back by a worker)."""
        kinds = {kind: Finding.from_object(obj[kind]) for kind in KINDS}
        return cls(repair=bool(obj["repair"]), built=bool(obj["built"]),
                   records=int(obj["records"]), variants=int(obj["variants"]),
                   claims=int(obj["claims"]), **kinds,
                   in_flight=list(obj["in_flight"]["paths"]),
                   in_flight_count=int(obj["in_flight"]["count"]),
                   sources={k: list(v) for k, v in obj["sources"].items()},
                   unrepaired=dict(obj["unrepaired"]), shard=str(obj.get("shard", "1/1")),
                   seconds=float(obj["seconds"]))

    @classmethod
    def merged(cls, reports: list[FsckReport]) -> FsckReport:
        """The union of slices: counts added, paths concatenated and sorted; ``shard`` is
        "1/1" when they are every slice of one count, else theirs joined; the seconds of the
        longest."""
        sources: dict[str, list[str]] = {}
        for report in reports:
            for key, paths in report.sources.items():
                sources.setdefault(key, []).extend(paths)
        return cls(repair=any(r.repair for r in reports), built=all(r.built for r in reports),
                   records=sum(r.records for r in reports),
                   variants=sum(r.variants for r in reports),
                   claims=sum(r.claims for r in reports),
                   **{kind: Finding.merged([getattr(r, kind) for r in reports])
                      for kind in KINDS},
                   in_flight=sorted(p for r in reports for p in r.in_flight),
                   in_flight_count=sum(r.in_flight_count for r in reports),
                   sources={k: sorted(v) for k, v in sorted(sources.items())},
                   unrepaired={k: v for r in reports for k, v in r.unrepaired.items()},
                   shard=merged_shard([r.shard for r in reports]),
                   seconds=max((r.seconds for r in reports), default=0.0))

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
            if finding.count:
                fixed = f"; {finding.fixed:,} {done[kind]}" if self.repair else ""
                text.append(f"{kind}: {finding.count:,} {what[kind]}{fixed}")
                if finding.count > len(finding.paths):
                    text.append(f"{kind}: the first {len(finding.paths):,} paths shown")
        if not self.built:
            text.append("references: not built yet (gc's first run builds them): manifests "
                        "made before them have no claims")
        if self.in_flight_count:
            text.append(f"in flight: {self.in_flight_count:,} young claim(s) no manifest "
                        "names yet (an upload under way?): left alone")
        return text

    def line(self) -> str:
        state = "clean" if not self.found() else (
            f"{self.found():,} problem(s), {self.left():,} left")
        of = "" if self.shard == "1/1" else f" (slice {self.shard})"
        return (f"fsck{of}: {state}; {self.records:,} records, {self.variants:,} variants, "
                f"{self.claims:,} claims looked at; {self.seconds:.1f} s")


def check(stores: Stores, *, repair: bool = False, now: float | None = None,
          settings: Settings | None = None, progress: Progress | None = None,
          pixels: PixelWork | None = None, shard: Shard | None = None) -> FsckReport:
    """Check the store (see the module's docstring), or one slice of it (``shard``: the
    variants in its first-level folders; every record is still read); ``repair`` needs
    ``settings`` (the missing files are made with them) and runs the pixel work in
    ``pixels`` (by default a worker process, so that a decoder crash fails its source alone).

    In bounded memory: one streaming read of every record spools its (variant, source)
    pairs to local disk by the variant's first-level folder; then each folder is compared
    alone with the origin's listing and the claims listed under it (and its claims set
    right, with ``repair``); the sources with a missing file are made again last."""
    if repair and settings is None:
        raise ValueError("check(repair=True) needs the settings to make missing files again")
    stores.check(WRITE if repair else READ)  # a check reads; a repair writes and removes
    started = time.monotonic()
    now = time.time() if now is None else now
    shard = shard or Shard.whole()
    tick = progress or (lambda *_: None)
    report = FsckReport(repair=repair, built=stores.manifests.references.built(),
                        shard=str(shard))
    with Spool(stores.layout, shard) as spool:
        unread = _read(stores, report, spool)
        folders = spool.folders()
        # the next folders' listings (origin, claims) made while this one is compared
        listings = Listings()  # (a small store: each tree listed once, not once a folder)
        lists = ahead(stores.origin, folders, lambda top: _lists(stores, top, listings))
        for done, (top, (listed, claims)) in enumerate(lists, start=1):
            named = _named(spool, top)
            _find_claims(stores, report, named, unread, claims, now)
            _find_missing(stores, report, named, listed)
            tick("folders", done, len(folders))
    if repair:
        assert settings is not None
        _remake(stores, report, settings, pixels, tick)  # last: a source made again claims
    report.seconds = time.monotonic() - started  # only what its last manifest did not
    return report


Named = dict[str, dict[str, str]]  # variant path -> {digest: key} of the sources naming it


def _read(stores: Stores, report: FsckReport, spool: Spool) -> set[str]:
    """Every record, streamed: its pairs spooled; the records and damaged ones of this
    slice counted (a record's own folder in the manifest store says whose it is). Returns
    the digests of every damaged record (their claims stand, whatever folder)."""
    seen = len(stores.manifests.damaged)  # (the list keeps what earlier reads found too)
    mine = set(spool.tops)
    layout = stores.manifests.layout
    for record in stores.manifests.everything():
        digest = key_digest(record.key)
        report.records += layout.folder_for(digest).parts[0] in mine
        if isinstance(record, Manifest):
            for path in named(record):
                spool.add(NAMED, path, digest, record.key)
    damaged = sorted({str(p) for p in stores.manifests.damaged[seen:]})
    for path in damaged:
        if PurePosixPath(path).parts[0] in mine:
            report.damaged.add(path)
    return {PurePosixPath(p).stem for p in damaged}  # a record is named by its digest


def _named(spool: Spool, top: str) -> Named:
    found: Named = {}
    for _, path, digest, key in spool.read(top):
        found.setdefault(path, {})[digest] = key
    return found


Claims = list[tuple[str, str, float]]  # (variant path, digest, when written)


def _lists(stores: Stores, top: str, listings: Listings) -> tuple[set[str], Claims]:
    """The origin's files and the claims in one first-level folder (none for the other
    paths' folder)."""
    if not top:
        return set(), []
    references = stores.manifests.references
    times = listed_times(references.store)  # else looked up for the few that need it
    return ({str(p) for p, _ in sharded(stores.origin, stores.layout, times=False, tops=[top],
                                        listings=listings)},
            list(references.claimed(times=times, tops=[top], listings=listings)))


def _find_missing(stores: Stores, report: FsckReport, keys: Named, listed: set[str]) -> None:
    report.variants += len(keys)
    for path in sorted(keys):
        if path in listed or stores.origin.exists(path):  # (written since it was listed)
            continue
        report.missing.add(path)
        for key in keys[path].values():
            report.sources.setdefault(key, []).append(path)


def _find_claims(stores: Stores, report: FsckReport, keys: Named, unread: set[str],
                 listed: Claims, now: float) -> None:
    """The claims under one folder against what the records name (set right at once with
    ``repair``: each claim's record read again just before, so a run that changed it
    meanwhile wins)."""
    references = stores.manifests.references
    times = listed_times(references.store)  # else looked up for the few that need it
    claimed: dict[str, set[str]] = {}
    young: list[str] = []
    dangling: list[str] = []
    for path, digest, when in listed:
        report.claims += 1
        claimed.setdefault(path, set()).add(digest)
        if digest in keys.get(path, ()) or digest in unread:
            continue
        when = when if times else references.claimed_at(path, digest)
        if when:  # (0.0: removed since it was listed)
            (young if when > now - STALE_CLAIM else dangling).append(_marker(path, digest))
    unclaimed = [_marker(path, d) for path, wanted in keys.items()
                 if stores.layout.holds(path)  # a path of another shape has none
                 for d in wanted.keys() - claimed.get(path, set())]
    for marker in sorted(young):
        report.young(marker)
    for finding, markers in ((report.unclaimed, sorted(unclaimed)),
                             (report.dangling, sorted(dangling))):
        for marker in markers:
            finding.add(marker)
            if report.repair:
                _repair_claim(stores, report, finding, marker)


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


def _repair_claim(stores: Stores, report: FsckReport, finding: Finding, marker: str) -> None:
    try:
        if finding is report.unclaimed:
            _claim(stores, *_parts(marker))
        else:
            _drop(stores, *_parts(marker))
    except ImgwarmError as error:
        report.unrepaired[marker] = str(error)
    else:
        finding.fix(marker)


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


def _remake(stores: Stores, report: FsckReport, settings: Settings, pixels: PixelWork | None,
            tick: Progress) -> None:
    """Each source with a missing file made again from its original, one failing alone;
    its record read again first (the pass keeps no manifest): one that no longer names
    its missing files changed while fsck ran."""
    if not report.sources:
        return
    remade: set[str] = set()
    with _pixel_work(pixels) as work:
        for done, key in enumerate(sorted(report.sources), start=1):
            try:
                current = stores.manifests.read(key)
                if not isinstance(current, Manifest) or not set(
                        report.sources[key]) <= named(current):
                    report.unrepaired[key] = "its record changed while fsck ran: run it again"
                    continue
                made = _made_again(current, settings, stores, work)
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
    for path in sorted(named_by):
        if named_by[path] <= remade or stores.origin.exists(path):
            report.missing.fix(path)


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
    from imgwarm.pipeline.optimize import settings_digests

    if manifest.settings_digest in settings_digests(settings, Credits()):
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
