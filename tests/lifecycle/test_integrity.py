"""The six ways the lifecycle lost files a manifest named (issue 22), each a deterministic test:
the races are forced at named race points (imgwarm/racepoints.py), the failures injected at
one store call. Each failed before its fix; they assert on the files really there."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from imgwarm import racepoints
from imgwarm.config import Settings
from imgwarm.exceptions import CorruptImage, StorageError, UnreadableSource
from imgwarm.lifecycle.delete import delete
from imgwarm.lifecycle.gc import collect
from imgwarm.manifest import Failure, Tombstone
from imgwarm.pipeline.optimize import optimize_file, optimize_key
from imgwarm.store import Stores
from imgwarm.store.changes import Batch, ChangeLog
from imgwarm.store.manifests import ManifestStore
from imgwarm.store.references import REFS, key_digest
from tests.support.lifecycle import by_key, claims, forget_references, in_origin, site_on, stores
from tests.support.sites import Site

pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]
WEEK = 7 * 86400.0


class FailingJournal:
    """A change journal whose appends fail (a full disk, S3 refusing): everything else works."""

    def __init__(self, real: ChangeLog | None) -> None:
        assert real is not None
        self.real = real

    def append(self, key: str) -> None:
        raise StorageError(f"cannot append to the journal for {key}: injected")

    def since(self, cursor: str) -> Batch:
        return self.real.since(cursor)

    def now(self) -> str:
        return self.real.now()

    def readable(self, cursor: str) -> bool:
        return self.real.readable(cursor)


def journal_failing(site: Site) -> Stores:
    real = stores(site)
    manifests = ManifestStore(real.manifests.store, real.layout,
                              FailingJournal(real.manifests.changes))  # type: ignore[arg-type]
    return Stores(real.origin, manifests, real.layout)


def origin_paths(site: Site) -> set[str]:
    found = stores(site)
    return {str(p) for p in found.origin.files() if found.layout.holds(str(p))}


# 1. A redelivered job whose original is gone (or replaced by a bad file) keeps the manifest.

def test_a_failed_read_or_make_never_replaces_a_good_manifest(site: Site) -> None:
    origin = stores(site).origin
    key = "up/ad-1/bike.jpg"
    origin.write(key, (site.sources / "photo-0.jpg").read_bytes())
    good = optimize_key(key, settings=site.settings, stores=stores(site)).manifest
    origin.delete(key)  # moved away: the job is redelivered
    with pytest.raises(UnreadableSource, match="no such original"):
        optimize_key(key, settings=site.settings, stores=stores(site))
    assert stores(site).manifests.read(key) == good
    origin.write(key, b"\xff\xd8\xff\xe0 not a photo at all", replace=True)
    with pytest.raises(CorruptImage):
        optimize_key(key, settings=site.settings, stores=stores(site))
    assert stores(site).manifests.read(key) == good
    collect(stores(site), grace=0)
    assert in_origin(site, good) == {v.path for v in good.variants}
    assert {p for p, d in claims(site) if d == key_digest(key)} == {v.path for v in good.variants}


def test_a_failure_is_still_recorded_where_nothing_was_made(site: Site) -> None:
    with pytest.raises(UnreadableSource):
        optimize_key("up/never-there.jpg", settings=site.settings, stores=stores(site))
    assert isinstance(stores(site).manifests.read("up/never-there.jpg"), Failure)


def test_a_redelivered_job_does_not_undo_a_takedown(site: Site) -> None:
    origin = stores(site).origin
    key = "up/ad-2/car.jpg"
    origin.write(key, (site.sources / "photo-1.jpg").read_bytes())
    optimize_key(key, settings=site.settings, stores=stores(site))
    delete(key, stores(site), original=True)
    with pytest.raises(UnreadableSource):
        optimize_key(key, settings=site.settings, stores=stores(site))
    assert isinstance(stores(site).manifests.read(key), Tombstone)


# 2. The journal append fails after the manifest was written.

def test_a_journal_that_fails_leaves_the_previous_record_and_its_files(site: Site) -> None:
    before = origin_paths(site)
    path = site.sources / "new.jpg"
    path.write_bytes((site.sources / "photo-0.jpg").read_bytes()[:-2] + b"\xff\xd9")
    with pytest.raises(StorageError, match="journal"):
        optimize_file(path, settings=site.settings, stores=journal_failing(site))
    assert stores(site).manifests.read(str(path.resolve())) is None  # put back: none
    assert origin_paths(site) == before  # what it made went (the twin's were there before)

    old = by_key(site)["photo-1.jpg"]  # made again with other settings: the journal fails
    other = site.settings.updated(widths="480,960")
    with pytest.raises(StorageError, match="journal"):
        optimize_file(Path(old.key), settings=other, stores=journal_failing(site))
    assert stores(site).manifests.read(old.key) == old
    assert in_origin(site, old) == {v.path for v in old.variants}
    assert origin_paths(site) == before
    for manifest in site.manifests():  # I1: every manifest names only files that are there
        assert in_origin(site, manifest) == {v.path for v in manifest.variants}


# 3. A failed publish's cleanup meets a twin that claimed the same files meanwhile.

class RecordRefused:
    """A manifest store's Store whose write of one record fails (a full disk, a refused
    PUT): everything else goes through to the real one."""

    def __init__(self, real: object, refused: str) -> None:
        self.real, self.refused = real, refused

    def write(self, key: object, data: bytes, *, replace: bool = False) -> bool:
        if str(key) == self.refused:
            raise StorageError(f"cannot write {key}: injected")
        return self.real.write(key, data, replace=replace)  # type: ignore[attr-defined, no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def test_a_failed_make_leaves_the_files_a_twin_claimed_meanwhile(site: Site) -> None:
    data = (site.sources / "photo-1.jpg").read_bytes()
    first, twin = site.sources / "a" / "shared.jpg", site.sources / "b" / "shared.jpg"
    for path in (first, twin):
        path.parent.mkdir()
        path.write_bytes(data)
    real = stores(site)
    refused = str(real.manifests.key_path(str(first.resolve())))
    failing = Stores(real.origin, ManifestStore(RecordRefused(real.manifests.store, refused),  # type: ignore[arg-type]
                                                real.layout, real.manifests.changes), real.layout)

    def twin_uploads() -> None:  # the first's files are written; its manifest is not yet
        optimize_file(twin, settings=site.settings, stores=stores(site))

    with racepoints.at("optimize.written", twin_uploads), pytest.raises(StorageError):
        optimize_file(first, settings=site.settings, stores=failing)
    made = stores(site).manifests.get(str(twin.resolve()))
    assert made is not None and stores(site).manifests.read(str(first.resolve())) is None
    assert in_origin(site, made) == {v.path for v in made.variants}
    collect(stores(site), grace=0, full=True)
    assert in_origin(site, made) == {v.path for v in made.variants}


# 4. delete on a store whose references were never built (or were lost).

def test_delete_without_references_keeps_a_twins_files(site: Site) -> None:
    twin = site.add("twin/photo-0.jpg", seed=0)
    first, other = by_key(site)["photo-0.jpg"], by_key(site)["photo-1.jpg"]
    forget_references(stores(site))
    done = delete(first.key, stores(site))
    assert not done.removed and sorted(done.pending) == sorted(v.path for v in first.variants)
    assert in_origin(site, twin) == {v.path for v in twin.variants}
    assert "left for gc" in done.line()
    gone = delete(other.key, stores(site))
    assert in_origin(site, other) == {v.path for v in other.variants}  # gc's, not yet
    report = collect(stores(site), grace=WEEK)  # builds them; a takedown does not wait
    assert report.full and sorted(report.paths) == sorted(gone.pending)
    assert in_origin(site, other) == set()
    assert in_origin(site, twin) == {v.path for v in twin.variants}


# 5. gc --full reads a manifest, the source is made again, gc puts the old claim back.

def backdate(site: Site, paths: set[str], seconds: float) -> None:
    origin = site.settings.store.origin_root
    for path in paths:
        when = time.time() - seconds
        os.utime(origin / path, (when, when))


@pytest.fixture
def local_site(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
               ram: Path) -> Site:
    """A local origin: these cases set the files' times by hand (S3 keeps its own)."""
    return site_on("local", request, settings, tmp_path, ram)


def test_a_full_pass_racing_a_remake_never_shortens_the_grace(local_site: Site) -> None:
    site = local_site
    old = by_key(site)["photo-1.jpg"]
    dropped = {v.path for v in old.variants}
    backdate(site, dropped, 30 * 86400)  # written a month ago
    other = site.settings.updated(widths="480,960")

    def made_again() -> None:  # gc has read every record: the source is made again
        optimize_file(Path(old.key), settings=other, stores=stores(site))

    start = time.time()
    with racepoints.at("gc.records_read", made_again):
        first = collect(stores(site), grace=WEEK, full=True, now=start)
    assert first.claims_added == 0  # the dropped claim is not given back
    assert not {p for p, d in claims(site) if p in dropped}
    collect(stores(site), grace=WEEK, now=start + 3600)
    collect(stores(site), grace=WEEK, full=True, now=start + 3 * 3600)
    assert in_origin(site, old) == dropped  # a week after the drop, not after the write
    late = collect(stores(site), grace=WEEK, full=True, now=start + WEEK + 3600)
    assert dropped <= set(late.paths) and in_origin(site, old) == set()


def test_a_full_pass_keeps_a_claim_made_again_since_it_read_the_records(
        local_site: Site) -> None:
    site = local_site
    source = by_key(site)["photo-0.jpg"]
    paths = {v.path for v in source.variants}
    other = site.settings.updated(widths="480,960")
    optimize_file(Path(source.key), settings=other, stores=stores(site))  # away from them
    digest = key_digest(source.key)
    references = stores(site).manifests.references
    store = stores(site).manifests.store
    hours_ago = time.time() - 2 * 3600
    for path in paths:  # old claims no manifest stands behind (a job killed long ago)
        references.claim_digest(digest, path)
        os.utime(store.path(f"{REFS}/{path}/{digest}"), (hours_ago, hours_ago))

    def made_back() -> None:  # gc has read every record: the source names them again, and
        optimize_file(Path(source.key), settings=site.settings, stores=stores(site))
        # its claims were there already (a claim is made once): they keep their old time

    with racepoints.at("gc.records_read", made_back):
        collect(stores(site), grace=0, full=True)
    now_named = stores(site).manifests.get(source.key)
    assert now_named is not None and {v.path for v in now_named.variants} == paths
    assert {(p, digest) for p in paths} <= claims(site)  # the live claims stand
    assert in_origin(site, now_named) == paths


# 6. warm --full and files it never placed.

def test_warm_full_removes_only_files_this_index_wrote(site: Site) -> None:
    site.warm()
    tiers = {"ram": Path(site.settings.cache.ram_root), "nvme": Path(site.settings.cache.nvme_root)}
    foreign: list[Path] = []
    shaped = "ab/cd/someone-else.0123456789abcdef0123.webp"  # a variant's shape, not ours
    for root in tiers.values():
        for name in (".keep", "other-program.sock", "notes/readme.txt", shaped):
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"not imgwarm's")
            foreign.append(path)
    report = site.warm(full=True)
    assert all(path.read_bytes() == b"not imgwarm's" for path in foreign)
    assert report.ram.foreign == 4 and report.nvme.foreign == 4


def test_warm_full_still_removes_a_copy_it_lost_track_of(site: Site) -> None:
    site.warm()
    from imgwarm.cache.index import Index

    index = Index(Path(site.settings.cache.cache_state) / "index.sqlite")
    (path,) = [p for (p,) in index.db.execute(
        "SELECT path FROM variants WHERE nvme = 'placed' ORDER BY path LIMIT 1")]
    index.db.execute("UPDATE variants SET nvme = NULL WHERE path = ?", (path,))
    index.close(keep=True)
    report = site.warm(full=True, dry_run=True)
    assert report.nvme.foreign == 0 and report.nvme.repaired == 1  # ours: it would go
    report = site.warm(full=True)
    assert report.nvme.foreign == 0 and report.nvme.repaired == 1
    assert (Path(site.settings.cache.nvme_root) / path).is_file()  # wanted: placed again


# 7. A put-back that fails (review of issue 22): the other variants still go back, and the
# failed one's bytes are kept on local disk, named in the error, never only in memory.

class Unknowable:
    """References whose look-up after the removals fails: every removed variant must go
    back (who claimed it meanwhile cannot be told)."""

    def __init__(self, real: object, before: bool = True) -> None:
        self.real, self.before = real, before

    def holders(self, path: str) -> list[str]:
        if self.before:
            self.before = False
            return []
        raise StorageError("the claims cannot be read")

    def by_variant(self) -> dict[str, list[str]]:
        raise StorageError("the claims cannot be listed")


def test_a_failed_put_back_keeps_the_bytes_and_puts_back_the_rest(site: Site) -> None:
    from imgwarm.store.reclaim import reclaim, reclaim_listed
    from tests.support.faults import Faults, armed, faulty

    s = stores(site)
    paths = [str(s.path_of(f"gone-{n}.{n:016x}.webp")) for n in range(3)]
    for n, path in enumerate(paths):
        s.origin.write(path, f"variant {n}".encode())
    faults = Faults()
    origin = faulty(s.origin, faults)
    with armed(faults, 1, {"write"}), pytest.raises(StorageError) as raised:
        reclaim_listed(origin, Unknowable(s.manifests.references), paths,  # type: ignore[arg-type]
                       lambda done: None)
    assert [s.origin.read(p) for p in paths[1:]] == [b"variant 1", b"variant 2"]
    assert s.origin.read(paths[0]) is None  # the one whose put-back failed
    spooled = Path(str(raised.value).split(f"{paths[0]} (")[1].split(")")[0])
    assert spooled.read_bytes() == b"variant 0"

    with armed(faults, 1, {"write"}), pytest.raises(StorageError) as one:
        reclaim(origin, Unknowable(s.manifests.references), paths[1])  # type: ignore[arg-type]
    rescued = Path(str(one.value).split("copy ")[1].split(" back")[0])
    assert rescued.read_bytes() == b"variant 1" and s.origin.read(paths[1]) is None


# 8. A takedown while the source is being made (issue 39: a bucket event's removal handled by
#    one worker while another still makes the upload): the make must not publish after it.

def test_a_takedown_during_a_make_is_not_undone(site: Site) -> None:
    made = by_key(site)["photo-0.jpg"]
    source = site.sources / "photo-0.jpg"
    source.write_bytes(source.read_bytes() + b"\0")  # changed: made again, new variants
    key = made.key

    def taken_down() -> None:
        delete(key, stores(site))

    before = origin_paths(site)
    with racepoints.at("optimize.written", taken_down), \
            pytest.raises(UnreadableSource, match="taken down while it was being made"):
        optimize_file(source, settings=site.settings, stores=stores(site), key=key)
    record = stores(site).manifests.read(key)
    assert isinstance(record, Tombstone)
    assert origin_paths(site) == before - {v.path for v in made.variants}  # no new file stayed


def test_an_upload_removed_before_its_make_ends_is_never_published(site: Site) -> None:
    source = site.sources / "fresh.jpg"
    source.write_bytes((site.sources / "photo-1.jpg").read_bytes() + b"\0")
    key = str(source.resolve())

    def removed() -> None:  # the original's removal, then its event's takedown
        assert delete(key, stores(site), when_gone=True).back  # still there: kept
        source.unlink()
        assert not delete(key, stores(site), when_gone=True).back

    before = origin_paths(site)
    with racepoints.at("optimize.written", removed), pytest.raises(UnreadableSource):
        optimize_file(source, settings=site.settings, stores=stores(site), key=key)
    assert isinstance(stores(site).manifests.read(key), Tombstone)
    assert origin_paths(site) == before
