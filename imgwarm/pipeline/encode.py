"""Encode: an sRGB image to the bytes of one output format, with no metadata."""

from __future__ import annotations

import pyvips

from imgwarm.config import Format, Settings

EXTENSIONS: dict[Format, str] = {"avif": "avif", "webp": "webp", "jpeg": "jpg"}
MEDIA_TYPES: dict[Format, str] = {"avif": "image/avif", "webp": "image/webp", "jpeg": "image/jpeg"}


def encode(image: pyvips.Image, fmt: Format, settings: Settings, keep: str = "none") -> bytes:
    """Encoded bytes, with no metadata but what ``keep`` names (AVIF takes its EXIF here;
    JPEG and WebP get theirs from metadata.attach_exif)."""
    if fmt == "webp":
        data = image.webpsave_buffer(
            Q=settings.webp_quality, effort=settings.webp_effort, keep="none"
        )
    elif fmt == "jpeg":
        if image.hasalpha():
            image = image.flatten(background=[255, 255, 255])
        data = image.jpegsave_buffer(
            Q=settings.jpeg_quality, interlace=True, optimize_coding=True, keep="none"
        )
    else:
        data = image.heifsave_buffer(
            Q=settings.avif_quality, effort=settings.avif_effort, compression="av1", keep=keep
        )
    return bytes(data)
