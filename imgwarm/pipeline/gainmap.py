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
its header (no larger than the picture; a Huffman-coded 8-bit frame), counted in the memory
estimate, and decoded as strictly as the picture (TurboJPEG, every libjpeg warning an error:
jpegload with fail_on="warning" passed a gain map relabelled SOF9 and one with flipped scan
bits). Its metadata is checked against what libultrahdr's encoder takes (its decoder takes
more: gamma 0, max below min, infinite values...), and then tried on a tiny picture, so that
the encoder never refuses a variant. A gain map that cannot be used in full leaves the photo
SDR, with a warning, never refused for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy
import pyvips
import simplejpeg
from numpy.typing import NDArray

from imgwarm.pipeline.jpeg import read_header
from imgwarm.pipeline.orient import upright
from imgwarm.pipeline.resize import fit

UNREADABLE = "its HDR gain map cannot be read ({}): made SDR only"
UNWRITABLE = "its HDR gain map's metadata cannot be written ({}): made SDR only"


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
    frame = read_header(blob)
    if not frame.shrinkable or head.bands not in _SPACES:  # what TurboJPEG decodes strictly
        coding = f"SOF{frame.frame - 0xC0}" if frame.frame else "no frame"
        return None, [UNREADABLE.format(f"a {coding} frame of {head.bands} bands, "
                                        f"{frame.precision}-bit: not one decoded strictly")]
    kinds = {gtype: kind for kind, gtype in _KINDS.items()}
    fields = tuple(
        (name, kinds[header.get_typeof(name)], header.get(name))
        for name in header.get_fields()
        if name.startswith("gainmap-") and name != "gainmap-data"
        and header.get_typeof(name) in kinds)
    gain = GainMap(blob, head.width, head.height, head.bands, fields)
    problem = metadata_problem(dict((name, value) for name, _, value in fields)) or _tried(gain)
    if problem is not None:
        return None, [UNWRITABLE.format(problem)]
    return gain, []


# Below 2^31: libultrahdr writes each value as a 32-bit fraction (p/q), and refuses one it
# cannot write so (gamma 2^32 from an ISO gamma of "-1" read unsigned, offsets of 2^31).
_FRACTION = 2.0 ** 31


def metadata_problem(fields: dict[str, Any]) -> str | None:
    """Why libultrahdr's encoder would refuse the gainmap-* fields libvips read (its checks in
    uhdr_validate_gainmap_metadata_descriptor, and the ISO fractions), or None."""
    def values(name: str) -> list[float]:
        value = fields.get(f"gainmap-{name}")
        return [] if value is None else [float(v) for v in (
            value if isinstance(value, list | tuple) else [value])]

    every = [v for name in ("max-content-boost", "min-content-boost", "gamma", "offset-sdr",
                            "offset-hdr", "hdr-capacity-min", "hdr-capacity-max")
             for v in values(name)]
    if not all(math.isfinite(v) for v in every):
        return "an infinite or undefined value"
    if any(g <= 0 for g in values("gamma")):
        return "a gamma of 0 or below"
    if any(hi < lo for hi, lo in zip(values("max-content-boost"),
                                     values("min-content-boost"), strict=False)):
        return "a maximum content boost below its minimum"
    if any(b <= 0 for b in values("max-content-boost") + values("min-content-boost")):
        return "a content boost of 0 or below"
    if any(o < 0 for o in values("offset-sdr") + values("offset-hdr")):
        return "a negative offset"
    low, high = values("hdr-capacity-min"), values("hdr-capacity-max")
    if low and high and high[0] <= low[0]:
        return "an HDR capacity maximum not above its minimum"
    if any(c < 1 for c in low):
        return "an HDR capacity minimum below 1"
    if any(abs(v) >= _FRACTION for v in every if v):
        return "a value too large to be written as a fraction"
    if any(v == 0 for v in values("use-base-cg")):  # libvips writes no ICC into a gain map
        return "a gain map applied in the alternate colour space"
    return None


def _tried(gain: GainMap) -> str | None:
    """The encoder's own answer for this metadata, on an 8x8 picture (milliseconds): what the
    checks above do not know of (ISO 21496-1 flags) must not refuse the photo later."""
    picture = pyvips.Image.black(8, 8, bands=3).copy(interpretation="srgb")
    tiny = pyvips.Image.black(2, 2, bands=gain.bands).copy(
        interpretation="b-w" if gain.bands == 1 else "srgb")
    try:
        for_variant(gain, tiny, picture, 8, 8).jpegsave_buffer(keep="gainmap")
    except pyvips.Error as error:
        lines = [line.removeprefix("uhdr: ") for line in (error.detail or "").splitlines()
                 if line.startswith("uhdr: ")]
        return lines[0][:200] if lines else "libultrahdr refused it"
    return None


# TurboJPEG's output for a gain map of so many components, and what libvips calls it.
_SPACES = {1: ("GRAY", "b-w"), 3: ("RGB", "srgb")}


def prepare(gain: GainMap, orientation: int) -> tuple[pyvips.Image | None, list[str]]:
    """The gain map decoded as strictly as the picture (TurboJPEG, every libjpeg warning an
    error: decode.py says why) and turned as the picture is, in memory; None, with a warning,
    when it cannot be decoded in full (the photo is then made SDR)."""
    space, interpretation = _SPACES[gain.bands]
    try:
        pixels: NDArray[numpy.uint8] = simplejpeg.decode_jpeg(gain.data, colorspace=space,
                                                              strict=True)
    except ValueError as error:  # libjpeg's complaint: an error, or a warning made one
        return None, [UNREADABLE.format(f"corrupt JPEG data: {str(error).strip()[:200]}")]
    rows, columns, bands = pixels.shape
    if (columns, rows) != (gain.width, gain.height):
        return None, [UNREADABLE.format(f"decoded {columns}x{rows}, its header says "
                                        f"{gain.width}x{gain.height}")]
    image = pyvips.Image.new_from_memory(pixels.data, columns, rows, bands, "uchar")
    return upright(image.copy(interpretation=interpretation), orientation).copy_memory(), []


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
