"""Two runs of one key at once, one failing: an event and the reconcile queue the same upload,
or a job is handed out again while its first try still runs. Both make the same bytes, so
they claim the same markers; the failed run's undo must not take the claims or the files of
the run that publishes. Each order the two can take is forced at the race points
(imgwarm/racepoints.py); before the fix, a failed run released the markers the other counted
on (CI's flow test: a manifest naming three variants without their claims), and could remove
the files it had created under the other's manifest."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from imgwarm import racepoints
from imgwarm.exceptions import StorageError
from imgwarm.manifest import Manifest
from imgwarm.pipeline.optimize import Outcome, optimize_file
from imgwarm.store.references import key_digest
from tests.support.images import jpeg_with_exif, photo
from tests.support.invariants import check, real_stores
from tests.support.lifecycle import claims, in_origin, stores
from tests.support.sites import Site

pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]
WAIT = 60.0


class Held:
    """A run in a thread that the test holds at race points and lets go."""

    def __init__(self, run: Callable[[], Outcome]) -> None:
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self.resume = threading.Event()

    def _run(self, run: Callable[[], Outcome]) -> None:
        try:
            self.outcome = run()
        except BaseException as error:  # raised again in the test's thread, by finish()
            self.error = error

    def _until(self, point: str, go: Callable[[], None]) -> None:
        arrived, resume = threading.Event(), threading.Event()

        def hook() -> None:
            arrived.set()
            resume.wait(WAIT)

        with racepoints.at(point, hook):
            go()
            assert arrived.wait(WAIT), f"the held run never reached {point}: {self.error!r}"
        self.resume = resume

    def start_until(self, point: str) -> None:
        self._until(point, self.thread.start)

    def until(self, point: str) -> None:
        self._until(point, self.resume.set)

    def finish(self) -> Manifest:
        self.resume.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the held run did not end"
        if self.error is not None:
            raise self.error
        assert self.outcome is not None and not self.outcome.reused
        return self.outcome.manifest


def fail() -> None:
    raise StorageError("injected: the run fails once its variants are written")


@pytest.fixture
def upload(site: Site) -> Path:
    path = site.sources / "uploads" / "listing.jpg"
    path.parent.mkdir()
    path.write_bytes(jpeg_with_exif(photo(900, 600, seed=41), quality=85))
    return path


def run(site: Site, upload: Path) -> Outcome:
    return optimize_file(upload, settings=site.settings, stores=stores(site))


def published(site: Site, upload: Path, manifest: Manifest) -> None:
    """The key's manifest is the publishing run's, and it has every file and every claim."""
    assert stores(site).manifests.get(str(upload.resolve())) == manifest
    paths = {v.path for v in manifest.variants}
    assert in_origin(site, manifest) == paths
    digest = key_digest(manifest.key)
    assert {p for p, d in claims(site) if d == digest} == paths
    assert check(real_stores(site.settings)) == []


def test_the_failed_run_undoes_before_the_other_writes(site: Site, upload: Path) -> None:
    """A claims (creating the markers), B claims (finding them), A fails and undoes all (its
    markers released, the files it created removed), then B writes and publishes."""
    other = Held(lambda: run(site, upload))
    with racepoints.at("optimize.claimed", lambda: other.start_until("optimize.claimed")), \
            racepoints.at("optimize.written", fail), pytest.raises(StorageError):
        run(site, upload)
    published(site, upload, other.finish())


def test_the_other_publishes_before_the_failed_run_undoes(site: Site, upload: Path) -> None:
    """B publishes whole (its claim finding A's markers) before A's undo starts: A releases
    its markers, reads the record (B's manifest) and claims again what it names."""
    other = Held(lambda: run(site, upload))
    made: list[Manifest] = []

    def other_publishes_then_fail() -> None:
        made.append(other.finish())
        fail()

    with racepoints.at("optimize.claimed", lambda: other.start_until("optimize.claimed")), \
            racepoints.at("optimize.written", other_publishes_then_fail), \
            pytest.raises(StorageError):
        run(site, upload)
    published(site, upload, made[0])


@pytest.mark.parametrize("point", ["optimize.undoing", "optimize.released", "reclaim.read"])
def test_the_other_publishes_while_the_failed_run_undoes(site: Site, upload: Path,
                                                         point: str) -> None:
    """B publishes in the middle of A's undo. At optimize.undoing, A has read the record
    (none yet) and not released: B's claims again find the markers there, A then releases
    them, and claims again what its second read finds named. At optimize.released, A has
    released its markers and not yet read the record again: B makes again the markers it
    found. At
    reclaim.read, A has looked at a file's claims (none) and read it: A removes it, sees B's
    claim after, and puts it back."""
    other = Held(lambda: run(site, upload))
    made: list[Manifest] = []
    with racepoints.at("optimize.claimed", lambda: other.start_until("optimize.claimed")), \
            racepoints.at("optimize.written", fail), \
            racepoints.at(point, lambda: made.append(other.finish())), \
            pytest.raises(StorageError):
        run(site, upload)
    assert made, f"the other run was never let go at {point}"
    published(site, upload, made[0])


def test_files_removed_after_the_other_wrote_them_are_written_again(site: Site,
                                                                     upload: Path) -> None:
    """B has written its files (A had created them: B's writes found them there) when A
    undoes and removes them; B then publishes, claims again and writes back what is gone."""
    other = Held(lambda: run(site, upload))

    def other_writes_then_fail() -> None:
        other.until("optimize.written")
        fail()

    with racepoints.at("optimize.claimed", lambda: other.start_until("optimize.claimed")), \
            racepoints.at("optimize.written", other_writes_then_fail), \
            pytest.raises(StorageError):
        run(site, upload)
    assert stores(site).manifests.read(str(upload.resolve())) is None
    published(site, upload, other.finish())


def test_the_run_that_found_the_markers_fails_and_releases_none(site: Site,
                                                               upload: Path) -> None:
    """B claims first (creating the markers) and waits; A claims (finding them), writes the
    files and fails: it releases no marker and removes no file B's markers claim."""
    other = Held(lambda: run(site, upload))
    other.start_until("optimize.claimed")
    with racepoints.at("optimize.written", fail), pytest.raises(StorageError):
        run(site, upload)
    published(site, upload, other.finish())


def test_a_published_run_that_fails_after_keeps_everything(site: Site, upload: Path) -> None:
    """A failure once the manifest is written (making shared claims again, say) is reported,
    and nothing is undone: the manifest stands with its files and claims."""
    with racepoints.at("optimize.published", fail), pytest.raises(StorageError):
        run(site, upload)
    manifest = stores(site).manifests.get(str(upload.resolve()))
    assert manifest is not None
    published(site, upload, manifest)


def test_when_the_record_cannot_be_read_again_the_released_claims_are_made_again(
        site: Site, upload: Path) -> None:
    """The failed run's second read of its record fails (after its release): who names the
    files cannot be told, so its markers are claimed back and no file is removed (a claim
    with no record behind it is fsck --repair's, after an hour)."""
    given = stores(site)

    def unreadable(key: str) -> None:
        raise StorageError(f"injected: {key} cannot be read")

    def break_reads() -> None:
        given.manifests.read = unreadable  # type: ignore[method-assign]

    with racepoints.at("optimize.written", fail), \
            racepoints.at("optimize.released", break_reads), pytest.raises(StorageError):
        optimize_file(upload, settings=site.settings, stores=given)
    assert stores(site).manifests.read(str(upload.resolve())) is None
    digest = key_digest(str(upload.resolve()))
    marked = {p for p, d in claims(site) if d == digest}
    origin = stores(site).origin
    assert len(marked) >= 2 and all(origin.exists(p) for p in marked)
