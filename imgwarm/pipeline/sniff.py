"""Sniff: what a file really is, from its first bytes (never from its name).

Only the source formats (formats.SOURCE_TYPES, as ``source_formats`` allows) are ever handed
to a decoder, each to its own loader; their signatures and names come from that registry.
For the rest it is enough to name them in the refusal, so no other libvips loader (SVG, PDF,
ImageMagick...) sees untrusted bytes.
"""

from __future__ import annotations

from pathlib import PurePath

from imgwarm.formats import SOURCE_TYPES, SourceFormat

# What a source format is called in messages (and sniffed as), from the registry; a HEIF file
# of no known coding is a HEIF too
NAMES: dict[SourceFormat, str] = {kind.name: kind.title for kind in SOURCE_TYPES.values()}
SOURCE_OF: dict[str, SourceFormat] = {name: fmt for fmt, name in NAMES.items()} | {
    "HEIF": "heif"}

# (offset, signature, format name), checked in order: the sources' (JPEG's SOI as libjpeg
# reads it: stray bytes may follow it), then formats only named in a refusal
_SIGNATURES: list[tuple[int, bytes, str]] = [
    (offset, signature, kind.title) for kind in SOURCE_TYPES.values() if not kind.brands
    for offset, signature in kind.signatures] + [
    (0, b"BM", "BMP"),
    (0, b"\x00\x00\x00\x0cJXL ", "JPEG XL"),
    (0, b"\xff\x0a", "JPEG XL"),
    (0, b"\x00\x00\x00\x0cjP  ", "JPEG 2000"),
    (0, b"%PDF", "PDF"),
    (0, b"\x00\x00\x01\x00", "ICO"),
    (0, b"8BPS", "Photoshop PSD"),
]
_TEXT_HINTS = [(b"<svg", "SVG"), (b"<?xml", "XML/SVG"), (b"<html", "HTML"), (b"<!doctype", "HTML")]

# What a file name's suffix says: each source type's (a PNG named like one is mislabelled),
# then formats only named in a refusal.
SUFFIX_FORMATS = {suffix: kind.title for kind in SOURCE_TYPES.values()
                  for suffix in kind.suffixes} | {
    ".heif": "HEIF", ".bmp": "BMP", ".jxl": "JPEG XL", ".svg": "SVG", ".svgz": "SVG",
    ".pdf": "PDF", ".ico": "ICO", ".psd": "Photoshop PSD", ".jp2": "JPEG 2000",
    ".j2k": "JPEG 2000", ".jpx": "JPEG 2000", ".jxr": "JPEG XR", ".tga": "TGA", ".qoi": "QOI",
}


# ISOBMFF brands (the ftyp box: major, then compatible ones): each source type's (AVIF's
# first: an AVIF file lists HEIF's generic brands too), then a HEIF of no known coding.
_HEIF_BRANDS = {b"mif1", b"mif2", b"mif3", b"msf1"}


def _heif(data: bytes) -> str | None:
    """AVIF, HEIC or HEIF from the ftyp box's brands; None when it is no HEIF file."""
    if data[4:8] != b"ftyp":
        return None
    size = int.from_bytes(data[:4], "big")
    box = data[8:min(max(size, 16), 4096, len(data))]
    brands = {box[i:i + 4] for i in range(0, len(box) - 3, 4)} - {box[4:8]}  # (minor version)
    for kind in SOURCE_TYPES.values():
        if brands & kind.brands:
            return kind.title
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
