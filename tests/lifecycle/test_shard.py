"""Sharded passes: N slices of ``fsck``, ``fsck --repair`` and ``gc --full`` (N = 1, 2, 3, 7)
find and do exactly what one whole pass does, on copies of one store with every kind of
finding; the stores end the same. And ``--shard`` refuses what is not a slice."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.lifecycle.delete import delete
from imgwarm.lifecycle.fsck import FsckReport, check
from imgwarm.lifecycle.gc import STALE_CLAIM, GcReport, collect
from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.naming import file_name
from imgwarm.store import Stores
from imgwarm.store.layout import Layout
from imgwarm.store.references import BUILT, REFS, key_digest
from imgwarm.store.shard import Shard
from tests.support.cli import Cli
from tests.support.sites import Site, make_site, synthetic

DAY = 86400.0
COUNTS = (1, 2, 3, 7)
NOW = time.time() + 60  # one clock for every pass


def stores(settings: Settings) -> Stores:
    return Stores.for_settings(settings.store)


def aged(path: Path, seconds: float) -> None:
    os.utime(path, (NOW - seconds, NOW - seconds))


@pytest.fixture
def broken(settings: Settings, tmp_path: Path, ram: Path) -> Site:
    """A store with every finding: two real sources (a missing file made again from its
    original), forty synthetic ones spread over the shard folders (a missing file with no
    original, a claim removed, a damaged record, a taken-down source whose variants a killed
    delete left), dangling and in-flight claims, unnamed files within and past the grace,
    a drop marker of a file long gone, and a named path outside the shard folders."""
    (tmp_path / "site").mkdir()
    site = make_site(settings, tmp_path / "site", ram, count=2)
    made = synthetic(site, 40)
    s = stores(site.settings)
    origin, refs = s.origin, s.manifests.references
    real = sorted(site.manifests(), key=lambda m: m.key)
    origin.delete(real[0].variants[1].path)  # missing: made again by --repair
    origin.delete(made[0].variants[0].path)  # missing: no original (unrepaired)
    refs.release_digest(key_digest(made[1].key), made[1].variants[2].path)  # unclaimed
    for n, source in enumerate(made[2:6]):  # dangling: stale claims of no source
        path = source.variants[n % 3].path
        refs.claim_digest("f" * 31 + str(n), path)
        aged(s.manifests.store.path(f"{REFS}/{path}/{'f' * 31}{n}"), 2 * STALE_CLAIM)
    refs.claim_digest("e" * 32, made[6].variants[0].path)  # in flight: young
    damaged = s.manifests.key_path(made[7].key)  # damaged: its claims stand
    s.manifests.store.write(damaged, b"{not json", replace=True)
    kept = {v.path: origin.read(v.path) for v in made[8].variants}
    delete(made[8].key, s)  # a delete killed before it removed the variants
    for path, data in kept.items():
        assert data is not None
        origin.write(path, data)
    for n, age in enumerate((DAY / 2, 3 * DAY, 3 * DAY)):  # unnamed: within, past the grace
        data = f"stray {n}".encode()
        path = str(s.path_of(file_name("stray", f"{n:x}" * 16, "webp", 16)))
        origin.write(path, data)
        aged(s.origin.path(path), age)
    refs.note_dropped([str(s.path_of(file_name("", "ab" * 8, "webp", 16)))])  # gone long ago
    loose = Variant(format="webp", width=1, height=1, bytes=1, path="loose/x.webp")
    odd = Manifest(key="up/odd.jpg", source_sha256="0" * 64, width=1, height=1,
                   settings_digest="synthetic", variants=[loose])
    s.manifests.put(odd)
    return site


def copy(site: Site, name: str) -> Settings:
    """The site's origin and manifest store, copied (times kept) beside it."""
    root = site.root / name
    for part in ("origin", "manifest"):
        shutil.copytree(site.root / part, root / part, copy_function=shutil.copy2)
    return site.settings.updated(origin_root=root / "origin", manifest_root=root / "manifest")


def state(settings: Settings) -> dict[str, bytes | None]:
    """Every file of the origin and the manifest store and its bytes (the journal's and
    the references record's are not compared: they say when and who)."""
    found: dict[str, bytes | None] = {}
    for part in ("origin", "manifest"):
        root = Path(getattr(settings.store, f"{part}_root"))
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                name = f"{part}/{path.relative_to(root)}"
                same = name == f"manifest/{BUILT}" or "changes" in name
                found[name] = None if same else path.read_bytes()
    return found


def compared(obj: dict, root: Path | None = None) -> dict:  # type: ignore[type-arg]
    """A report's object but its time and slice (and the copy's root, said in errors)."""
    text = json.dumps({k: v for k, v in obj.items() if k not in ("seconds", "shard")})
    return json.loads(text.replace(str(root), "ROOT") if root else text)


def test_the_slices_cover_every_folder_once() -> None:
    layout = Layout()
    for count in (1, 2, 3, 7, 128, 200):
        tops = [t for i in range(1, count + 1) for t in Shard(i, count).tops(layout)]
        assert tops == layout.tops()
    assert str(Shard.parse("3/8")) == "3/8" and Shard.whole() == Shard(1, 1)


@pytest.mark.parametrize("text", ["5/4", "0/3", "3", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_one_line_and_exit_2(text: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shard"):
        Shard.parse(text)
    env = {"IMGWARM_ORIGIN_ROOT": str(tmp_path / "o"), "IMGWARM_MANIFEST_ROOT": str(tmp_path / "m")}
    done = Cli()("fsck", "--shard", text, env=env)
    assert done.exit_code == 2 and "--shard" in done.stderr and "Traceback" not in done.stderr
    done = Cli()("gc", "--full", "--shard", text, env=env)
    assert done.exit_code == 2 and "--shard" in done.stderr


def test_gc_refuses_a_slice_without_full(tmp_path: Path) -> None:
    env = {"IMGWARM_ORIGIN_ROOT": str(tmp_path / "o"), "IMGWARM_MANIFEST_ROOT": str(tmp_path / "m")}
    done = Cli()("gc", "--shard", "1/2", env=env)
    assert done.exit_code == 2 and "--full" in done.stderr


def test_fsck_slices_find_what_the_whole_check_finds(broken: Site) -> None:
    whole = check(stores(broken.settings), now=NOW)
    assert all(getattr(whole, kind).count for kind in ("missing", "unclaimed", "dangling",
                                                       "damaged"))
    assert whole.in_flight_count == 1 and whole.shard == "1/1"
    for count in COUNTS:
        slices = [check(stores(broken.settings), now=NOW, shard=Shard(i, count))
                  for i in range(1, count + 1)]
        assert [s.shard for s in slices] == [f"{i}/{count}" for i in range(1, count + 1)]
        merged = FsckReport.merged([FsckReport.from_object(json.loads(json.dumps(
            s.to_object()))) for s in slices])
        assert compared(merged.to_object()) == compared(whole.to_object()), count
        assert merged.shard == "1/1"


def test_fsck_repair_slices_do_what_the_whole_repair_does(broken: Site) -> None:
    settings = copy(broken, "whole")
    whole = check(stores(settings), repair=True, now=NOW, settings=settings)
    assert whole.missing.fixed == 1 and whole.unclaimed.fixed == 1 and whole.dangling.fixed == 4
    assert len(whole.unrepaired) == 2  # the synthetic source and the odd one: no original
    end = state(settings)
    for count in COUNTS:
        sliced = copy(broken, f"repair-{count}")
        slices = [check(stores(sliced), repair=True, now=NOW, settings=sliced,
                        shard=Shard(i, count)) for i in range(1, count + 1)]
        merged = FsckReport.merged(slices)
        assert compared(merged.to_object(), sliced.store.origin_root.parent) == compared(
            whole.to_object(), settings.store.origin_root.parent), count
        assert state(sliced) == end, count


def test_gc_full_slices_do_what_the_whole_pass_does(broken: Site) -> None:
    settings = copy(broken, "whole")
    stores(settings).manifests.store.delete(BUILT)  # a whole pass marks it built
    whole = collect(stores(settings), grace=DAY, now=NOW, full=True)
    assert whole.removed == 2 + 3 and whole.taken_down == 3 and whole.waiting == 1
    assert whole.claims_added == 2 and whole.claims_removed == 4 and whole.damaged == 1
    assert stores(settings).manifests.store.exists(BUILT)
    end = state(settings)
    for count in COUNTS:
        sliced = copy(broken, f"gc-{count}")
        s = stores(sliced)
        s.manifests.store.delete(BUILT)
        slices = [collect(stores(sliced), grace=DAY, now=NOW, full=True,
                          shard=Shard(i, count)) for i in range(1, count + 1)]
        merged = GcReport.merged([GcReport.from_object(json.loads(json.dumps(
            r.to_object()))) for r in slices])
        assert compared(merged.to_object()) == compared(whole.to_object()), count
        # a slice never says every manifest's markers are there; a whole pass does
        assert s.manifests.store.exists(BUILT) == (count == 1), count
        if count > 1:
            s.manifests.references.mark_built()  # what the fan-out does after the last
        assert state(sliced) == end, count


def test_the_cli_runs_a_slice(broken: Site) -> None:
    done = Cli()("fsck", "--shard", "2/3", "--json", "--now", str(NOW), env=broken.env())
    found = json.loads(done.stdout)
    assert done.exit_code == 1 and found["shard"] == "2/3"
    again = check(stores(broken.settings), now=NOW, shard=Shard(2, 3)).to_object()
    assert compared(found) == compared(again)
    done = Cli()("gc", "--full", "--shard", "3/3", "--dry-run", "--json", "--now", str(NOW),
                 env=broken.env())
    assert done.exit_code == 0 and json.loads(done.stdout)["shard"] == "3/3"
    assert json.loads(done.stdout)["tiers"] is None  # a slice does the origin only
