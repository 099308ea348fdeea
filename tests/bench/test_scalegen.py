"""bench/scalegen.py: the store it writes is one the real commands take for optimize's own:
fsck finds it clean, warm places every variant, the files decode and match their names, and
it holds the same kinds of files as a store the real optimize made."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import pyvips

from imgwarm.cache.warm import warm
from imgwarm.config import Settings
from imgwarm.lifecycle.fsck import check
from imgwarm.manifest import Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import Stores
from imgwarm.store.layout import Layout, hash_of_name
from tests.support.images import jpeg_with_exif, photo

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from scalegen import generate

SOURCES = 200


def _settings(settings: Settings, base: Path, ram: Path) -> Settings:
    return settings.updated(origin_root=base / "origin", manifest_root=base / "manifest",
                            nvme_root=base / "nvme", ram_root=ram / base.name,
                            cache_state=base / "state", fsync=False)


def _kinds(root: Path) -> set[str]:
    """The shapes of the files under a store's root: hex runs and numbers made alike."""
    shapes = set()
    for found in root.rglob("*"):
        if found.is_file():
            text = found.relative_to(root).as_posix()
            shapes.add(re.sub(r"[0-9a-f]{2,}|\d+", "#", re.sub(r"^[^/]*/", "", text)
                              if text.startswith("refs/") else text))
    return shapes


def test_a_generated_store_is_clean_and_warm_places_it(settings: Settings, tmp_path: Path,
                                                       ram: Path) -> None:
    made = _settings(settings, tmp_path / "gen", ram)
    done = generate(made.store.origin_root, made.store.manifest_root, SOURCES,
                    prefix=f"{tmp_path}/up/", processes=2)
    assert done["sources"] == SOURCES
    stores = Stores.for_settings(made.store)

    found = check(stores, settings=made)
    assert (found.records, found.variants, found.claims) == (SOURCES, 2 * SOURCES, 2 * SOURCES)
    assert found.found() == 0, found.to_object()
    assert stores.manifests.references.built()

    manifests = [r for r in stores.manifests.everything() if isinstance(r, Manifest)]
    paths = {v.path for m in manifests for v in m.variants}
    assert len(paths) == 2 * SOURCES  # every variant its own bytes, its own name
    for path in sorted(paths)[:20]:
        data = (made.store.origin_root / path).read_bytes()
        assert hashlib.sha256(data).hexdigest().startswith(hash_of_name(Path(path).name))
        assert Layout().holds(path)
        image = pyvips.Image.new_from_buffer(data, "")
        assert (image.width, image.height) == (24, 16)

    report = warm(made)
    assert report.nvme.copied == 2 * SOURCES
    assert all((made.cache.nvme_root / p).read_bytes() == (made.store.origin_root / p)
               .read_bytes() for p in paths)


def test_it_writes_what_the_real_optimize_writes(settings: Settings, tmp_path: Path,
                                                  ram: Path) -> None:
    real = _settings(settings, tmp_path / "real", ram).updated(widths="24")
    source = tmp_path / "up" / "00000001.jpg"
    source.parent.mkdir(parents=True)
    source.write_bytes(jpeg_with_exif(photo(24, 16, seed=1), quality=85))
    optimize_file(source, settings=real, stores=Stores.for_settings(real.store))
    gen = _settings(settings, tmp_path / "gen", ram)
    generate(gen.store.origin_root, gen.store.manifest_root, 1, prefix="/x/", processes=1)

    assert _kinds(gen.store.origin_root) == _kinds(real.store.origin_root)
    assert _kinds(gen.store.manifest_root) == _kinds(real.store.manifest_root)
