"""Gain maps: an Ultra HDR JPEG's second picture, kept with every JPEG variant.

An Ultra HDR JPEG (Android 14+, recent Pixel and Samsung cameras) is an SDR photo plus a gain
map: a small JPEG after the first (found through the MPF segment), and its metadata (content
boosts, gamma, offsets, HDR capacity). An HDR screen applies the map to the SDR pixels; any
other shows the SDR photo as it is. libvips reads it (``uhdrload``) and writes it with a JPEG
(``jpegsave`` with ``keep="gainmap"``, through libultrahdr) from the image's ``gainmap``
field, a picture, and its ``gainmap-*`` fields.

The SDR pixels go through the usual steps (make.py); the gain map goes through the same
orientation, and is resized for each variant to keep its ratio to the picture (most are a
quarter of it a side). WebP and AVIF carry none: they stay SDR (see docs/optimize.md).

What is untrusted here as everywhere: a gain map is a second JPEG inside the first, checked on
its header (no larger than the picture), counted in the memory estimate, and decoded strictly;
one that cannot be read leaves the photo SDR, with a warning, never refused for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyvips

from imgwarm.pipeline.orient import upright
from imgwarm.pipeline.resize import fit

UNREADABLE = "its HDR gain map cannot be read ({}): made SDR only"


@dataclass(frozen=True)
class GainMap:
    """A source's gain map as found on its header: plain data (it crosses processes)."""

    data: bytes  # the gain map's own JPEG
    width: int
    height: int
    bands: int
    fields: tuple[tuple[str, str, Any], ...]  # (name, kind, value) of each gainmap-* field

    @property
    def decoded_bytes(self) -> int:
        return self.width * self.height * self.bands


_KINDS = {"array": pyvips.GValue.array_double_type, "double": pyvips.GValue.gdouble_type,
          "int": pyvips.GValue.gint_type}


def find(data: bytes, width: int, height: int) -> tuple[GainMap | None, list[str]]:
    """The gain map of a JPEG whose header has an MPF segment and says it has one (hdrgm XMP or
    ISO 21496-1's APP2: cameras also put previews behind MPF), and what is said of it: None,
    with a warning, when it cannot be read or is larger than the picture."""
    try:
        header = pyvips.Image.uhdrload_buffer(data, access="sequential")
        if not header.get_typeof("gainmap-data"):
            return None, []
        blob = bytes(header.get("gainmap-data"))
        head = pyvips.Image.jpegload_buffer(blob, access="sequential")
    except pyvips.Error:
        return None, [UNREADABLE.format("a damaged or cut short second picture")]
    if head.width > width or head.height > height:
        return None, [UNREADABLE.format(f"{head.width}x{head.height}, larger than the picture")]
    kinds = {gtype: kind for kind, gtype in _KINDS.items()}
    fields = tuple(
        (name, kinds[header.get_typeof(name)], header.get(name))
        for name in header.get_fields()
        if name.startswith("gainmap-") and name != "gainmap-data"
        and header.get_typeof(name) in kinds)
    return GainMap(blob, head.width, head.height, head.bands, fields), []


def prepare(gain: GainMap, orientation: int) -> pyvips.Image:
    """The gain map decoded (strictly) and turned as the picture is, in memory. Raises
    pyvips.Error when it cannot be decoded (the caller makes the photo SDR)."""
    image = pyvips.Image.jpegload_buffer(gain.data, fail_on="warning").copy_memory()
    return upright(image, orientation).copy_memory()


def for_variant(gain: GainMap, prepared: pyvips.Image, picture: pyvips.Image,
                full_width: int, full_height: int) -> pyvips.Image:
    """``picture`` (a variant's pixels, ``full_width`` x ``full_height`` being the whole
    source's as displayed) with the gain map resized to it attached, for ``jpegsave``."""
    width = max(1, round(prepared.width * picture.width / full_width))
    height = max(1, round(prepared.height * picture.height / full_height))
    tagged = picture.copy()
    # jpegsave writes a gain map only for an image with gainmap-data; the gainmap picture,
    # when set, is the one it writes (resized here), as after libvips' own thumbnail
    tagged.set_type(pyvips.GValue.blob_type, "gainmap-data", gain.data)
    tagged.set_type(pyvips.GValue.image_type, "gainmap", fit(prepared, width, height))
    for name, kind, value in gain.fields:
        tagged.set_type(_KINDS[kind], name, value)
    return tagged
