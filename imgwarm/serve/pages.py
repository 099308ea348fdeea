"""Pages: which images each page of the site shows, and the preload Link that follows.

A pages file maps a page's path to the sources it shows, the first being its largest
above-the-fold image (JSON or TOML)::

    {"/": ["uploads/a.jpg", "uploads/b.jpg"], "/ads/17": ["uploads/c.jpg"]}

Sources are named as in the manifest store, or as the files given to ``optimize``. The page's
Link preloads its first image: one URL for old browsers, every width in ``imagesrcset``.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from imgwarm.exceptions import ConfigValueError, PagesError, SettingsError, TooDeep
from imgwarm.formats import OUTPUTS
from imgwarm.manifest import Manifest, Tombstone, Variant
from imgwarm.nesting import check_nesting
from imgwarm.serve.confsafe import checked, quoted
from imgwarm.store import Stores
from imgwarm.store.origin import local_key

PREFERRED = ("webp", "jpeg")  # preload a format every browser takes (AVIF is not yet one)
HDR_MEDIA = "(dynamic-range: high)"  # where an Ultra HDR JPEG is shown rather than WebP/AVIF
SDR_MEDIA = "not all and (dynamic-range: high)"  # ("standard" matches HDR screens too)
HREF_WIDTH = 640  # the URL for browsers without imagesrcset: a width that suits most slots
# What a browser sends unescaped in a path (RFC 3986 pchar); the rest it percent-encodes, and
# nginx's $request_uri, which the map reads, keeps it so.
_PATH_SAFE = "/:@!&'()*+,;=-._~%"
_SIZES = re.compile(r"[A-Za-z0-9 ().,:%/-]+")  # media conditions and lengths: no quotes
PAGES_DEPTH = 4  # the format needs 2: pages -> their sources
MAX_PAGES_BYTES = 64 << 20
VARIANT_PATH = re.compile(r"[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*/[a-z0-9-]*\.?[0-9a-f]+\.[a-z]+")


@dataclass(frozen=True)
class Page:
    path: str  # as the browser sends it (percent-encoded), quoted for nginx
    link: str  # the Link header's value, quoted for nginx
    nopush: str  # the same, marked not to be pushed


def read_pages(file: Path) -> dict[str, list[str]]:
    """The pages file as page -> sources; PagesError naming the entry that is wrong."""
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_PAGES_BYTES + 1)
    except OSError as error:
        raise PagesError(f"cannot read the pages file {file}: {error.strerror}") from None
    if len(raw) > MAX_PAGES_BYTES:
        raise PagesError(f"the pages file {file} is larger than {MAX_PAGES_BYTES >> 20} MiB")
    data: Any
    try:
        check_nesting(raw, PAGES_DEPTH)
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if file.suffix == ".toml" else \
            json.loads(text, object_pairs_hook=_no_duplicates)
    except TooDeep as error:
        raise PagesError(f"the pages file {file} is {error}") from None
    except (UnicodeDecodeError, ValueError) as error:
        kind = "TOML" if file.suffix == ".toml" else "JSON"
        raise PagesError(f"the pages file {file} is not valid {kind}: {error}") from None
    if not isinstance(data, dict):
        raise PagesError(f"the pages file {file} must map page paths to lists of sources")
    seen: dict[str, str] = {}
    for page, sources in data.items():
        if not page.startswith("/") or "?" in page or "#" in page:
            raise PagesError(f"pages file {file}: page {page!r} must be a path starting with / "
                             "(no query string or fragment)")
        if not isinstance(sources, list) or not sources or \
                not all(isinstance(s, str) and s for s in sources):
            raise PagesError(f"pages file {file}: page {page!r} must list one or more sources")
        try:
            checked(page, f"pages file {file}: page")
            for source in sources:
                checked(source, f"pages file {file}: page {page!r}: source")
        except ConfigValueError as error:
            raise PagesError(str(error)) from None
        folded = request_path(page).lower()  # nginx's map compares strings without case
        if folded in seen:
            raise PagesError(f"pages file {file}: pages {seen[folded]!r} and {page!r} are the "
                             "same to nginx (its map ignores case)")
        seen[folded] = page
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"{key!r} is given twice")
        found[key] = value
    return found


def request_path(page: str) -> str:
    """A page's path as a browser sends it in the request line."""
    return quote(page, safe=_PATH_SAFE)


@dataclass(frozen=True)
class Also:
    """One more image a page preloads, on the screens where it is the LCP (``media``): in the
    gallery, a grid photo larger on a phone than the hero above it."""

    manifest: Manifest
    media: str
    sizes: str


def preloads(pages: dict[str, list[str]], stores: Stores, *, prefix: str,
             sizes: str = "100vw", also: dict[str, Also] | None = None) -> list[Page]:
    """Each page's Link, from the manifest of its first source (and ``also``'s, by page)."""
    check_sizes(sizes)
    found = []
    for page, sources in pages.items():
        manifest = find_manifest(stores, sources[0])
        if manifest is None and _deleted(stores, sources[0]):
            continue  # its hero was taken down: no preload (the page may still be served)
        if manifest is None:
            raise PagesError(f"page {page!r}: no manifest for source {sources[0]!r} "
                             "(optimize it first, or name it as the manifest store does)")
        found.append(_page(page, manifest, prefix, sizes, (also or {}).get(page)))
    return found


def check_sizes(sizes: str) -> str:
    """A ``sizes`` attribute (media conditions and lengths), or SettingsError naming it."""
    if not _SIZES.fullmatch(sizes) or len(sizes) > 256:
        raise SettingsError(f"sizes {sizes!r}: a sizes attribute (media conditions and "
                            "lengths, e.g. '(max-width: 600px) 100vw, 50vw'), without quotes")
    return sizes


def preferred(manifest: Manifest) -> list[Variant]:
    """The variants a preload names (and a hero's tag offers first), narrowest first."""
    for kind in PREFERRED:
        variants = sorted((v for v in manifest.variants if v.format == kind),
                          key=lambda v: v.width)
        if variants:
            return variants
    return []


def _deleted(stores: Stores, source: str) -> bool:
    """Whether the source was deleted (``imgwarm delete`` left its tombstone)."""
    keys = [source] + ([local_key(Path(source))] if not source.startswith("/") else [])
    return any(isinstance(stores.manifests.read(k), Tombstone) for k in keys)


def find_manifest(stores: Stores, source: str) -> Manifest | None:
    """A source's manifest, by key or by the path of the file that was optimized."""
    found = stores.manifests.get(source)
    if found is None and not source.startswith("/") and "://" not in source:
        found = stores.manifests.get(local_key(Path(source)))
    return found


def _page(page: str, manifest: Manifest, prefix: str, sizes: str,
          also: Also | None = None) -> Page:
    links = _links(page, manifest, None, sizes)
    first = 0  # (the hero's usual file: pushed where push is on; most screens are not HDR)
    if also is not None:
        check_sizes(also.sizes)
        # first where it applies: a browser requests preloads in the header's order, and
        # on those screens it is the LCP (HTTP/1.1: the first takes the page's warm
        # connection, the next ones open their own)
        extra = _links(page, also.manifest, also.media, also.sizes)
        links, first = extra + links, len(extra)
    plain = ", ".join(_link(chosen, media, prefix, shown,
                            push=n == first and media != HDR_MEDIA)
                      for n, (chosen, media, shown) in enumerate(links))
    nopush = ", ".join(_link(chosen, media, prefix, shown, push=False)
                       for chosen, media, shown in links)
    return Page(path=quoted(request_path(page), f"page {page!r}"),
                link=quoted(plain, f"page {page!r}"), nopush=quoted(nopush, f"page {page!r}"))


def _links(page: str, manifest: Manifest, screens: str | None,
           sizes: str) -> list[tuple[list[Variant], str | None, str]]:
    """A source's preload links (variants, media, sizes), each for the screens (within
    ``screens``) where it is the file the page uses."""
    variants = preferred(manifest)
    if not variants:
        raise PagesError(f"page {page!r}: source {manifest.key!r} has no WebP or JPEG variant")
    hdr = sorted((v for v in manifest.variants if v.format == "jpeg" and v.hdr),
                 key=lambda v: v.width)
    for variant in (*variants, *hdr):  # from a manifest file: checked, never trusted
        if not VARIANT_PATH.fullmatch(variant.path):
            raise PagesError(f"page {page!r}: source {manifest.key!r} names a variant path "
                             f"{variant.path!r} that is not one imgwarm writes")
    if not hdr or variants == hdr:
        return [(variants, screens, sizes)]
    if screens is not None:  # (media queries do not nest: only where it cannot be HDR)
        return []
    # An Ultra HDR image: HDR screens take its JPEG (picture.py), the others the usual file
    return [(variants, SDR_MEDIA, sizes), (hdr, HDR_MEDIA, sizes)]


def _link(variants: list[Variant], media: str | None, prefix: str, sizes: str, *,
          push: bool) -> str:
    """One preload link of a Link header (``media``: the screens it is for)."""
    href = next((v for v in variants if v.width >= HREF_WIDTH), variants[-1])
    kind = OUTPUTS[variants[0].format].media_type
    srcset = ", ".join(f"{prefix}{v.path} {v.width}w" for v in variants)
    # nopush right after rel: nginx's push parser splits the header at every comma, even
    # inside the quoted srcset, so a nopush at the end would not reach the first link.
    start = f"<{prefix}{href.path}>; rel=preload" + ("" if push else "; nopush")
    screens = f'; media="{media}"' if media else ""
    return (f'{start}; as=image; type="{kind}"; imagesrcset="{srcset}"; '
            f'imagesizes="{sizes}"{screens}; fetchpriority=high')
