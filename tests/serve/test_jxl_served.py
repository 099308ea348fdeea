"""JPEG XL served (issue 42): the gallery of photos made as jxl, webp and jpeg, served by the
nginx `imgwarm serve` runs, loaded in Chromium 156, which decodes JPEG XL: every image is the
JPEG XL file of its width, decoded at its size, sent as image/jxl with the immutable cache
header of every hashed name."""

from __future__ import annotations

import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from imgwarm.cache.warm import warm
from imgwarm.config import load_settings
from imgwarm.manifest import Credits, Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.samples import jpeg_with_exif, photo
from imgwarm.store import Stores
from tests.support.gallery import served_gallery
from tests.support.nginx import nginx

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Manifest]]]:
    nginx()
    base = tmp_path_factory.mktemp("jxl")
    ram = Path("/dev/shm") / f"imgwarm-jxl-{uuid.uuid4().hex[:8]}"
    settings = load_settings(
        origin_root=base / "origin", manifest_root=base / "manifest", nvme_root=base / "nvme",
        ram_root=ram, cache_state=base / "state", widths="320,640,1280",
        formats="jxl,webp,jpeg", fsync=False)
    stores = Stores.for_settings(settings.store)
    (base / "sources").mkdir()
    manifests = []
    for i in range(6):
        source = base / "sources" / f"photo-{i}.jpg"
        source.write_bytes(jpeg_with_exif(photo(1400, 933, seed=i), quality=90))
        manifests.append(optimize_file(source, settings=settings, stores=stores,
                                       credits=Credits.given(description=f"Photo {i}")).manifest)
    warm(settings)
    try:
        with served_gallery(settings, manifests, base / "www") as url:
            yield url, manifests
    finally:
        shutil.rmtree(ram, ignore_errors=True)


def test_chromium_takes_and_decodes_the_jxl(browser: Any,
                                            site: tuple[str, list[Manifest]]) -> None:
    url, manifests = site
    by_path = {f"/{v.path}": v for m in manifests for v in m.variants}
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(url, wait_until="load")
        page.evaluate("Promise.all([...document.images].map(i => { i.loading = 'eager';"
                      " return i.decode(); }))")  # rejects for a file it cannot decode
        # (the hero and the phone's LCP offer the format their preload names: WebP)
        # the file's own size, as Chromium's decoder reads it (naturalWidth is scaled by the
        # density srcset chose)
        found = page.evaluate(
            "Promise.all([...document.images].map(async i => [i.currentSrc,"
            " (await createImageBitmap(await (await fetch(i.currentSrc)).blob())).width,"
            " !!i.parentElement.querySelector('source[type=\"image/jxl\"]')]))")
    finally:
        context.close()
    offered = [(src, natural) for src, natural, jxl in found if jxl]
    assert len(offered) >= 1, found
    for src, natural in offered:
        variant = by_path[urlsplit(src).path]
        assert variant.format == "jxl", src
        assert natural == variant.width


def test_nginx_sends_it_as_image_jxl_for_ever(site: tuple[str, list[Manifest]]) -> None:
    url, manifests = site
    variant = next(v for v in manifests[0].variants if v.format == "jxl")
    with urllib.request.urlopen(url + variant.path) as answer:
        assert answer.headers["Content-Type"] == "image/jxl"
        assert "immutable" in answer.headers["Cache-Control"]
        assert len(answer.read()) == variant.bytes
