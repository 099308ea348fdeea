"""Sniff: what a file really is, from its first bytes (never from its name).

Only JPEG and PNG are ever handed to a decoder; for the rest it is enough to name them in the
refusal, so no other libvips loader (SVG, TIFF, HEIF, ImageMagick...) sees untrusted bytes.
"""

from __future__ import annotations

from pathlib import PurePath

from imgwarm.formats import SOURCE_SUFFIXES

JPEG, PNG = "JPEG", "PNG"

# (offset, signature, format name), checked in order.
_SIGNATURES: list[tuple[int, bytes, str]] = [
    (0, b"\xff\xd8", JPEG),  # as libjpeg: stray bytes may follow the SOI marker
    (0, b"\x89PNG\r\n\x1a\n", PNG),
    (8, b"WEBP", "WebP"),
    (0, b"GIF87a", "GIF"),
    (0, b"GIF89a", "GIF"),
    (0, b"II*\x00", "TIFF"),
    (0, b"MM\x00*", "TIFF"),
    (0, b"BM", "BMP"),
    (4, b"ftypavif", "AVIF"),
    (4, b"ftypavis", "AVIF"),
    (4, b"ftypheic", "HEIC"),
    (4, b"ftypmif1", "HEIF"),
    (0, b"\x00\x00\x00\x0cJXL ", "JPEG XL"),
    (0, b"\xff\x0a", "JPEG XL"),
    (0, b"\x00\x00\x00\x0cjP  ", "JPEG 2000"),
    (0, b"%PDF", "PDF"),
    (0, b"\x00\x00\x01\x00", "ICO"),
    (0, b"8BPS", "Photoshop PSD"),
]
_TEXT_HINTS = [(b"<svg", "SVG"), (b"<?xml", "XML/SVG"), (b"<html", "HTML"), (b"<!doctype", "HTML")]

# Names that claim a format: a PNG named like this is mislabelled.
CLAIMING_SUFFIXES = {suffix: fmt.upper() for suffix, fmt in SOURCE_SUFFIXES.items()} | {
    ".webp": "WebP", ".gif": "GIF", ".tif": "TIFF", ".tiff": "TIFF", ".bmp": "BMP",
    ".avif": "AVIF", ".heic": "HEIC", ".heif": "HEIF", ".jxl": "JPEG XL",
}


def sniff(data: bytes) -> str | None:
    """The format the bytes say, e.g. "JPEG", "PNG", "WebP"; None when unknown."""
    for offset, signature, name in _SIGNATURES:
        if data[offset:offset + len(signature)] == signature:
            return name
    head = data[:256].lstrip().lower()
    for hint, name in _TEXT_HINTS:
        if head.startswith(hint):
            return name
    return None


def claimed(name: str) -> str | None:
    """The format a file name claims by its suffix, if any."""
    return CLAIMING_SUFFIXES.get(PurePath(name).suffix.lower())
