"""Picture tags: the ``<picture>`` a page shows a source with, from its manifest.

    <picture>
      <source type="image/avif" srcset="/ab/cd/x.1f..avif 320w, ..." sizes="auto, 100vw">
      <source type="image/webp" srcset="..." sizes="auto, 100vw">
      <img src="/../x.9c..jpg" srcset="... 320w, ..." sizes="auto, 100vw" width="1920"
           height="1280" alt="..." loading="lazy" decoding="async"
           style="background:#8a9a7b url(data:image/webp;base64,...) 50% 50%/cover no-repeat">
    </picture>

An Ultra HDR source (its JPEG variants carry the gain map) is offered first to HDR screens,
as JPEG: ``<source media="(dynamic-range: high)" type="image/jpeg" ...>``; WebP and AVIF
hold the SDR picture only, and other screens take them as before.

A browser takes the first ``<source>`` whose type it supports and, from its ``srcset``, the
narrowest width that fills the slot ``sizes`` describes (``auto``: the laid-out width, for a
lazy image). ``width`` and ``height`` give the aspect ratio, so the page does not move when the
image arrives; the placeholder is the ``<img>``'s own background, painted over by the image,
no script needed. The hero (``eager``) offers first the format its preload names
(``pages.preferred``), with the same ``sizes``: the preload is the request the image uses.

Everything from a manifest is checked or escaped: variant paths must be names imgwarm writes,
the placeholder must be a colour and a WebP data URI, and text is escaped for attributes.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import urlsplit

from markupsafe import Markup, escape
from pydantic import ValidationError

from imgwarm.exceptions import PictureError, SettingsError
from imgwarm.formats import ORDER, OUTPUTS
from imgwarm.manifest import Manifest, Placeholder, Variant
from imgwarm.serve.pages import HDR_MEDIA, HREF_WIDTH, VARIANT_PATH, check_sizes, preferred

_COLOR = re.compile(r"#[0-9a-f]{6}")
_LQIP = re.compile(r"data:image/webp;base64,[A-Za-z0-9+/]+={0,2}")
MAX_LQIP = 1024
_CLASS = re.compile(r"[A-Za-z0-9_ -]{1,200}")


def picture(manifest: Manifest, *, sizes: str = "100vw", alt: str | None = None,
            eager: bool = False, css_class: str | None = None, base_url: str = "/",
            csp: bool = False, above_fold: bool = False, priority: bool = False,
            low: bool = False) -> str:
    """The ``<picture>`` tag of a source. ``alt`` overrides the description; ``eager`` marks
    the hero (loaded first, at high priority); ``base_url`` is where the variant paths are
    served from (``/``, ``/img/``, ``https://cdn.example.com/``); ``csp``: the placeholder as
    a class (its rule from ``placeholder_rule``) rather than a ``style`` attribute, which a
    Content-Security-Policy without ``'unsafe-inline'`` styles blocks; ``above_fold``: an
    image other than the hero that may be in the first screen, loaded at once, with every
    format offered as usual; ``priority``: at high priority too, offering what a preload
    names as the hero does (the LCP, where it is not the hero: one image, or they share the
    connection); ``low``: at low priority even when on screen (not the LCP at any layout
    the page knows: its bytes come after the LCP's)."""
    base = check_options(sizes=sizes, css_class=css_class, base_url=base_url)
    if low and (eager or priority):
        raise SettingsError("low: an image loaded first at high priority (eager, priority) "
                            "cannot be kept low too")
    by_format = _variants(manifest)
    fallback = by_format.get("jpeg") or by_format[max(by_format, key=lambda f: ORDER.index(f))]
    if eager or priority:  # (preloaded: the format the Link names, so they are one request)
        first = preferred(manifest)
        offered = [first[0].format] if first and first[0].format != fallback[0].format else []
        shown_sizes = sizes
    else:
        offered = [f for f in ORDER if f in by_format and by_format[f] is not fallback]
        # lazy images: the laid-out width, where supported (auto is for lazy ones only)
        shown_sizes = sizes if above_fold else f"auto, {sizes}"
    lines = ["<picture>"]
    if any(v.hdr for v in by_format.get("jpeg", [])):  # HDR screens: the Ultra HDR JPEG first
        lines.append(f'  <source media="{HDR_MEDIA}" type="image/jpeg" '
                     f'srcset="{_srcset(by_format["jpeg"], base)}" sizes="{escape(shown_sizes)}">')
    for fmt in offered:
        lines.append(f'  <source type="{OUTPUTS[fmt].media_type}" '
                     f'srcset="{_srcset(by_format[fmt], base)}" sizes="{escape(shown_sizes)}">')
    biggest = fallback[-1]
    src = next((v for v in fallback if v.width >= HREF_WIDTH), biggest)
    attributes = {
        "src": base + src.path,
        "srcset": _srcset(fallback, base),
        "sizes": shown_sizes,
        "width": str(biggest.width),
        "height": str(biggest.height),
        "alt": (alt if alt is not None else manifest.description) or "",
        "loading": "eager" if eager or above_fold else "lazy",
        "decoding": "async",
    }
    if eager or priority:
        attributes["fetchpriority"] = "high"
    elif low:  # (a browser raises an image it finds on screen to high: not this one)
        attributes["fetchpriority"] = "low"
    rule = placeholder_rule(manifest) if csp else None
    classes = " ".join(c for c in (css_class, rule[0] if rule else None) if c)
    if classes:
        attributes["class"] = classes
    style = None if csp else _style(manifest.placeholder)
    if style:
        attributes["style"] = style
    shown = " ".join(f'{name}="{escape(value)}"' for name, value in attributes.items())
    lines += [f"  <img {shown}>", "</picture>"]
    return "\n".join(lines)


def check_options(*, sizes: str, css_class: str | None, base_url: str) -> str:
    """The options of a tag checked (SettingsError naming the one that is wrong); returns
    the base URL ending in /."""
    check_sizes(sizes)
    if css_class is not None and not _CLASS.fullmatch(css_class):
        raise SettingsError(f"css_class {css_class!r}: class names (letters, digits, - and _, "
                            "separated by spaces)")
    return _base(base_url)


def _base(base_url: str) -> str:
    """``base_url`` checked (a path from /, or an http(s) URL) and ending in /."""
    parts = urlsplit(base_url)
    good = (parts.scheme in ("http", "https") and parts.netloc) or \
        (not parts.scheme and not parts.netloc and base_url.startswith("/"))
    odd = any(c in ' "\'<>\\,' or ord(c) <= 0x20 or 0x7f <= ord(c) <= 0x9f for c in base_url)
    if not good or parts.query or parts.fragment or odd:
        raise SettingsError(f"base_url {base_url!r}: a path from / or an http(s) URL, where "
                            "the variant paths are served (no query, fragment, quotes, commas, "
                            "spaces or control characters)")
    return base_url if base_url.endswith("/") else base_url + "/"


def _variants(manifest: Manifest) -> dict[str, list[Variant]]:
    """The variants by format, narrowest first, every path checked."""
    found: dict[str, list[Variant]] = {}
    for variant in manifest.variants:
        if not VARIANT_PATH.fullmatch(variant.path):
            raise PictureError(f"source {manifest.key!r} names a variant path {variant.path!r} "
                               "that is not one imgwarm writes")
        found.setdefault(variant.format, []).append(variant)
    if not found:
        raise PictureError(f"source {manifest.key!r} has no variants")
    return {f: sorted(v, key=lambda v: v.width) for f, v in found.items()}


def _srcset(variants: list[Variant], base: str) -> str:
    return str(escape(", ".join(f"{base}{v.path} {v.width}w" for v in variants)))


def _style(placeholder: Placeholder | None) -> str | None:
    """The placeholder as a CSS background; None when there is none or it is not well formed
    (it came from a file: nothing but a colour and a WebP data URI goes into a style)."""
    if placeholder is None or not _COLOR.fullmatch(placeholder.color) or \
            len(placeholder.lqip) > MAX_LQIP or not _LQIP.fullmatch(placeholder.lqip):
        return None
    return f"background:{placeholder.color} url({placeholder.lqip}) 50% 50%/cover no-repeat"


def placeholder_rule(manifest: Manifest) -> tuple[str, str] | None:
    """The placeholder as a class and its CSS rule (``.iw-ph-1f2e3d4c5b6a{background:...}``):
    for a page with a strict Content-Security-Policy, the rules go in its stylesheet or in a
    ``<style>`` block allowed by its hash. None when there is no placeholder to show."""
    style = _style(manifest.placeholder)
    if style is None:
        return None
    name = "iw-ph-" + hashlib.sha256(style.encode()).hexdigest()[:12]
    return name, f".{name}{{{style}}}"


def as_manifest(value: Any) -> Manifest:
    """A Manifest from itself or its JSON form (a dict, as a template context may hold)."""
    if isinstance(value, Manifest):
        return value
    if isinstance(value, dict):
        try:
            return Manifest.model_validate(value)
        except ValidationError as error:  # one line naming the first wrong field
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "manifest"
            raise PictureError(f"picture: not a manifest: {where}: {first['msg']}") from None
    raise PictureError(f"picture: expected a manifest, got {type(value).__name__}")


def fallback_note(manifest: Manifest) -> str | None:
    """What a page should know when the tag's <img> is not a JPEG: browsers that take none of
    its <source> types (an AVIF-only manifest in a browser without AVIF) show nothing."""
    formats = {v.format for v in manifest.variants}
    if not formats or "jpeg" in formats:
        return None
    kinds = " and ".join(f for f in ORDER if f in formats)
    return (f"{manifest.key}: no JPEG variant: the <img> falls back to {kinds}, which some "
            "browsers cannot show (add jpeg to the formats)")


def picture_filter(manifest: Any, **options: Any) -> Markup:
    """``{{ manifest | picture(sizes="50vw") }}``: the tag, marked safe (every part of it is
    escaped here)."""
    return Markup(picture(as_manifest(manifest), **options))


def register(environment: Any) -> None:
    """Add the ``picture`` filter to a Jinja2 Environment (Flask: ``app.jinja_env``)."""
    environment.filters["picture"] = picture_filter
