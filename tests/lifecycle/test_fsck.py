"""``imgwarm fsck``: bad states of a store (local, and S3 over moto's HTTP server) found with
their count and paths, and repaired where that is safe, checked on the real files after."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from imgwarm.lifecycle.fsck import check
from imgwarm.lifecycle.gc import STALE_CLAIM, gc
from imgwarm.manifest import Manifest
from imgwarm.pipeline.optimize import optimize_key
from imgwarm.store.references import REFS, key_digest
from tests.support.cli import Cli
from tests.support.images import decode, jpeg_with_exif, photo
from tests.support.imports import HEAVY, loaded_by
from tests.support.lifecycle import by_key, claims, in_origin, stores
from tests.support.sites import Site

DAY = 86400.0
pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]


def fsck(site: Site, *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    done = Cli()("fsck", "--json", *args, env=site.env())
    assert "Traceback" not in done.stderr, done.stderr
    return done.exit_code, json.loads(done.stdout)


def is_local(site: Site) -> bool:
    return site.settings.store.origin == "local"


def aged(site: Site, path: str, digest: str) -> float | None:
    """Make a claim marker older than STALE_CLAIM: its file's time on a local store; on S3,
    whose times cannot be set, the clock given to fsck instead (returned)."""
    if not is_local(site):
        return time.time() + 2 * STALE_CLAIM
    old = time.time() - 2 * STALE_CLAIM
    os.utime(stores(site).manifests.store.path(f"{REFS}/{path}/{digest}"), (old, old))
    return None


def origin_source(site: Site, key: str, seed: int) -> Manifest:
    """A source made from an original stored at ``key`` in the origin (local or S3)."""
    s = stores(site)
    s.origin.write(key, jpeg_with_exif(photo(900, 600, seed=seed), quality=85))
    return optimize_key(key, settings=site.settings, stores=s).manifest


def test_a_clean_store_has_nothing_to_report(site: Site) -> None:
    report = check(stores(site))
    assert report.found() == 0 and report.left() == 0 and not report.in_flight
    assert report.records == 2 and report.variants == report.claims > 0
    done = Cli()("fsck", env=site.env())
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("fsck: clean;")


def test_a_variant_removed_by_hand_is_reported_and_made_again(site: Site) -> None:
    manifest = by_key(site)["photo-0.jpg"]
    lost = manifest.variants[1]
    stores(site).origin.delete(lost.path)
    code, found = fsck(site)
    assert code == 1 and found["missing"] == {"count": 1, "paths": [lost.path], "repaired": [],
                                     "repaired_count": 0}
    assert found["sources"] == {manifest.key: [lost.path]} and found["left"] == 1
    text = Cli()("fsck", env=site.env())
    assert text.exit_code == 1 and f"missing    {lost.path}" in text.stdout
    assert "missing: 1 variant file(s)" in text.stdout

    code, repaired = fsck(site, "--repair")
    assert code == 0 and repaired["missing"]["repaired"] == [lost.path], repaired
    data = stores(site).origin.read(lost.path)
    assert data is not None
    image = decode(data)
    assert (image.width, image.height) == (lost.width, lost.height)
    assert stores(site).manifests.get(manifest.key) == manifest  # the same names again
    code, again = fsck(site)
    assert code == 0 and again["found"] == 0


def test_an_original_gone_leaves_the_manifest_as_it_was(site: Site) -> None:
    """Three sources each lose a file: a local one whose file is gone, an origin key whose
    original is gone (unrepaired, their records untouched: a failed read is no takedown)
    and an origin key whose original is there (made again: one failure stops no other)."""
    s = stores(site)
    local = by_key(site)["photo-0.jpg"]
    gone = origin_source(site, "uploads/ad-1/gone.jpg", seed=11)
    kept = origin_source(site, "uploads/ad-2/kept.jpg", seed=12)
    for manifest in (local, gone, kept):
        s.origin.delete(manifest.variants[0].path)
    Path(local.key).unlink()
    s.origin.delete(gone.key)

    code, found = fsck(site, "--repair")
    assert code == 1 and found["missing"]["count"] == 3
    assert found["missing"]["repaired"] == [kept.variants[0].path]
    assert set(found["unrepaired"]) == {local.key, gone.key}
    assert "no such original" in found["unrepaired"][gone.key]
    assert "cannot read" in found["unrepaired"][local.key]
    for manifest in (local, gone):
        assert s.manifests.read(manifest.key) == manifest  # no Failure written over it
        assert in_origin(site, manifest) == {v.path for v in manifest.variants[1:]}
    assert in_origin(site, kept) == {v.path for v in kept.variants}
    text = Cli()("fsck", "--repair", env=site.env())
    assert text.exit_code == 1 and f"UNREPAIRED {gone.key}: no such original" in text.stderr


def test_an_old_dangling_claim_is_dropped_and_waits_out_the_grace(site: Site) -> None:
    s = stores(site)
    orphan = str(s.path_of("orphan.0123456789abcdef.webp"))
    s.origin.write(orphan, b"RIFF left by a writer killed before its manifest")
    named = by_key(site)["photo-1.jpg"].variants[0].path
    digest = key_digest("uploads/never-finished.jpg")
    for path in (orphan, named):
        s.manifests.references.claim_digest(digest, path)
        now = aged(site, path, digest)
    if is_local(site):  # written long ago: the grace must count from the repair, not this
        old = time.time() - 30 * DAY
        os.utime(site.settings.store.origin_root / orphan, (old, old))
    markers = sorted(f"refs/{p}/{digest}" for p in (orphan, named))

    report = check(s, now=now)
    assert report.dangling.paths == markers and report.left() == 2 and not report.in_flight
    repaired_at = time.time()
    repaired = check(s, repair=True, now=now, settings=site.settings)
    assert repaired.dangling.repaired == markers and repaired.left() == 0
    assert not {(p, d) for p, d in claims(site) if d == digest}
    dropped = dict(s.manifests.references.dropped())
    assert set(dropped) == {orphan, named}
    assert dropped[orphan] >= repaired_at - 1  # (S3 keeps whole seconds)
    assert check(s, now=now).found() == 0

    soon = gc(site.settings, now=time.time() + DAY, full=True)  # within the grace: kept
    assert orphan not in soon.paths and s.origin.exists(orphan)
    later = gc(site.settings, now=time.time() + 8 * DAY)
    assert later.paths == [orphan] and not s.origin.exists(orphan)
    assert s.origin.exists(named)  # photo-1's own claim stands


def test_a_young_dangling_claim_is_in_flight_and_kept(site: Site) -> None:
    s = stores(site)
    path = by_key(site)["photo-1.jpg"].variants[0].path
    digest = key_digest("uploads/being-made.jpg")
    s.manifests.references.claim_digest(digest, path)
    code, found = fsck(site, "--repair")
    assert code == 0 and found["found"] == 0
    assert found["in_flight"] == {"count": 1, "paths": [f"refs/{path}/{digest}"]}
    assert (path, digest) in claims(site)


def test_a_missing_claim_is_added(site: Site) -> None:
    manifest = by_key(site)["photo-1.jpg"]
    path = manifest.variants[2].path
    s = stores(site)
    s.manifests.references.release(manifest.key, [path])
    marker = f"refs/{path}/{key_digest(manifest.key)}"
    code, found = fsck(site)
    assert code == 1 and found["unclaimed"]["paths"] == [marker]
    assert found["dangling"]["count"] == 0
    code, repaired = fsck(site, "--repair")
    assert code == 0 and repaired["unclaimed"]["repaired"] == [marker]
    assert (path, key_digest(manifest.key)) in claims(site)
    assert fsck(site)[1]["found"] == 0


def test_a_damaged_record_is_counted_and_its_claims_stand(site: Site) -> None:
    s = stores(site)
    manifest = by_key(site)["photo-1.jpg"]
    record = s.manifests.key_path(manifest.key)
    s.manifests.store.write(record, b"{not json", replace=True)
    now = time.time() + 2 * STALE_CLAIM  # its claims would be old: still not dangling
    code, found = fsck(site, "--repair", "--now", str(now))
    assert code == 1 and found["damaged"] == {"count": 1, "paths": [str(record)],
                                              "repaired": [], "repaired_count": 0}
    assert found["dangling"]["count"] == 0 and found["found"] == 1
    assert {p for p, d in claims(site) if d == key_digest(manifest.key)} == {
        v.path for v in manifest.variants}


def test_the_help_and_a_light_import() -> None:
    shown = Cli()("fsck", "--help")
    assert shown.exit_code == 0
    for word in ("missing", "unclaimed", "dangling", "damaged", "--repair", "in flight"):
        assert word in shown.stdout
    assert loaded_by("imgwarm.lifecycle.fsck").isdisjoint(HEAVY)
