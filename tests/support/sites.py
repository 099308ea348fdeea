"""A site for the cache, serve and lifecycle tests: an origin with real variants made by the
real optimize, and the settings of a cache server in front of it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from imgwarm.cache.warm import WarmReport, warm
from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.store import Stores
from tests.support.images import jpeg_with_exif, photo


@dataclass
class Site:
    """An origin with real variants, and the settings of a cache server in front of it."""

    settings: Settings
    root: Path
    sources: Path

    def add(self, name: str, width: int = 1200, height: int = 800, seed: int = 0) -> Manifest:
        from imgwarm.pipeline.optimize import optimize_file

        path = self.sources / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(jpeg_with_exif(photo(width, height, seed=seed), quality=85))
        return optimize_file(path, settings=self.settings,
                             stores=Stores.for_settings(self.settings.store)).manifest

    def warm(self, **options: object) -> WarmReport:
        return warm(self.settings, **options)  # type: ignore[arg-type]

    def manifests(self) -> list[Manifest]:
        return [r for r in Stores.for_settings(self.settings.store).manifests.everything()
                if isinstance(r, Manifest)]

    def env(self) -> dict[str, str]:
        """The site's settings as IMGWARM_* variables, for the commands."""
        return settings_env(self.settings)

    def in_tier(self, tier: str) -> set[str]:
        root = self.settings.cache.ram_root if tier == "ram" else self.settings.cache.nvme_root
        return {str(p.relative_to(root)) for p in root.rglob("*")
                if p.is_file() and not p.name.startswith(".")}


def settings_env(settings: Settings) -> dict[str, str]:
    """Settings as IMGWARM_* variables for a process of the real CLI: the roots, the tier and
    shard layout (a process that read another would look for every file in the wrong folder)
    and the S3 bucket."""
    flat = settings.flat()
    names: tuple[str, ...] = ("origin_root", "manifest_root", "nvme_root", "ram_root",
                              "cache_state", "ram_budget", "ram_max_width", "max_dir_entries",
                              "shard_levels")
    if flat["origin"] == "s3":
        names += ("origin", "s3_bucket", "s3_endpoint_url", "s3_region")
    env = {f"IMGWARM_{n.upper()}": str(flat[n]) for n in names}
    env["IMGWARM_WIDTHS"] = ",".join(map(str, flat["widths"]))
    env["IMGWARM_FSYNC"] = "true" if flat["fsync"] else "false"
    return env


def make_site(base: Settings, tmp_path: Path, ram_root: Path, count: int = 6,
              **options: object) -> Site:
    """A site whose RAM tier takes thumbnails only (ram_max_width 640, unless ``options``
    say otherwise): what most cache tests place is easier to tell apart that way."""
    settings = base.updated(**{
        "origin_root": tmp_path / "origin", "manifest_root": tmp_path / "manifest",
        "nvme_root": tmp_path / "nvme", "ram_root": ram_root / f"tier-{uuid.uuid4().hex[:6]}",
        "cache_state": tmp_path / "state", "widths": "320,640,1280", "fsync": False,
        "ram_max_width": 640, **options})
    site = Site(settings, tmp_path, tmp_path / "sources")
    site.sources.mkdir()
    for i in range(count):
        site.add(f"photo-{i}.jpg", seed=i)
    return site


def synthetic(site: Site, sources: int, per_source: int = 3, *, seed: int = 0,
              sizes: tuple[int, int] = (5000, 50000)) -> list[Manifest]:
    """Sources with opaque variant files of random bytes (warm never decodes them), written
    through imgwarm's own stores: many variants, made in a moment."""
    import hashlib
    import random

    from imgwarm.manifest import Variant
    from imgwarm.pipeline.naming import file_name

    stores = Stores.for_settings(site.settings.store)
    rnd = random.Random(seed)
    made = []
    for s in range(sources):
        variants = []
        for v in range(per_source):
            data = rnd.randbytes(rnd.randrange(*sizes))
            name = file_name(f"s{seed}-{s}", hashlib.sha256(data).hexdigest(), "webp", 16)
            path = stores.path_of(name)
            stores.origin.write(path, data)
            width = (320, 640, 1280)[v % 3]
            variants.append(Variant(format="webp", width=width, height=width * 2 // 3,
                                    bytes=len(data), path=str(path)))
        manifest = Manifest(key=f"up/{seed}/{s}.jpg", source_sha256="0" * 64, width=1280,
                            height=853, settings_digest="synthetic", variants=variants)
        stores.manifests.put(manifest)
        made.append(manifest)
    return made


def thumbnails(site: Site, widest: int = 640) -> dict[str, int]:
    """Variant path -> bytes, of every variant at most ``widest`` wide (what RAM takes)."""
    return {v.path: v.bytes for m in site.manifests() for v in m.variants if v.width <= widest}


def halves(site: Site, widest: int = 640) -> tuple[list[str], list[str]]:
    """The thumbnails of the first half of the sources (by key) and of the rest: whole
    sources, since a source's variants share its traffic in the ranking (rank.py)."""
    manifests = sorted(site.manifests(), key=lambda m: m.key)
    half = len(manifests) // 2
    first, second = ([v.path for m in part for v in m.variants if v.width <= widest]
                     for part in (manifests[:half], manifests[half:]))
    return first, second
