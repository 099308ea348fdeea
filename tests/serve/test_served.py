"""What the served gallery lets out, through the real nginx that `imgwarm serve` runs: every
file under the gallery folder and under every store's root is asked for, and only the page and
the variants are answered (everything else 404); folders that overlap the stores are refused."""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from imgwarm.cache.warm import warm
from imgwarm.config import Settings, load_settings
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.samples import jpeg_with_exif, photo
from imgwarm.store import Stores
from tests.support.gallery import serving
from tests.support.nginx import nginx

pytestmark = [pytest.mark.integration, pytest.mark.slow]

IMGWARM = Path(sys.executable).parent / "imgwarm"


@dataclass
class Served:
    port: int
    settings: Settings
    gallery: Path
    variants: set[str]  # URL paths (without the leading /) of every variant

    def status(self, path: str) -> int:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("GET", path)
            return connection.getresponse().status
        finally:
            connection.close()


def env_of(settings: Settings) -> dict[str, str]:
    flat = settings.flat()
    names = ("origin_root", "manifest_root", "nvme_root", "ram_root", "cache_state", "widths")
    found = {f"IMGWARM_{n.upper()}": ",".join(map(str, flat[n])) if isinstance(flat[n], list)
             else str(flat[n]) for n in names}
    return {**{k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}, **found}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    nginx()
    base = tmp_path_factory.mktemp("served")
    ram = Path("/dev/shm") / f"imgwarm-served-{uuid.uuid4().hex[:8]}"
    settings = load_settings(
        origin_root=base / "var" / "origin", manifest_root=base / "var" / "manifest",
        nvme_root=base / "var" / "nvme", ram_root=ram, cache_state=base / "var" / "state",
        widths="320,640", fsync=False)
    stores = Stores.for_settings(settings.store)
    (base / "sources").mkdir()
    variants: set[str] = set()
    for i in range(3):
        source = base / "sources" / f"photo-{i}.jpg"
        source.write_bytes(jpeg_with_exif(photo(800, 600, seed=i), quality=85))
        made = optimize_file(source, settings=settings, stores=stores).manifest
        variants |= {v.path for v in made.variants}
    warm(settings)
    # what else lies in the roots: an original and a stray in the origin, a note in a tier
    (settings.store.origin_root / "uploads").mkdir()
    (settings.store.origin_root / "uploads" / "original.jpg").write_bytes(b"an original")
    (settings.cache.nvme_root / "notes.txt").write_text("not ours")
    env = env_of(settings)
    gallery = base / "www"
    written = subprocess.run([str(IMGWARM), "gallery", "--out", str(gallery)], env=env,
                             capture_output=True, text=True, check=False)
    assert written.returncode == 0, written.stderr
    try:
        with serving(env, gallery) as port:
            yield Served(port, settings, gallery, variants)
    finally:
        shutil.rmtree(ram, ignore_errors=True)


def every_file(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_the_page_and_the_variants_are_served(served: Served) -> None:
    assert served.status("/") == 200
    assert served.variants and all(served.status(f"/{v}") == 200 for v in served.variants)


def test_nothing_under_the_gallery_folder_but_the_page(served: Served) -> None:
    files = every_file(served.gallery)
    assert {"pages.json", "nginx.conf", "site/index.html"} <= set(files)
    for name in [*files, "index.html", "site/", "site", ""]:
        if name:
            assert served.status("/" + quote(name)) == 404, name


def test_nothing_under_the_stores_roots_but_the_variants(served: Served) -> None:
    s, c = served.settings.store, served.settings.cache
    asked = 0
    for root in (s.origin_root, s.manifest_root, c.nvme_root, c.ram_root, c.cache_state):
        for name in every_file(root):
            expected = 200 if name in served.variants else 404
            assert served.status("/" + quote(name)) == expected, (root, name)
            assert served.status(quote(str(root / name))) == 404, (root, name)
            asked += 1
    assert asked > 3 * len(served.variants)  # manifests, state, the tier identities...


def test_a_gallery_or_site_root_that_overlaps_a_store_is_refused(served: Served,
                                                                 tmp_path: Path) -> None:
    env = env_of(served.settings)
    var = served.settings.store.manifest_root.parent
    for out in (var, served.settings.store.manifest_root / "g", served.settings.cache.ram_root):
        done = subprocess.run([str(IMGWARM), "gallery", "--out", str(out)], env=env,
                              capture_output=True, text=True, check=False)
        assert done.returncode == 2 and "must be apart" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert not (var / "pages.json").exists() and not (var / "site").exists()
    done = subprocess.run([str(IMGWARM), "nginx", "--site-root", str(var)], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "must be apart" in done.stderr, done.stderr
