"""Gallery: a page of optimized images with their picture tags, and what serves it.

One folder holds everything nginx needs to show it: ``site/index.html`` (the first image is
the hero: loaded first, preloaded by a Link header; the rest lazily, in a grid), ``pages.json``
(the page and its sources, as ``imgwarm nginx --pages`` reads it) and ``nginx.conf`` (the
config ``imgwarm nginx`` writes for that folder and pages file: include it in http {}).
``imgwarm serve`` runs nginx on it (serve/server.py). nginx serves the page at ``/`` from
``site/`` (an exact location: nothing else there is served) and variant-shaped paths from the
tiers, and answers 404 for everything else: the pages file and the config, which name the
roots, sit beside ``site/``, never in it. The folder is kept apart from the stores' roots.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from markupsafe import Markup

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.roots import apart, stores_roots
from imgwarm.serve.nginx import Config, NginxOptions, image_prefix, render
from imgwarm.serve.nginx import check as nginx_check
from imgwarm.serve.pages import Also, find_manifest, preloads, read_pages
from imgwarm.serve.picture import picture, placeholder_rule
from imgwarm.serve.written import write_all
from imgwarm.store import Stores

PAGE, PAGES, CONFIG, SITE = "index.html", "pages.json", "nginx.conf", "site"
HERO_WIDTH = 960  # CSS px: the page's width, the hero's at most
PAD, GRID_GAP = 16, 12  # CSS px: the page's padding, the space between grid columns
COLUMN = 280  # CSS px: the narrowest grid column


def _sizes() -> tuple[str, str, str]:
    """The hero's and a grid image's ``sizes``: the widths STYLE lays them out at (a larger
    guess makes the browser take a wider file than its slot needs); and the screens with one
    column (where a grid photo can be larger than the hero)."""
    page = HERO_WIDTH + 2 * PAD  # the viewport from which the page stops growing
    hero = f"(max-width: {page}px) calc(100vw - {2 * PAD}px), {HERO_WIDTH}px"
    # n columns from a content width of n * COLUMN + (n - 1) * GRID_GAP, set by media
    # queries on the same widths as the sizes (with a classic scrollbar, a layout's own
    # auto-fill would change columns some pixels later than a media query says)
    two, three = COLUMNS
    one_column = f"(max-width: {two - 0.02:g}px)"  # (a fractional viewport: not 603.5)
    grid = (f"{one_column} calc(100vw - {2 * PAD}px), "
            f"(max-width: {three - 0.02:g}px) calc((100vw - {2 * PAD + GRID_GAP}px) / 2), "
            f"(max-width: {page - 0.02:g}px) calc((100vw - {2 * PAD + 2 * GRID_GAP}px) / 3), "
            f"{(HERO_WIDTH - 2 * GRID_GAP) // 3}px")
    return hero, grid, one_column


COLUMNS = tuple(n * COLUMN + (n - 1) * GRID_GAP + 2 * PAD for n in (2, 3))  # viewports, px
HERO_SIZES, GRID_SIZES, ONE_COLUMN = _sizes()  # HERO_SIZES: the preload's too
# The narrowest common phone screen, CSS px: grid images that can start above its fold are
# loaded at once at high priority (the largest one there, not the hero, may be the LCP).
FOLD = (360, 800)
_HEAD, _CAPTION, _GAP = 60, 24, 16  # px: the title, a caption's line, the space after a figure
FIRST_SCREEN_MOST = 24  # sources read for a phone's LCP (the 25th would start below its fold
# unless every one above were under 16 px tall)
TITLE = "imgwarm gallery"
STYLE = "".join(f"\n  {rule}" for rule in (
    "body {{ margin: 0 auto; max-width: {hero_width}px; padding: {pad}px; "
    "font: 16px/1.4 system-ui, sans-serif; color: #222; }}",
    "h1 {{ font-size: 1.4rem; margin: 0 0 12px; }}",
    # width and height on each <img> give its aspect ratio: nothing moves as images arrive
    "img {{ display: block; width: 100%; height: auto; }}",
    ".hero {{ margin: 0 0 16px; }}",
    ".grid {{ display: grid; grid-template-columns: 1fr; gap: {gap}px; margin: 0; padding: 0; }}",
    "@media (min-width: {two}px) {{ .grid {{ grid-template-columns: repeat(2, 1fr); }} }}",
    "@media (min-width: {three}px) {{ .grid {{ grid-template-columns: repeat(3, 1fr); }} }}",
    "figure {{ margin: 0; }}",
    "figcaption {{ font-size: 0.85rem; color: #555; padding: 4px 0; overflow-wrap: anywhere; }}",
))


@dataclass(frozen=True)
class Gallery:
    folder: Path
    page: Path
    pages: Path
    config: Path
    images: int


def gallery_config(settings: Settings, folder: Path, pages: dict[str, list[str]] | None = None,
                   *, listen: str, access_log: str | None = None,
                   tier_header: bool = True, also: dict[str, Also] | None = None) -> Config:
    """The nginx config that serves the gallery in ``folder`` and the variants it shows
    (``pages``: as its pages file says, read from it when not given; ``also``: the phone's
    LCP by page, found from the manifests when not given)."""
    if pages is None:
        pages = read_pages(folder / PAGES)
    prefix = image_prefix(settings, None)
    stores = Stores.for_settings(settings.store)
    found = preloads(pages, stores, prefix=prefix, sizes=HERO_SIZES,
                     also=phone_lcp(pages, stores) if also is None else also)
    apart({"gallery folder": folder, **stores_roots(settings)})
    return render(settings, NginxOptions(listen=listen, site_root=(folder / SITE).resolve(),
                                         site_pages={"/": f"/{PAGE}"},
                                         tier_header=tier_header, access_log=access_log,
                                         pages=found))


def write_gallery(settings: Settings, manifests: list[Manifest], folder: Path, *,
                  listen: str = "127.0.0.1:8080", title: str = TITLE,
                  access_log: str | None = None, check: bool = False) -> Gallery:
    """Write the gallery of ``manifests`` (the first is the hero) into ``folder``: the page,
    its pages file and its nginx config, each whole or not at all; ``check``: nginx -t on
    the config first (nothing is written when it fails)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    if not manifests:
        raise ValueError("a gallery needs at least one optimized image")
    base = image_prefix(settings, None)
    hero, rest = manifests[0], manifests[1:]
    env = Environment(loader=PackageLoader("imgwarm.serve"), undefined=StrictUndefined,
                      autoescape=True, trim_blocks=True, lstrip_blocks=True)
    items = [(hero, True, HERO_SIZES), *((m, False, GRID_SIZES) for m in rest)]
    first_screen, largest = above_the_fold(hero, rest)  # (grid indexes)
    rules = dict(filter(None, (placeholder_rule(m) for m, _, _ in items)))
    page_style = STYLE.format(hero_width=HERO_WIDTH, pad=PAD, gap=GRID_GAP, two=COLUMNS[0],
                              three=COLUMNS[1])
    css = Markup(page_style  # (ours, and checked placeholders)
                 + "".join(f"\n  {rule}" for rule in rules.values()) + "\n")
    html = env.get_template("gallery.html.j2").render(
        title=title, css=css, style_hash=csp_hash(str(css)),
        description=f"{len(manifests)} photos, each in WebP or AVIF with a JPEG fallback at "
        "the width its slot needs",
        hero=_item(hero, eager=True, sizes=HERO_SIZES, base=base),
        items=[_item(m, eager=False, sizes=GRID_SIZES, base=base, priority=n == largest,
                     above_fold=n < first_screen or n == largest,
                     low=n >= first_screen and n != largest)
               for n, m in enumerate(rest)])
    pages = {"/": [m.key for m in manifests]}
    also = {} if largest is None else {"/": Also(rest[largest], ONE_COLUMN, GRID_SIZES)}
    config = gallery_config(settings, folder, pages, listen=listen, access_log=access_log,
                            also=also)  # (the manifests in hand: not read again)
    if check:
        nginx_check(config, snippet=False)
    (folder / SITE).mkdir(parents=True, exist_ok=True)
    write_all({folder / SITE / PAGE: html, folder / PAGES: json.dumps(pages, indent=2) + "\n",
               folder / CONFIG: config.whole})
    return Gallery(folder, folder / SITE / PAGE, folder / PAGES, folder / CONFIG,
                   len(manifests))


def phone_lcp(pages: dict[str, list[str]], stores: Stores) -> dict[str, Also]:
    """By page, the grid photo that is the LCP on a phone (one column), where one is larger
    there than the hero: preloaded too, on those screens."""
    found = {}
    for page, sources in pages.items():
        manifests = []
        for source in sources[:FIRST_SCREEN_MOST]:
            manifest = find_manifest(stores, source)
            if manifest is None:
                break  # (taken down or not made: the page shows what it can)
            manifests.append(manifest)
        if len(manifests) > 1:
            largest = above_the_fold(manifests[0], manifests[1:])[1]
            if largest is not None:
                found[page] = Also(manifests[1 + largest], ONE_COLUMN, GRID_SIZES)
    return found


def csp_hash(text: str) -> str:
    """A Content-Security-Policy source allowing the inline ``<style>`` of exactly ``text``."""
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def above_the_fold(hero: Manifest, rest: list[Manifest]) -> tuple[int, int | None]:
    """How many grid images lie wholly within the first screen of the narrowest phone (FOLD):
    one column there, each as wide as the page, the hero first (captions counted as a line);
    and which of them shows more of itself there than the hero (the LCP), if one does. (One
    cut by the fold is left lazy: it still loads on layout, but no longer competes with the
    LCP's bytes from the first request.)"""
    width, fold = FOLD[0] - 2 * PAD, FOLD[1]
    top = _HEAD
    shown = []  # the visible height of each, the hero first
    whole = 0
    for manifest in [hero, *rest]:
        if top >= fold:
            break
        tall = _tall(manifest, width)
        shown.append(min(tall, fold - top))
        whole += top + tall <= fold
        top += tall + _GAP
    largest = max(range(len(shown)), key=lambda n: shown[n])
    return max(0, whole - 1), (largest - 1 if largest > 0 else None)


def _tall(manifest: Manifest, width: int) -> int:
    return round(width * manifest.height / manifest.width) + (_CAPTION if manifest.description
                                                              else 0)


def _item(manifest: Manifest, *, eager: bool, sizes: str, base: str,
          above_fold: bool = False, priority: bool = False, low: bool = False
          ) -> dict[str, object]:
    return {"tag": Markup(picture(manifest, sizes=sizes, eager=eager, base_url=base,
                                  csp=True, above_fold=above_fold, priority=priority,
                                  low=low)),
            "caption": manifest.description or ""}
