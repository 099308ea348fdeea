"""Probe: what the bytes really are, and their header facts, before any pixel is decoded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pyvips

from imgwarm.config import Settings
from imgwarm.exceptions import CorruptImage, LimitExceeded, UnsupportedFormat
from imgwarm.pipeline.sniff import JPEG, PNG, claimed, sniff
from imgwarm.pipeline.vipsutil import vips_reason

SourceFormat = Literal["jpeg", "png"]


@dataclass(frozen=True)
class Probe:
    """Header facts of a source. Width and height are as stored, before orientation."""

    format: SourceFormat
    width: int
    height: int
    orientation: int  # 1..8; out-of-range values are read as 1
    icc: bytes | None

    @property
    def transposed(self) -> bool:
        return self.orientation >= 5

    @property
    def displayed_width(self) -> int:
        return self.height if self.transposed else self.width

    @property
    def displayed_height(self) -> int:
        return self.width if self.transposed else self.height


def _accepted(data: bytes, name: str, settings: Settings) -> SourceFormat:
    kind = sniff(data)
    if kind == JPEG:
        return "jpeg"
    if kind == PNG and settings.accept_png:
        said = claimed(name)
        if said in (None, PNG):
            return "png"
        raise UnsupportedFormat(
            name, f"the content is a PNG image but the name says {said}: refusing a mislabelled "
            "file (rename it .png to convert it as PNG)"
        )
    accepted = "JPEG or PNG" if settings.accept_png else "JPEG"
    if kind is None:
        raise UnsupportedFormat(
            name, f"not a recognised image format (starts with {data[:8].hex(' ')}); "
            f"imgwarm takes {accepted}"
        )
    raise UnsupportedFormat(name, f"the content is a {kind} image, not {accepted}")


def probe(data: bytes, name: str, settings: Settings) -> Probe:
    """Identify the format from the bytes and check the limits on the header alone.

    Raises SourceError subclasses. Under concurrency the text of a CorruptImage may be
    another image's (libvips has one error buffer): optimize.py asks again alone."""
    if not data:
        raise UnsupportedFormat(name, "empty file (0 bytes), not an image")
    if len(data) > settings.max_bytes:
        raise LimitExceeded(
            name, f"file is {len(data):,} bytes, over the limit of {settings.max_bytes:,} "
            "(max_bytes)"
        )
    source_format = _accepted(data, name, settings)
    load = pyvips.Image.jpegload_buffer if source_format == "jpeg" else pyvips.Image.pngload_buffer
    try:
        header = load(data, access="sequential")
    except pyvips.Error as error:
        reason = vips_reason(error, explain=False)
        raise CorruptImage(name, f"corrupt {source_format.upper()} header: {reason}") from None
    width, height = header.width, header.height
    if width * height > settings.max_pixels:
        raise LimitExceeded(
            name, f"{width}x{height} is {width * height / 1e6:,.1f} megapixels, over the limit "
            f"of {settings.max_pixels / 1e6:g} megapixels (max_pixels); refused before decoding"
        )
    orientation = header.get("orientation") if header.get_typeof("orientation") else 1
    icc = header.get("icc-profile-data") if header.get_typeof("icc-profile-data") else None
    return Probe(
        format=source_format,
        width=width,
        height=height,
        orientation=orientation if 1 <= orientation <= 8 else 1,
        icc=bytes(icc) if icc else None,
    )
