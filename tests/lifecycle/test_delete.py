"""``imgwarm delete``: a source taken down in the origin (local, and S3 over moto's HTTP
server), variants another source names kept, a delete killed midway finished by the next."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from imgwarm.exceptions import LayoutError
from imgwarm.lifecycle.delete import UnknownSource, delete
from imgwarm.manifest import Manifest, Tombstone
from imgwarm.store.references import key_digest
from tests.support.lifecycle import by_key, claims, in_origin, stores
from tests.support.s3 import s3_params
from tests.support.servers import clean_env
from tests.support.sites import Site

pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]


def test_a_source_and_only_its_own_variants_leave_the_origin(site: Site) -> None:
    twin = site.add("twin/photo-0.jpg", seed=0)  # same bytes, same name: same variants
    found = by_key(site)
    first, other = found["photo-0.jpg"], found["photo-1.jpg"]
    assert {v.path for v in twin.variants} == {v.path for v in first.variants}

    done = delete(other.key, stores(site))
    assert sorted(done.removed) == sorted(v.path for v in other.variants) and not done.kept
    assert done.freed == sum(v.bytes for v in other.variants)
    assert in_origin(site, other) == set()
    record = stores(site).manifests.read(other.key)
    assert isinstance(record, Tombstone)
    assert sorted(record.variants) == sorted(v.path for v in other.variants)
    assert stores(site).manifests.get(other.key) is None

    shared = delete(first.key, stores(site))  # the twin still names every one
    assert not shared.removed and sorted(shared.kept) == sorted(v.path for v in first.variants)
    assert in_origin(site, twin) == {v.path for v in twin.variants}
    assert all(digest == key_digest(twin.key) for _, digest in claims(site))

    last = delete(twin.key, stores(site))
    assert sorted(last.removed) == sorted(v.path for v in twin.variants)
    assert in_origin(site, twin) == set() and claims(site) == set()
    assert not list(stores(site).manifests.references.dropped())  # nothing left for gc


def test_deleting_again_unknown_and_unsafe_keys(site: Site) -> None:
    manifest = by_key(site)["photo-0.jpg"]
    delete(manifest.key, stores(site))
    again = delete(manifest.key, stores(site))
    assert again.already and not again.removed and not again.kept
    with pytest.raises(UnknownSource, match="nothing deleted"):
        delete("uploads/never-made.jpg", stores(site))
    for key in ("../etc/passwd", ".imgwarm/manifests/x", "a/../../b.jpg",
                "1f/54/2a/cat.0123456789abcdef.webp"):
        with pytest.raises(LayoutError):
            delete(key, stores(site))
    assert in_origin(site, by_key(site)["photo-1.jpg"])  # the other is untouched


def test_the_original_goes_only_when_asked(site: Site) -> None:
    kept, gone = by_key(site)["photo-0.jpg"], by_key(site)["photo-1.jpg"]
    delete(kept.key, stores(site))
    delete(gone.key, stores(site), original=True)
    assert Path(kept.key).exists() and not Path(gone.key).exists()
    record = stores(site).manifests.read(gone.key)
    assert isinstance(record, Tombstone) and record.original


@pytest.mark.parametrize("server", s3_params())
def test_an_s3_original_goes_with_original(server: str, request: pytest.FixtureRequest,
                                           settings: object, tmp_path: Path, ram: Path) -> None:
    from imgwarm.pipeline.optimize import optimize_key
    from tests.support.lifecycle import site_on

    site = site_on(server, request, settings, tmp_path, ram)  # type: ignore[arg-type]
    origin = stores(site).origin
    origin.write("up/ad-17/bike.jpg", (site.sources / "photo-0.jpg").read_bytes())
    made = optimize_key("up/ad-17/bike.jpg", settings=site.settings, stores=stores(site))
    done = delete("up/ad-17/bike.jpg", stores(site), original=True)
    assert done.original and not origin.exists("up/ad-17/bike.jpg")
    assert in_origin(site, made.manifest) == set()


KILLER = """
import os, signal, sys
from imgwarm.config import load_settings
from imgwarm.lifecycle import delete as module
from imgwarm.store import Stores

real, done = module.reclaim, []
def reclaim(*args):
    freed = real(*args)
    done.append(freed)
    if len(done) == 2:  # two variants gone, the rest not: killed outright
        os.kill(os.getpid(), signal.SIGKILL)
    return freed
module.reclaim = reclaim
module.delete(sys.argv[1], Stores.for_settings(load_settings().store))
"""


def test_a_delete_killed_midway_is_finished_by_the_next(site: Site) -> None:
    manifest = by_key(site)["photo-0.jpg"]
    env = clean_env(**site.env())
    killed = subprocess.run([sys.executable, "-c", KILLER, manifest.key], env=env,
                            cwd=site.root, capture_output=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = in_origin(site, manifest)
    assert 0 < len(left) == len(manifest.variants) - 2
    assert isinstance(stores(site).manifests.read(manifest.key), Tombstone)

    from tests.support.cli import Cli

    again = Cli()("delete", manifest.key, "--json", env=site.env())
    assert again.exit_code == 0, again.stderr
    found = json.loads(again.stdout)
    assert found["already"] is True and sorted(found["removed"]) == sorted(left)
    assert in_origin(site, manifest) == set()
    assert not [c for c in claims(site) if c[1] == key_digest(manifest.key)]


def test_the_command_names_what_is_wrong_and_deletes_the_rest(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.cli import Cli

    first, second = by_key(site)["photo-0.jpg"], by_key(site)["photo-1.jpg"]
    refused = Cli()("delete", first.key, "../x.jpg", env=site.env())
    assert refused.exit_code == 2 and "'..'" in refused.stderr
    assert in_origin(site, first)  # an unsafe key: nothing deleted at all
    monkeypatch.chdir(site.sources)  # a local source is named as the file it was made from
    mixed = Cli()("delete", "photo-0.jpg", "up/never.jpg", second.key, env=site.env())
    assert mixed.exit_code == 1
    assert "FAILED up/never.jpg: no manifest" in mixed.stderr
    assert in_origin(site, first) == set() and in_origin(site, second) == set()
    assert "3 source(s): 2 deleted, 1 failed" in mixed.stderr
    assert isinstance(stores(site).manifests.read(first.key), Tombstone)
    assert not isinstance(stores(site).manifests.read(first.key), Manifest)


def test_a_manifest_naming_an_original_never_removes_it(site: Site) -> None:
    s = stores(site)
    manifest = by_key(site)["photo-0.jpg"]
    s.origin.write("up/ad-9/keep.jpg", b"an original the application keeps")
    odd = manifest.variants[0].model_copy(update={"path": "up/ad-9/keep.jpg"})
    s.manifests.put(manifest.model_copy(update={"variants": [*manifest.variants, odd]}))
    done = delete(manifest.key, s)
    assert "up/ad-9/keep.jpg" not in done.removed + done.kept
    assert s.origin.read("up/ad-9/keep.jpg") == b"an original the application keeps"
    assert in_origin(site, manifest) == set()


def test_a_page_whose_hero_was_deleted_loses_its_preload_not_the_config(site: Site) -> None:
    from imgwarm.serve.pages import PagesError, preloads

    gone, kept = by_key(site)["photo-0.jpg"], by_key(site)["photo-1.jpg"]
    delete(gone.key, stores(site))
    found = preloads({"/ad/0/": [gone.key], "/ad/1/": [kept.key]}, stores(site), prefix="/")
    assert len(found) == 1 and kept.variants[0].path.split("/")[0] in str(found[0])
    with pytest.raises(PagesError, match="no manifest"):  # never made: still an error
        preloads({"/ad/2/": ["up/never.jpg"]}, stores(site), prefix="/")


def test_deleting_a_folder_as_an_original_is_refused_and_leaves_no_tombstone(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.cli import Cli

    origin = stores(site).origin
    origin.write("uploads/inner/a.jpg", b"not ours to remove")  # a folder, or an S3 prefix
    keys = ["uploads"]
    if site.settings.store.origin == "local":
        (site.settings.store.origin_root / "empty").mkdir()
        keys.append("empty")
    for key in keys:
        done = Cli()("delete", "--original", key, env=site.env())
        assert done.exit_code == 1 and "Traceback" not in done.stderr
        assert f"FAILED {key}: a folder, not an original file" in done.stderr
        assert stores(site).manifests.read(key) is None  # no tombstone
    assert origin.exists("uploads/inner/a.jpg")
    monkeypatch.chdir(site.root)  # a local folder named as a source: not an origin key
    local = Cli()("delete", "--original", str(site.sources), env=site.env())
    assert local.exit_code == 2 and "Traceback" not in local.stderr
