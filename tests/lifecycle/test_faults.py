"""Fault injection (issue 22): each store call of optimize, delete, gc and warm fails in turn,
on the local origin and on S3 over moto's real HTTP server; after each, the invariants are
checked on the real files (tests/support/invariants.py), then the command runs again without
faults and must leave the invariants whole and the work done, as a clean run does it.

The commands, each on a scene of its own (two sources and a twin of the first that shares
some of its variants, the references built, plus): optimize of two identical uploads at once
(``optimize-batch``), of a source again with other widths (``-remake``), of a source by key
whose original is gone (``-gone``: a redelivered job); delete of the twin's original, on a
store with its references and on one without (``delete-unbuilt``); gc usual and full, with
grace 0 and with the default grace, over variants unnamed every way (a source made again, a
delete stopped after its tombstone, a file no manifest or claim knows); warm and warm --full
after a first warm, a source deleted and one added, with files warm never placed in both
tiers (a dot file, another name, a variant-shaped copy of another state folder).

A scene is built once per test and restored for every fault (local roots copied back, the
tiers hard-linked so that warm's record of the very files it wrote still holds; on S3 the
bucket copied inside moto's backend, which runs in this process). The pixel work is made
once and remembered (``Remembered``): it touches no store, and decoding for each of several
hundred runs would only cost time.

Each call that removes or replaces (write, delete, prune, journal append, tier write and
delete) is also failed after it was made (a response lost after S3 applied the request).

How many: with ``IMGWARM_FAULTS=all``, every call fails in turn on the local origin; on S3,
where each call is a request to moto (tens of milliseconds each, and a gc or warm makes
hundreds), every call that removes or replaces, and a seeded sample of ``S3_SAMPLE`` of the
others (reads, listings, look-ups). By default (CI: the file within about three minutes),
``LOCAL_BUDGET`` and ``S3_BUDGET`` runs a command, chosen by a seed from the test's name: one
call of each kind, then more of those that remove or replace, then of the others. The
faults injected per command and store are written to ``SUMMARY_FILE`` and printed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import ImageSettings, Settings
from imgwarm.exceptions import StorageError, UnreadableSource
from imgwarm.lifecycle.delete import delete
from imgwarm.lifecycle.gc import collect, gc
from imgwarm.manifest import Credits, Manifest, Placeholder
from imgwarm.pipeline.isolate import IN_PROCESS
from imgwarm.pipeline.made import Made
from imgwarm.pipeline.naming import file_name
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import local_key
from tests.support.faults import (
    Faults,
    Target,
    armed,
    faulty_stores,
    install,
    plan,
    shared_clients,
)
from tests.support.invariants import (
    check,
    in_tier,
    origin_variants,
    real_stores,
    snapshot,
    tiers_match_index,
    verdict,
)
from tests.support.sites import Site, make_site
from tests.support.tmpfs import mounted_tmpfs

pytestmark = pytest.mark.usefixtures("ram")
WEEK = 7 * 86400.0
EVERY = os.environ.get("IMGWARM_FAULTS") == "all"
S3_SAMPLE = 25  # with EVERY: calls failed on S3 besides every one that removes or replaces
LOCAL_BUDGET, S3_BUDGET = 20, 5  # by default: fault runs a command
RACE_YIELD = 0.02  # seconds, at most, the batch's threads sleep at a race point
# 8 top shard folders instead of 128: imgwarm lists a store a top folder at a time (a request
# each on S3), and every listing is a call the harness fails in turn; the code is the same.
SHARD_ENTRIES = 16
SUMMARY: dict[str, dict[str, Any]] = {}
SUMMARY_FILE = Path(f"/tmp/imgwarm-22-faults{'-all' if EVERY else ''}.json")


@pytest.fixture(scope="module", autouse=True)
def summary(request: pytest.FixtureRequest) -> Iterator[None]:
    """The faults injected, per command and store: written to SUMMARY_FILE and printed."""
    yield
    if not SUMMARY:
        return
    SUMMARY_FILE.write_text(json.dumps(SUMMARY, indent=1, sort_keys=True))
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    lines = [f"{name}: {row['injected']} faults injected ({row['after']} after the call) in "
             f"a run of {row['calls']} calls ({row['mode']}), {row['violations']} violations, "
             f"{row['seconds']:.1f} s"
             for name, row in sorted(SUMMARY.items())]
    total = sum(row["injected"] for row in SUMMARY.values())
    lines.append(f"total: {total} faults injected ({SUMMARY_FILE})")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n" + "\n".join(lines))


class Remembered:
    """The pixel work of each (bytes, name, settings, credits), made once: it touches no
    store, so the runs that differ only in their faults need not decode again."""

    def __init__(self) -> None:
        self.made: dict[tuple[str, ...], Made] = {}
        self.previews: dict[tuple[str, ...], Placeholder] = {}

    @staticmethod
    def _key(data: bytes, name: str, settings: ImageSettings, *rest: object) -> tuple[str, ...]:
        return (hashlib.sha256(data).hexdigest(), name, settings.model_dump_json(),
                *map(repr, rest))

    def make(self, data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made:
        key = self._key(data, name, settings, given)
        if key not in self.made:
            self.made[key] = IN_PROCESS.make(data, name, settings, given)
        return self.made[key]

    def preview(self, data: bytes, name: str, settings: ImageSettings) -> Placeholder:
        key = self._key(data, name, settings)
        if key not in self.previews:
            self.previews[key] = IN_PROCESS.preview(data, name, settings)
        return self.previews[key]


PIXELS = Remembered()


class _Stopped(Exception):
    """A delete stopped after its tombstone (as a killed one would)."""


# --- scenes -----------------------------------------------------------------------------------


@dataclass
class Scene:
    """A site saved once and restored for every run."""

    site: Site
    saved: Path
    roots: list[Path] = field(default_factory=list)
    links: set[Path] = field(default_factory=set)  # roots restored by hard links (tiers)
    planted: list[Path] = field(default_factory=list)  # foreign files in the tiers
    keys: dict[str, str] = field(default_factory=dict)  # role -> source key
    server: Any = None  # the moto S3Server, on S3
    template: str | None = None  # the bucket saved, on S3
    buckets: list[str] = field(default_factory=list)

    @property
    def tiers(self) -> list[Path]:
        cache = self.site.settings.cache
        return [cache.ram_root, cache.nvme_root]

    def save(self) -> None:
        settings = self.site.settings
        store, cache = settings.store, settings.cache
        self.roots = [p for p in (store.origin_root, store.manifest_root, cache.nvme_root,
                                  cache.ram_root, cache.cache_state) if p.exists()]
        self.links = {cache.nvme_root, cache.ram_root}
        for root in self.roots:
            copied = self._copy_of(root)
            shutil.rmtree(copied, ignore_errors=True)
            shutil.copytree(root, copied, symlinks=True,
                            copy_function=os.link if root in self.links else shutil.copy2)
        self.template = store.s3_bucket

    def _copy_of(self, root: Path) -> Path:
        if root == self.site.settings.cache.ram_root:  # hard links: on the same tmpfs
            return root.with_name(root.name + "-saved")
        return self.saved / root.name

    def fresh(self) -> Settings:
        """The saved scene, in place again (the local roots) or in a new bucket (S3)."""
        for root in self.roots:
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(self._copy_of(root), root, symlinks=True,
                            copy_function=os.link if root in self.links else shutil.copy2)
        settings = self.site.settings
        if self.template is None:
            return settings
        from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        self.drop_buckets()
        bucket = self.server.new_bucket()
        self.buckets.append(bucket)
        for name, key in list(backend.get_bucket(self.template).keys.items()):
            backend.copy_object(key, bucket, name)
        return settings.updated(s3_bucket=bucket)

    def drop_buckets(self) -> None:
        """The buckets of earlier runs (moto keeps every object in this process's memory)."""
        from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
        from moto.s3.models import s3_backends

        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for bucket in self.buckets:
            for name in list(backend.get_bucket(bucket).keys.keys()):
                backend.delete_object(bucket, name)
            backend.delete_bucket(bucket)
        self.buckets.clear()


PHOTOS: dict[tuple[int, int, int], bytes] = {}  # (width, height, seed) -> JPEG bytes


def photo_file(site: Site, name: str, seed: int, width: int = 1000, height: int = 700) -> Path:
    from tests.support.images import jpeg_with_exif, photo

    key = (width, height, seed)
    if key not in PHOTOS:
        PHOTOS[key] = jpeg_with_exif(photo(width, height, seed=seed), quality=85)
    path = site.sources / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(PHOTOS[key])
    return path


def make(site: Site, path: Path, settings: Settings | None = None) -> Manifest:
    stores = real_stores(site.settings)
    return optimize_file(path, settings=settings or site.settings, stores=stores,
                         pixels=PIXELS).manifest


@pytest.fixture
def on_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs for the scene's roots: restored hundreds of times, folders and all, which on
    an overlay or a journaled disk costs milliseconds a folder."""
    with mounted_tmpfs(tmp_path / "scene", "256m") as root:
        yield root


def base_scene(origin: str, request: pytest.FixtureRequest, settings: Settings,
               folder: Path, ram: Path, *, entries: int = SHARD_ENTRIES) -> Scene:
    """Two sources and a twin of the first (the same bytes and name, made with fewer widths:
    it shares some of its variants, not all), the references built by a first gc."""
    options: dict[str, object] = {"max_dir_entries": entries}
    server = None
    if origin == "s3":
        server = request.getfixturevalue("s3_server")
        options |= {"origin": "s3", "s3_bucket": server.new_bucket(),
                    "s3_endpoint_url": server.endpoint, "s3_region": "us-east-1"}
    site = make_site(settings, folder, ram, count=0, **options)
    for i in range(2):  # as site_on's, with the pixel work remembered
        make(site, photo_file(site, f"photo-{i}.jpg", seed=i, width=1200, height=800))
    scene = Scene(site, folder / "saved", server=server)
    first = site.sources / "photo-0.jpg"
    twin = site.sources / "twin" / "photo-0.jpg"
    twin.parent.mkdir()
    shutil.copyfile(first, twin)
    narrow = make(site, twin, site.settings.updated(widths="320,640"))
    mine = {v.path for v in real_stores(site.settings).manifests.get(local_key(first))
            .variants}  # type: ignore[union-attr]
    shared = mine & {v.path for v in narrow.variants}
    assert shared and mine - shared, "the twin must share some variants, not all"
    scene.keys = {"first": local_key(first), "twin": local_key(twin),
                  "second": local_key(site.sources / "photo-1.jpg")}
    collect(real_stores(site.settings), grace=WEEK, full=True)  # references built
    return scene


# --- commands ---------------------------------------------------------------------------------


@dataclass
class Command:
    """A command, how to run it under the harness, and what a completed run leaves."""

    name: str
    run: Callable[[Scene, Settings, Faults], None]
    outcome: Callable[[Scene, Settings], Any]  # what a clean run leaves, to compare with
    grace_passed: bool = False  # it may remove what no manifest names (gc --grace 0)
    refused: tuple[type[Exception], ...] = ()  # what a clean run raises too


def attempt(command: Command, scene: Scene, settings: Settings, faults: Faults,
            *, faulted: bool) -> str | None:
    """Run the command; None when it ended as expected (a StorageError is, under a fault),
    else what is wrong."""
    try:
        command.run(scene, settings, faults)
    except command.refused:
        return None
    except StorageError as error:
        return None if faulted else f"failed: {error!r}"
    except Exception as error:  # not a storage error: the command broke
        return f"unexpected {error!r}"
    return None


def batch(scene: Scene) -> list[Path]:
    return sorted(scene.site.sources.glob("up/*/dup.jpg"))


def optimize_batch(scene: Scene, settings: Settings, faults: Faults) -> None:
    """Two identical uploads in one batch, each in a thread of its own as ``run_batch`` does,
    each succeeding or failing on its own. The race points yield a moment (as with
    IMGWARM_RACE_YIELD), so that one upload's cleanup after a fault often meets the other's
    claims on the same files."""
    from imgwarm import racepoints

    stores = faulty_stores(real_stores(settings), faults)

    def one(path: Path) -> StorageError | None:
        try:
            optimize_file(path, settings=settings, stores=stores, pixels=PIXELS)
        except StorageError as error:
            return error
        return None

    was, racepoints._YIELD = racepoints._YIELD, RACE_YIELD
    try:
        with ThreadPoolExecutor(2) as pool:
            failed = [e for e in pool.map(one, batch(scene)) if e is not None]
    finally:
        racepoints._YIELD = was
    if failed:
        raise failed[0]


def remade(settings: Settings) -> Settings:
    return settings.updated(widths="480,960")


def optimize_remake(scene: Scene, settings: Settings, faults: Faults) -> None:
    stores = faulty_stores(real_stores(settings), faults)
    optimize_file(Path(scene.keys["second"]), settings=remade(settings), stores=stores,
                  pixels=PIXELS)


def made_manifests(keys: list[str]) -> Callable[[Scene, Settings], Any]:
    def outcome(scene: Scene, settings: Settings) -> Any:
        stores = real_stores(settings)
        found = {}
        for key in keys:
            record = stores.manifests.record(scene.keys.get(key, key))
            found[key] = sorted(v.path for v in record.variants) \
                if isinstance(record, Manifest) else repr(record)
        return found
    return outcome


def delete_first(scene: Scene, settings: Settings, faults: Faults) -> None:
    delete(scene.keys["first"], faulty_stores(real_stores(settings), faults))


def deleted(scene: Scene, settings: Settings) -> Any:
    stores = real_stores(settings)
    record = stores.manifests.record(scene.keys["first"])
    return type(record).__name__, sorted(origin_variants(stores))


def collecting(grace: float | None, full: bool) -> Callable[[Scene, Settings, Faults], None]:
    def run(scene: Scene, settings: Settings, faults: Faults) -> None:
        gc(settings, grace=grace, full=full)
    return run


def variants_left(scene: Scene, settings: Settings) -> Any:
    return sorted(origin_variants(real_stores(settings)))


def warming(full: bool) -> Callable[[Scene, Settings, Faults], None]:
    def run(scene: Scene, settings: Settings, faults: Faults) -> None:
        from imgwarm.cache.warm import warm

        warm(settings, full=full)
    return run


def tiers_held(scene: Scene, settings: Settings) -> Any:
    return {"ram": sorted(in_tier(settings, "ram")), "nvme": sorted(in_tier(settings, "nvme")),
            "index": tiers_match_index(settings)}


# --- the scene of each command ------------------------------------------------------------------


def optimize_scene(scene: Scene) -> None:
    for folder in ("a", "b"):
        photo_file(scene.site, f"up/{folder}/dup.jpg", seed=7)


def unbuilt_scene(scene: Scene) -> None:
    """A store whose manifests predate the references (or that lost them): no claim marker,
    no record that they were built. Who else names a variant cannot be told from them."""
    from imgwarm.store.references import BUILT, REFS

    store = real_stores(scene.site.settings).manifests.store
    for marker in list(store.files(REFS)):
        store.delete(marker)
    store.delete(BUILT)


GONE = "up/ad-1/bike.jpg"  # an original in the origin, made, then moved away


def gone_scene(scene: Scene) -> None:
    """A source made from an original in the origin (by key), whose original is gone since:
    the job is delivered again."""
    from imgwarm.pipeline.optimize import optimize_key

    stores = real_stores(scene.site.settings)
    stores.origin.write(GONE, PHOTOS[(1200, 800, 1)])
    optimize_key(GONE, settings=scene.site.settings, stores=stores, pixels=PIXELS)
    stores.origin.delete(GONE)


def optimize_gone(scene: Scene, settings: Settings, faults: Faults) -> None:
    from imgwarm.pipeline.optimize import optimize_key

    optimize_key(GONE, settings=settings, stores=faulty_stores(real_stores(settings), faults),
                 pixels=PIXELS)


def gc_scene(scene: Scene) -> None:
    """Unnamed variants of every kind: a source made again with other widths (dropped
    markers), a delete stopped after its tombstone, and a file no manifest or claim knows
    (a writer killed midway)."""
    site = scene.site
    make(site, Path(scene.keys["second"]), remade(site.settings))
    third = photo_file(site, "photo-2.jpg", seed=2)
    make(site, third)
    from imgwarm import racepoints

    def stop() -> None:
        raise _Stopped

    with racepoints.at("delete.tombstoned", stop), pytest.raises(_Stopped):
        delete(local_key(third), real_stores(site.settings))
    stores = real_stores(site.settings)
    data = os.urandom(3000)
    name = file_name("orphan", hashlib.sha256(data).hexdigest(), "webp", 16)
    stores.origin.write(stores.place(name), data)


def warm_scene(scene: Scene) -> None:
    """Tiers filled by a first warm; since, a source deleted and one added; and files warm
    never placed put in both tiers (a dot file, a file of another name, a copy of a
    variant-shaped name another state folder wrote)."""
    from imgwarm.cache.warm import warm

    site = scene.site
    warm(site.settings)
    delete(scene.keys["second"], real_stores(site.settings))
    make(site, photo_file(site, "photo-2.jpg", seed=2))
    stores = real_stores(site.settings)
    for root in scene.tiers:
        data = os.urandom(2000)
        shaped = stores.place(file_name("other", hashlib.sha256(data).hexdigest(), "webp", 16))
        for relative, body in ((".keep", b"x"), ("notes.txt", b"ours, not imgwarm's"),
                               (str(shaped), data)):
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
            scene.planted.append(path)


COMMANDS: dict[str, tuple[Callable[[Scene], None], Command]] = {
    "optimize-batch": (optimize_scene, Command(
        "optimize-batch", optimize_batch, lambda s, st: made_manifests(
            [str(p.resolve()) for p in batch(s)])(s, st))),
    "optimize-remake": (lambda scene: None, Command(
        "optimize-remake", optimize_remake, made_manifests(["second"]))),
    "optimize-gone": (gone_scene, Command(
        "optimize-gone", optimize_gone, made_manifests([GONE]), refused=(UnreadableSource,))),
    "delete": (lambda scene: None, Command("delete", delete_first, deleted)),
    "delete-unbuilt": (unbuilt_scene, Command("delete-unbuilt", delete_first, deleted)),
    "gc-grace0": (gc_scene, Command("gc-grace0", collecting(0.0, False), variants_left,
                                    grace_passed=True)),
    "gc-full-grace0": (gc_scene, Command("gc-full-grace0", collecting(0.0, True),
                                         variants_left, grace_passed=True)),
    "gc-default": (gc_scene, Command("gc-default", collecting(None, False), variants_left)),
    "gc-full-default": (gc_scene, Command("gc-full-default", collecting(None, True),
                                          variants_left)),
    "warm": (warm_scene, Command("warm", warming(False), tiers_held)),
    "warm-full": (warm_scene, Command("warm-full", warming(True), tiers_held)),
}


def differences(found: Any, expected: Any, where: str = "") -> list[str]:
    """How an outcome differs from a clean run's: for lists, what is missing and what is
    extra; for dicts, each entry's."""
    if isinstance(found, dict) and isinstance(expected, dict):
        return [d for key in sorted(found.keys() | expected.keys(), key=str)
                for d in differences(found.get(key), expected.get(key), f"{where}{key}: ")]
    if isinstance(found, list | tuple) and isinstance(expected, list | tuple) and \
            all(isinstance(x, str) for x in [*found, *expected]):
        missing, extra = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
        return [f"{where}missing {missing}, extra {extra}"] if missing or extra else []
    if isinstance(found, tuple) and isinstance(expected, tuple) and len(found) == len(expected):
        return [d for a, b in zip(found, expected, strict=True) for d in differences(a, b, where)]
    return [] if found == expected else [f"{where}{found!r} where a clean run leaves {expected!r}"]


def targets(origin: str, counts: dict[str, int], label: str) -> list[Target]:
    local = origin == "local"
    if EVERY:
        return plan(counts, after=True) if local else plan(counts, sample=S3_SAMPLE, after=True)
    return plan(counts, budget=LOCAL_BUDGET if local else S3_BUDGET, after=True,
                seed=zlib.crc32(label.encode()))


def exercise(scene: Scene, command: Command, faults: Faults, origin: str,
             label: str) -> list[str]:
    """The clean run (counting the calls), then one run a fault (see the module)."""
    started = time.monotonic()
    settings = scene.fresh()
    before = snapshot(real_stores(settings), scene.tiers, scene.planted)
    faults.reset()
    wrong = attempt(command, scene, settings, faults, faulted=False)
    assert wrong is None, f"{label}: a clean run {wrong}"
    counts = faults.counts()
    expected = command.outcome(scene, settings)
    clean = check(real_stores(settings), before, grace_passed=command.grace_passed)
    assert not clean, f"{label}: a clean run breaks the invariants: {clean}"
    chosen = targets(origin, counts, label)
    problems: list[str] = []
    injected = 0
    for kind, number, late in chosen:
        settings = scene.fresh()
        with armed(faults, number, {kind}, after=late):
            wrong = attempt(command, scene, settings, faults, faulted=True)
        if wrong is not None:
            problems.append(f"{label} {kind}#{number}{'/after' * late}: {wrong}")
        fired = faults.fired
        injected += fired is not None
        where = f"{label} {kind}#{number}{'/after' * late} ({fired or 'not reached'})"
        found = [f"after the fault: {p}" for p in
                 check(real_stores(settings), before, grace_passed=command.grace_passed)]
        faults.reset()
        wrong = attempt(command, scene, settings, faults, faulted=False)
        if wrong is not None:
            found.append(f"the run again {wrong}")
        found += [f"after the run again: {p}" for p in
                  check(real_stores(settings), before, grace_passed=command.grace_passed)]
        found += [f"not completed: {d}" for d in differences(
            command.outcome(scene, settings), expected)]
        problems += [f"{where}: {p}" for p in found]
    scene.drop_buckets()
    calls = sum(counts.values())
    mode = ("every call" if origin == "local" else
            f"every call that removes or replaces, {S3_SAMPLE} others sampled") if EVERY \
        else f"{len(chosen)} of the calls, seeded"
    SUMMARY[label] = {"calls": calls, "by_kind": counts, "runs": len(chosen),
                      "after": sum(1 for t in chosen if t[2]), "injected": injected,
                      "mode": mode + ("; those that remove or replace also after the call"),
                      "violations": len(problems), "seconds": time.monotonic() - started}
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("origin", ["local", pytest.param("s3", marks=pytest.mark.integration)])
def test_every_call_failing_in_turn(origin: str, name: str, request: pytest.FixtureRequest,
                                    settings: Settings, on_tmpfs: Path, ram: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    build, command = COMMANDS[name]
    shared_clients(monkeypatch)
    scene = base_scene(origin, request, settings, on_tmpfs, ram)
    build(scene)
    scene.save()
    faults = Faults()
    install(monkeypatch, faults)
    problems = exercise(scene, command, faults, origin, f"{name}/{origin}")
    assert not problems, verdict(problems, f"faults-{name}-{origin}")
