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
SUFFIX_FORMATS = {suffix: fmt.upper() for suffix, fmt in SOURCE_SUFFIXES.items()} | {
    ".webp": "WebP", ".gif": "GIF", ".tif": "TIFF", ".tiff": "TIFF", ".bmp": "BMP",
    ".avif": "AVIF", ".heic": "HEIC", ".heif": "HEIF", ".jxl": "JPEG XL", ".svg": "SVG",
    ".svgz": "SVG", ".pdf": "PDF", ".ico": "ICO", ".psd": "Photoshop PSD", ".jp2": "JPEG 2000",
    ".j2k": "JPEG 2000", ".jpx": "JPEG 2000", ".jxr": "JPEG XR", ".tga": "TGA", ".qoi": "QOI",
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


# The boxes down to a track's sample sizes (ISO 14496-12): moov/trak/mdia/minf/stbl/stsz.
_TRACK_PATH = (b"moov", b"trak", b"mdia", b"minf", b"stbl", b"stsz")


def _boxes(data: bytes, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """The (type, content start, end) of each box between ``start`` and ``end``: the first
    256 (a HEIF file has a handful at each level; a hostile one may declare millions)."""
    found: list[tuple[bytes, int, int]] = []
    while start + 8 <= end and len(found) < 256:
        size, head = int.from_bytes(data[start:start + 4], "big"), 8
        kind = data[start + 4:start + 8]
        if size == 1 and start + 16 <= end:  # a 64-bit size follows the type
            size, head = int.from_bytes(data[start + 8:start + 16], "big"), 16
        elif size == 0:  # to the end
            size = end - start
        if size < head or start + size > end:
            break
        found.append((kind, start + head, start + size))
        start += size
    return found


def heif_frames(data: bytes) -> int:
    """How many frames a HEIF file's image sequence holds (an animated AVIF, brand 'avis':
    libvips reads only its still image), from each track's sample count; 1 without one."""
    frames, level = 1, [(b"", 0, len(data))]
    for depth, wanted in enumerate(_TRACK_PATH):
        level = [box for _, start, end in level for box in _boxes(data, start, end)
                 if box[0] == wanted][:16]  # (a track or a few: colour, alpha, depth)
        if depth == len(_TRACK_PATH) - 1:
            for _, start, end in level:  # version and flags, sample size, then the count
                if start + 12 <= end:
                    frames = max(frames, int.from_bytes(data[start + 8:start + 12], "big"))
    return frames


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


def suffix_format(name: str) -> str | None:
    """The format a file name names by its suffix, if any (checked against the bytes, never
    trusted alone: probe.py)."""
    return SUFFIX_FORMATS.get(PurePath(name).suffix.lower())
