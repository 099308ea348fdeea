"""``imgwarm gc``: variants no manifest names go after the grace period (a clock set by the
test), from the origin (local, and S3 over moto's HTTP server) and from the tiers; a dry run
changes nothing; a full pass finds what no reference says."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.lifecycle.delete import delete
from imgwarm.lifecycle.gc import gc
from imgwarm.manifest import Manifest, Tombstone
from imgwarm.store.references import key_digest
from tests.support.cli import Cli
from tests.support.lifecycle import by_key, claims, in_origin, site_on, stores
from tests.support.s3 import s3_params
from tests.support.sites import Site, synthetic

DAY = 86400.0
pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]


def remade_narrower(site: Site) -> tuple[set[str], set[str]]:
    """Every source made again without its 1280 width: (old paths no manifest names now,
    paths the new manifests name)."""
    before = {v.path for m in site.manifests() for v in m.variants}
    site.settings = site.settings.updated(widths="320,640")
    for name in sorted(by_key(site)):
        site.add(name, seed=int(name.split("-")[1].split(".")[0]))
    after = {v.path for m in site.manifests() for v in m.variants}
    assert before - after
    return before - after, after


def present(site: Site, paths: set[str]) -> set[str]:
    origin = stores(site).origin
    return {p for p in paths if origin.exists(p)}


def test_old_variants_go_only_after_the_grace_period(site: Site) -> None:
    old, new = remade_narrower(site)
    now = time.time()
    report = gc(site.settings, now=now)
    assert (report.removed, report.waiting) == (0, len(old))
    assert present(site, old) == old

    dry = gc(site.settings, now=now + 8 * DAY, dry_run=True)
    assert set(dry.paths) == old and dry.removed == len(old) and dry.dry_run
    sizes = stores(site).origin
    assert dry.removed_bytes == sum(sizes.size(p) or 0 for p in old) > 0
    assert present(site, old) == old  # a dry run changes nothing

    done = gc(site.settings, now=now + 8 * DAY)
    assert set(done.paths) == old and done.removed_bytes == dry.removed_bytes
    assert present(site, old) == set() and present(site, new) == new
    again = gc(site.settings, now=now + 9 * DAY)
    assert (again.removed, again.looked_at) == (0, 0)  # nothing left to look at


def test_a_full_pass_finds_orphans_and_sets_the_references_right(site: Site) -> None:
    s = stores(site)
    named = by_key(site)["photo-0.jpg"]
    orphan = str(s.path_of("orphan.0123456789abcdef.webp"))
    s.origin.write(orphan, b"RIFF left by a writer killed before its manifest")
    s.manifests.references.claim("up/never-finished.jpg", [orphan])  # its claim, stale later
    first = gc(site.settings, full=True)  # the orphan is young
    assert first.full and first.removed == 0 and s.origin.exists(orphan)
    lost = named.variants[0].path
    s.manifests.references.release(named.key, [lost])  # a claim lost (as by hand)
    later = time.time() + 8 * DAY

    quick = gc(site.settings, now=later)  # the references say nothing of the orphan
    assert not quick.full and (quick.looked_at, quick.removed) == (0, 0)
    report = gc(site.settings, now=later + 2 * 3600, full=True)  # the claim is stale now
    assert report.claims_added == 1 and report.claims_removed == 1
    # a claim removed is a drop: the grace period starts now, whatever the file's age
    assert report.paths == [] and s.origin.exists(orphan)
    assert (lost, key_digest(named.key)) in claims(site)
    assert s.origin.exists(lost) and in_origin(site, named) == {v.path for v in named.variants}
    done = gc(site.settings, now=time.time() + 8 * DAY)
    assert done.paths == [orphan] and not s.origin.exists(orphan)
    assert in_origin(site, named) == {v.path for v in named.variants}


def test_tiers_keep_unnamed_variants_until_the_grace_period(site: Site) -> None:
    site.settings = site.settings.updated(drop_gone=False)
    site.warm()
    old, new = remade_narrower(site)
    site.warm()
    assert old <= site.in_tier("nvme")  # drop_gone off: warm leaves them
    now = time.time()
    early = gc(site.settings, now=now)
    assert early.tiers is not None and early.tiers["nvme"]["removed"] == 0
    late = gc(site.settings, now=now + 8 * DAY)
    assert late.tiers is not None and set(late.tiers["nvme"]["paths"]) == old
    assert site.in_tier("nvme") == new and not site.in_tier("ram") & old
    assert present(site, old) == set()
    assert site.warm().nvme.copied == 0  # the index agrees with the tiers


def test_the_command(site: Site) -> None:
    old, _ = remade_narrower(site)
    later = str(time.time() + 8 * DAY)
    bad = Cli()("gc", "--grace", "soon", env=site.env())
    assert bad.exit_code == 2 and "--grace" in bad.stderr
    dry = Cli()("gc", "--dry-run", "--now", later, env=site.env())
    assert dry.exit_code == 0, dry.stderr
    assert {line.split()[-1] for line in dry.stdout.splitlines()
            if line.startswith("would remove ")} == old
    assert present(site, old) == old
    done = Cli()("gc", "--json", "--grace", "0", env=site.env())
    assert done.exit_code == 0, done.stderr
    found = json.loads(done.stdout)
    assert set(found["paths"]) == old and found["removed"] == len(old)
    assert present(site, old) == set()
    assert all(isinstance(m, Manifest) for m in site.manifests())


def many_dropped(server: str, request: pytest.FixtureRequest, settings: Settings,
                 tmp_path: Path, ram: Path) -> tuple[Site, list[Manifest], list[Manifest]]:
    """An S3 site whose layout has 8 top folders (16 entries a folder) and 30 sources of 3
    opaque variants, 10 of them made again with none: 30 candidates, past one a top folder,
    so gc lists the claims instead of looking each candidate up."""
    site = site_on(server, request, settings, tmp_path, ram, max_dir_entries=16)
    made = synthetic(site, 30, seed=7, sizes=(2000, 6000))
    s = stores(site)
    assert len(s.layout.tops()) == 8
    for manifest in made[:10]:
        s.manifests.put(manifest.model_copy(update={"variants": []}))
    return site, made[:10], made[10:]


def paths_of(manifests: list[Manifest]) -> set[str]:
    return {v.path for m in manifests for v in m.variants}


@pytest.mark.parametrize("server", s3_params())
def test_many_candidates_on_s3_are_checked_against_listings(
        server: str, request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
        ram: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site, dropped, kept = many_dropped(server, request, settings, tmp_path, ram)
    gc(site.settings, grace=7 * DAY)  # the first gc: a full pass, all within the grace
    s = stores(site)
    old = paths_of(dropped)
    requests: list[str] = []
    lookups = s.manifests.references.holders
    monkeypatch.setattr(type(s.manifests.references), "holders",
                        lambda self, path: requests.append(path) or lookups(path))
    dry = gc(site.settings, now=time.time() + 8 * DAY, dry_run=True)
    assert set(dry.paths) == old and dry.removed_bytes == sum(
        v.bytes for m in dropped for v in m.variants)
    assert present(site, old) == old

    # A source claims one of them just as it goes (an identical upload): it is put back.
    again = sorted(old)[0]
    delete = type(s.origin).delete

    def racing(store: object, key: object) -> None:
        delete(store, key)  # type: ignore[arg-type]
        if str(key) == again:
            s.manifests.references.claim("up/uploaded-meanwhile.jpg", [again])

    monkeypatch.setattr(type(s.origin), "delete", racing)
    done = gc(site.settings, now=time.time() + 8 * DAY)
    assert not requests  # no candidate looked up one by one
    assert set(done.paths) == old - {again} and done.named == 1
    assert present(site, old) == {again}
    assert s.origin.read(again) is not None and present(site, paths_of(kept)) == paths_of(kept)
    assert not list(s.manifests.references.dropped())


def test_a_marker_that_names_no_variant_never_removes_a_file(site: Site) -> None:
    """A dropped/ marker made by hand (or by anyone who can write the manifest store) for a
    path of another shape, say an original's under a top shard folder's name, is no
    candidate: gc removes only what has a variant's shape."""
    s = stores(site)
    gc(site.settings)  # the references built
    s.origin.write("00/ad-3/keep.jpg", b"an original the application keeps")
    s.manifests.store.write("dropped/00/ad-3/keep.jpg", b"")
    report = gc(site.settings, grace=0)
    assert report.looked_at == 0 and not report.paths
    assert s.origin.read("00/ad-3/keep.jpg") == b"an original the application keeps"


@pytest.mark.parametrize("name", [
    "photo.0123456789abcdef.",  # no extension
    "photo.0123456789abcdef.we_bp",  # not one of ours
    "photo.0123456789abcdef.JPG",  # ours are lowercase
    "Photo.0123456789abcdef.jpg",  # a slug imgwarm never writes
    f"photo.{'0123456789abcdef' * 4}0.jpg",  # 65 hex digits
    "my photo.0123456789abcdef.webp",
])
def test_a_file_of_nearly_a_variants_shape_is_never_removed(site: Site, name: str) -> None:
    """Only the exact shape imgwarm names a variant with is gc's to remove: a file of
    nearly that shape, in the very folder its hash puts it, is the application's, however
    old and unnamed; and it cannot be made as a source either (it would be taken for one)."""
    from imgwarm.exceptions import LayoutError
    from imgwarm.store.origin import check_source_key

    s = stores(site)
    path = str(s.path_of(name))
    s.origin.write(path, b"an original the application keeps")
    with pytest.raises(LayoutError, match="shape of a variant"):
        check_source_key(path)
    report = gc(site.settings, now=time.time() + 30 * DAY, grace=0, full=True)
    assert path not in report.paths
    assert s.origin.read(path) == b"an original the application keeps"


def test_a_takedowns_variant_a_twin_kept_waits_the_grace_when_the_twin_drops_it(
        site: Site) -> None:
    """Found by the rolling-upgrade test: a source deleted while a twin (the same photo under
    another key) named its variants leaves them to the twin; when the twin is made again
    without them, they are a live source's drop and wait the grace (I2), though the
    tombstone still lists them. Before the fix, a full gc removed them at once."""
    twin = site.add("twin/photo-0.jpg", seed=0)
    first = by_key(site)["photo-0.jpg"]
    taken = delete(first.key, stores(site))
    assert not taken.removed and sorted(taken.kept) == sorted(v.path for v in twin.variants)
    site.settings = site.settings.updated(widths="320,640")
    narrower = site.add("twin/photo-0.jpg", seed=0)
    dropped = {v.path for v in twin.variants} - {v.path for v in narrower.variants}
    assert dropped and dropped <= set(stores(site).manifests.read(first.key).variants)

    now = time.time()
    for full in (True, False):
        report = gc(site.settings, now=now, full=full)
        assert report.removed == 0 and report.taken_down == 0, report.paths
        assert present(site, dropped) == dropped
    done = gc(site.settings, now=now + 8 * DAY, full=True)
    assert set(done.paths) == dropped and present(site, dropped) == set()
    assert present(site, {v.path for v in narrower.variants}) == \
        {v.path for v in narrower.variants}


def test_a_takedown_nobody_else_named_still_goes_at_once(site: Site) -> None:
    """The other side: a delete cut short after its tombstone (its variants still there, no
    one else naming them) is finished by a full gc at once, whatever the grace."""
    first = by_key(site)["photo-1.jpg"]
    mine = {v.path for v in first.variants}
    manifests = stores(site).manifests
    manifests.put(Tombstone(key=first.key, deleted=time.time(), variants=sorted(mine),
                            original=False))
    assert present(site, mine) == mine  # as a delete killed before its removals leaves it
    report = gc(site.settings, full=True)
    assert set(report.paths) == mine and report.taken_down == len(mine)
    assert present(site, mine) == set()
