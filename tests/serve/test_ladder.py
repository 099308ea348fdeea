"""What Chromium takes from a width ladder by bytes (issue 27): at every viewport width from
320 to 1920 CSS px, at DPR 1, 1.75, 2 and 3, the file its srcset choice gets has at most 1.5x
the pixels its slot needs, on corpus photos; the fixed ladder (320/640/1280/1920), in the
same pages, does not keep to that (so the measure can fail). And the default ladder
(issue 42) on phones: at most 1.6x the pixels, where 0.3.0's took over 3x."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.pipeline.variants import PIXEL_SLACK
from imgwarm.serve.picture import picture
from tests.support.files import REPO
from tests.support.pipeline import run

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.slow]

PHOTOS = ["42_IndexError.jpg", "HMD_Nokia_8.3_5G.jpg"]  # 4032x3024 and 4608x3456, unlike
VIEWPORTS = range(320, 1921, 80)
DPRS = (1, 1.75, 2, 3)
OLD_WIDTHS = [320, 640, 1280, 1920]  # 0.3.0's default
PHONES = range(320, 431, 22)  # CSS px wide (Android's 360-412 dp, the iPhones' 375-430)
PHONE_DPRS = (1.75, 2, 2.625, 3)
PHONE_SLACK = 1.6  # issue 42's bound on the defaults' worst over-fetch on a phone
STYLE = "body { margin: 0 } img { display: block; width: 100%; height: auto }"


def taken(browser: Any, page: Path, width: int, dpr: float) -> list[tuple[str, float]]:
    """Each image's chosen file and the device pixels of width its slot needs."""
    context = browser.new_context(viewport={"width": width, "height": 700},
                                  device_scale_factor=dpr)
    try:
        tab = context.new_page()
        tab.goto(page.as_uri(), wait_until="load")
        tab.wait_for_function("[...document.images].every(i => i.complete && i.currentSrc)")
        found: list[tuple[str, float]] = tab.evaluate(
            "[...document.images].map(i => [i.currentSrc,"
            " i.getBoundingClientRect().width * devicePixelRatio])")
        return found
    finally:
        context.close()


def worst_taken(browser: Any, settings: Settings, made: list[Manifest], tmp_path: Path,
                viewports: range, dprs: tuple[float, ...]) -> list[float]:
    """Each manifest's worst ratio of the pixels of the file Chromium took to those its
    100vw slot needs, over ``viewports`` x ``dprs``."""
    base = f"{settings.store.origin_root}/"  # (a page from a file: served from the origin)
    tags = "\n".join(picture(m, sizes="100vw", eager=True, base_url=base) for m in made)
    page = tmp_path / "page.html"
    page.write_text(f'<!DOCTYPE html><html lang="en"><head><meta name="viewport" '
                    f'content="width=device-width"><style>{STYLE}</style></head>'
                    f"<body>{tags}</body></html>")
    by_path = {v.path: (n, v) for n, m in enumerate(made) for v in m.variants}
    worst = [0.0] * len(made)
    for dpr in dprs:
        for width in viewports:
            for url, needed in taken(browser, page, width, dpr):
                n, variant = by_path[url.removeprefix(f"file://{base}")]
                assert variant.format == "webp", url
                assert needed == pytest.approx(width * dpr, abs=1)  # the slot: 100vw
                worst[n] = max(worst[n], (variant.width / needed) ** 2)
    return worst


def both(first: Settings, second: Settings) -> list[Manifest]:
    """Each photo made with ``first`` and with ``second``, alternately."""
    made: list[Manifest] = []
    for name in PHOTOS:
        data = (REPO / "tests" / "corpus" / name).read_bytes()
        made += [run(data, f"first/{name}", first), run(data, f"second/{name}", second)]
    return made


def test_srcset_choice_within_the_pixel_slack(browser: Any, settings: Settings,
                                              tmp_path: Path) -> None:
    made = both(settings.updated(width_step_bytes="20K"), settings.updated(widths=OLD_WIDTHS))
    worst = worst_taken(browser, settings, made, tmp_path, VIEWPORTS, DPRS)
    ladders, fixed_worst = worst[0::2], worst[1::2]
    assert all(1 <= w <= PIXEL_SLACK for w in ladders), ladders
    assert all(w > 2 for w in fixed_worst), fixed_worst  # e.g. 1280 px for a 660-px slot: 3.8x


def test_the_default_ladder_on_phones(browser: Any, settings: Settings, tmp_path: Path) -> None:
    """With the default widths (no setting), no phone takes a file of over 1.6x the pixels its
    100vw slot needs; with 0.3.0's, a phone does (so the measure can fail)."""
    made = both(settings, settings.updated(widths=OLD_WIDTHS, fallback_widths=""))
    worst = worst_taken(browser, settings, made, tmp_path, PHONES, PHONE_DPRS)
    defaults, before = worst[0::2], worst[1::2]
    assert all(1 <= w <= PHONE_SLACK for w in defaults), defaults
    assert all(w > 3 for w in before), before  # 1280 px for a 665-px slot (412 x 1.75): 3.7x
