"""Lifecycle scenes for the fault, kill and concurrency tests (issue 22): a site saved once
and restored for every run (``Scene``), the scene each command starts from, what a whole run
of each leaves (to compare a faulted or killed run with), and the pixel work made once
(``PIXELS``: it touches no store, so runs that differ only in their faults need not decode
again)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import ImageSettings, Settings
from imgwarm.lifecycle.delete import delete
from imgwarm.lifecycle.gc import collect
from imgwarm.manifest import Credits, Manifest, Placeholder
from imgwarm.pipeline.isolate import IN_PROCESS
from imgwarm.pipeline.made import Made
from imgwarm.pipeline.naming import file_name
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import local_key
from tests.support.invariants import in_tier, origin_variants, real_stores, tiers_match_index
from tests.support.lifecycle import forget_references
from tests.support.s3 import on_s3, s3_server
from tests.support.servers import clean_env
from tests.support.sites import Site, make_site, settings_env

WEEK = 7 * 86400.0


# 8 top shard folders instead of 128: imgwarm lists a store a top folder at a time (a request
# each on S3), and every listing is a call the harness fails in turn; the code is the same.
SHARD_ENTRIES = 16


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


@dataclass
class Scene:
    """A site saved once and restored for every run."""

    site: Site
    saved: Path
    roots: list[Path] = field(default_factory=list)
    links: set[Path] = field(default_factory=set)  # roots restored by hard links (tiers)
    planted: list[Path] = field(default_factory=list)  # foreign files in the tiers
    keys: dict[str, str] = field(default_factory=dict)  # role -> source key
    server: Any = None  # the S3 server (moto's or SeaweedFS's), on S3
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
        self.drop_buckets()
        bucket = self.server.new_bucket()
        self.buckets.append(bucket)
        if self.server.name == "moto":
            copy_in_moto(self.template, bucket)
        else:
            copy_by_requests(self.server, self.template, bucket)
        return settings.updated(s3_bucket=bucket)

    def drop_buckets(self) -> None:
        """The buckets of earlier runs (moto keeps every object in this process's memory;
        SeaweedFS's go to disk, and its S3 API removes them)."""
        for bucket in self.buckets:
            if self.server.name == "moto":
                drop_in_moto(bucket)
            else:
                self.server.drop_bucket(bucket)
        self.buckets.clear()


# moto-only powers: its backend runs in this process, so a scene's bucket is copied and
# dropped in memory, with no request (hundreds of restores a test). SeaweedFS has no such
# door: the same is done through its S3 API (copy_by_requests, S3Endpoint.drop_bucket).
def copy_in_moto(template: str, bucket: str) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for name, key in list(backend.get_bucket(template).keys.items()):
        backend.copy_object(key, bucket, name)


def drop_in_moto(bucket: str) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for name in list(backend.get_bucket(bucket).keys.keys()):
        backend.delete_object(bucket, name)
    backend.delete_bucket(bucket)


def copy_by_requests(server: Any, template: str, bucket: str) -> None:
    """Every object of ``template`` copied into ``bucket`` by server-side copies (headers
    and all), a few at once."""
    from concurrent.futures import ThreadPoolExecutor

    def copy(key: str) -> None:
        server.client.copy_object(Bucket=bucket, Key=key,
                                  CopySource={"Bucket": template, "Key": key})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(copy, server.keys(template)))


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


def base_scene(origin: str, request: pytest.FixtureRequest, settings: Settings,
               folder: Path, ram: Path, *, entries: int = SHARD_ENTRIES) -> Scene:
    """Two sources and a twin of the first (the same bytes and name, made with fewer widths:
    it shares some of its variants, not all), the references built by a first gc."""
    options: dict[str, object] = {"max_dir_entries": entries}
    server = None
    if on_s3(origin):
        server = s3_server(request, origin)
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


def batch(scene: Scene) -> list[Path]:
    return sorted(scene.site.sources.glob("up/*/dup.jpg"))


def remade(settings: Settings) -> Settings:
    return settings.updated(widths="480,960")


def made_manifests(keys: list[str]) -> Callable[[Scene, Settings], Any]:
    def outcome(scene: Scene, settings: Settings) -> Any:
        stores = real_stores(settings)
        found = {}
        for key in keys:
            record = stores.manifests.read(scene.keys.get(key, key))
            found[key] = sorted(v.path for v in record.variants) \
                if isinstance(record, Manifest) else repr(record)
        return found
    return outcome


def deleted(scene: Scene, settings: Settings) -> Any:
    stores = real_stores(settings)
    record = stores.manifests.read(scene.keys["first"])
    return type(record).__name__, sorted(origin_variants(stores))


def variants_left(scene: Scene, settings: Settings) -> Any:
    return sorted(origin_variants(real_stores(settings)))


def tiers_held(scene: Scene, settings: Settings) -> Any:
    return {"ram": sorted(in_tier(settings, "ram")), "nvme": sorted(in_tier(settings, "nvme")),
            "index": tiers_match_index(settings)}


def optimize_scene(scene: Scene) -> None:
    for folder in ("a", "b"):
        photo_file(scene.site, f"up/{folder}/dup.jpg", seed=7)


def unbuilt_scene(scene: Scene) -> None:
    """A store whose manifests predate the references (or that lost them)."""
    forget_references(real_stores(scene.site.settings))


GONE = "up/ad-1/bike.jpg"  # an original in the origin, made, then moved away


def gone_scene(scene: Scene) -> None:
    """A source made from an original in the origin (by key), whose original is gone since:
    the job is delivered again."""
    from imgwarm.pipeline.optimize import optimize_key

    stores = real_stores(scene.site.settings)
    stores.origin.write(GONE, PHOTOS[(1200, 800, 1)])
    optimize_key(GONE, settings=scene.site.settings, stores=stores, pixels=PIXELS)
    stores.origin.delete(GONE)


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
    stores.origin.write(stores.path_of(name), data)


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
        shaped = stores.path_of(file_name("other", hashlib.sha256(data).hexdigest(), "webp", 16))
        for relative, body in ((".keep", b"x"), ("notes.txt", b"ours, not imgwarm's"),
                               (str(shaped), data)):
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
            scene.planted.append(path)


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



def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The scene's settings as IMGWARM_* variables for the real CLI, with ``extra``."""
    return clean_env(**{**settings_env(settings), **extra})
