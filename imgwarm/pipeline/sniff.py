"""Sniff: what a file really is, from its first bytes (never from its name).

Only the source formats (formats.SOURCES, as ``source_formats`` allows) are ever handed to a
decoder, each to its own loader; for the rest it is enough to name them in the refusal, so
no other libvips loader (SVG, PDF, ImageMagick...) sees untrusted bytes.
"""

from __future__ import annotations

from pathlib import PurePath

from imgwarm.formats import SOURCE_SUFFIXES, SourceFormat

JPEG, PNG = "JPEG", "PNG"
# What a source format is called in messages, and the sniffed names of each.
NAMES: dict[SourceFormat, str] = {"jpeg": JPEG, "png": PNG, "webp": "WebP", "avif": "AVIF",
                                  "heif": "HEIC", "tiff": "TIFF", "gif": "GIF"}
SOURCE_OF: dict[str, SourceFormat] = {name: fmt for fmt, name in NAMES.items()} | {
    "HEIF": "heif"}

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


# ISOBMFF brands (the ftyp box: major, then compatible ones) of the HEIF family.
_AVIF_BRANDS = {b"avif", b"avis"}
_HEVC_BRANDS = {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis"}
_HEIF_BRANDS = {b"mif1", b"mif2", b"mif3", b"msf1"}


def _heif(data: bytes) -> str | None:
    """AVIF, HEIC or HEIF from the ftyp box's brands; None when it is no HEIF file."""
    if data[4:8] != b"ftyp":
        return None
    size = int.from_bytes(data[:4], "big")
    box = data[8:min(max(size, 16), 4096, len(data))]
    brands = {box[i:i + 4] for i in range(0, len(box) - 3, 4)} - {box[4:8]}  # (minor version)
    if brands & _AVIF_BRANDS:
        return "AVIF"
    if brands & _HEVC_BRANDS:
        return "HEIC"
    return "HEIF" if brands & _HEIF_BRANDS else None


def sniff(data: bytes) -> str | None:
    """The format the bytes say, e.g. "JPEG", "PNG", "WebP"; None when unknown."""
    heif = _heif(data)
    if heif is not None:
        return heif
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
