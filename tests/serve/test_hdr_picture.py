"""An Ultra HDR source's picture tag in Chromium (issue 25): an HDR screen takes the JPEG,
which carries the gain map; any other screen the WebP, as before. The hero's preload Links say
the same: each for the screens whose file it is.

The HDR screen: Chromium 156 ignores ``dynamic-range`` in DevTools' ``Emulation.
setEmulatedMedia`` (matchMedia still says standard), so a second Chromium is started with
``--force-color-profile=hdr10``, with which ``(dynamic-range: high)`` matches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import Settings
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.serve.pages import HDR_MEDIA, SDR_MEDIA, preloads
from imgwarm.serve.picture import picture
from imgwarm.store import Stores
from tests.support.files import REPO
from tests.support.fixtures import CHROMIUM

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def hdr_browser(browser: Any) -> Iterator[Any]:
    """A second Chromium of the same driver (one Playwright a process), on an HDR screen."""
    launched = browser.browser_type.launch(executable_path=CHROMIUM, args=[
        "--no-sandbox", "--force-color-profile=hdr10"])
    yield launched
    launched.close()


def chosen(browser: Any, page_file: Path) -> tuple[bool, bool, str]:
    """Whether the screen matched the HDR and the SDR media queries, and the file shown."""
    context = browser.new_context(viewport={"width": 800, "height": 600})
    try:
        page = context.new_page()
        page.goto(page_file.as_uri(), wait_until="load")
        # (a lazy image may choose its file after the load event)
        page.wait_for_function("document.images[0].currentSrc !== ''")
        high = page.evaluate(f"matchMedia('{HDR_MEDIA}').matches")
        standard = page.evaluate(f"matchMedia('{SDR_MEDIA}').matches")
        return high, standard, page.evaluate("document.images[0].currentSrc")
    finally:
        context.close()


def test_hdr_screens_get_the_ultra_hdr_jpeg_and_others_the_webp(
        browser: Any, hdr_browser: Any, settings: Settings, tmp_path: Path) -> None:
    source = tmp_path / "phone.jpg"
    source.write_bytes((REPO / "tests" / "corpus" / "ultra-hdr.jpg").read_bytes())
    stores = Stores.local(settings.store)
    manifest = optimize_file(source, settings=settings, stores=stores).manifest
    for eager in (False, True):
        tag = picture(manifest, sizes="800px", eager=eager,
                      base_url=f"{settings.store.origin_root}/")
        assert tag.splitlines()[1].startswith(f'  <source media="{HDR_MEDIA}" type="image/jpeg"')
        page_file = tmp_path / f"page-{eager}.html"
        page_file.write_text(f"<!doctype html><html><body>{tag}</body></html>")
        high, standard, shown = chosen(hdr_browser, page_file)
        assert high and not standard and shown.endswith(".jpg"), shown
        jpeg = next(v for v in manifest.variants if shown.endswith(v.path))
        # the hero: sizes 800px, so 860 (the next width up: an HDR source's JPEG is made at
        # every width); a lazy one: sizes auto, its laid-out width (1920: the page sets none
        # but the tag's own width)
        assert jpeg.hdr and jpeg.width == (860 if eager else 1920)
        high, standard, shown = chosen(browser, page_file)
        assert not high and standard and shown.endswith(".webp"), shown

    (link,) = preloads({"/": [str(source)]}, stores, prefix="/")
    # (as nginx's config holds it: in quotes, its own quotes escaped)
    sdr_link, hdr_link = link.link.strip('"').replace('\\"', '"').split(', <')
    assert f'media="{SDR_MEDIA}"' in sdr_link and 'type="image/webp"' in sdr_link
    assert f'media="{HDR_MEDIA}"' in hdr_link and 'type="image/jpeg"' in hdr_link
    assert "nopush" in hdr_link and "nopush" not in sdr_link  # pushed: the usual file alone
