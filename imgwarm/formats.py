"""Formats: one table of what imgwarm knows about the files it reads and writes.

Sources are one registry (``SOURCE_TYPES``): how each is recognised, what it can carry and
who reads it. Outputs are listed best first, the order a ``<picture>`` offers them in (a
browser takes the first ``<source>`` it supports). Plain data, no imports: settings, the
pipeline, the stores and the serving half all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Format = Literal["jxl", "avif", "webp", "jpeg"]
SourceFormat = Literal["jpeg", "png", "webp", "avif", "heif", "tiff", "gif"]


@dataclass(frozen=True)
class OutputFormat:
    name: Format
    extension: str  # of the file names, without the dot
    media_type: str  # Content-Type, and <source type="...">
    max_side: int  # the largest width or height the format holds
    alpha: bool  # can it keep transparency (else it is flattened on white)


OUTPUTS: dict[Format, OutputFormat] = {  # best first: the <picture> order
    "jxl": OutputFormat("jxl", "jxl", "image/jxl", (1 << 30) - 1, alpha=True),
    "avif": OutputFormat("avif", "avif", "image/avif", 65535, alpha=True),
    "webp": OutputFormat("webp", "webp", "image/webp", 16383, alpha=True),
    "jpeg": OutputFormat("jpeg", "jpg", "image/jpeg", 65535, alpha=False),
}
ORDER: tuple[Format, ...] = tuple(OUTPUTS)

@dataclass(frozen=True)
class SourceType:
    """What imgwarm knows of a source format, in one place (as imgproxy's imagetype/defs.go):
    how it is recognised, what it can carry, and who reads it. Its header reader is
    ``pipeline/probe.py``'s ``READERS[name]`` (the libvips header of ``loader`` when none).
    A new source format is one entry here and, where libvips' header is not enough, a
    reader there."""

    name: SourceFormat
    title: str  # in messages ("the content is a WebP image"), and what sniff answers
    suffixes: tuple[str, ...]  # of file names: a folder scan takes them; the first is usual
    signatures: tuple[tuple[int, bytes], ...]  # (offset, bytes) at the start of the file
    loader: str  # the libvips loader of its pixels (pyvips.Image.<loader>)
    family: str  # the container: a name of either format of a family says the same
    orientation: bool  # an EXIF Orientation the pipeline applies (else the decoder did)
    icc: bool  # an embedded ICC profile
    description: bool  # EXIF or a tag of its own with the photo's description
    animation: bool  # may hold several frames (refused: a still would stand for them)
    hdr: bool  # may carry more than SDR (a gain map, or more than 8 bits a sample)
    streamed: bool  # decoded a strip at a time (else whole into memory: probe's estimate)
    brands: frozenset[bytes] = frozenset()  # ISOBMFF (ftyp) brands that say it


_ISO = ((4, b"ftyp"),)  # an ISOBMFF file: its brands tell the format (sniff.py)
SOURCE_TYPES: dict[SourceFormat, SourceType] = {  # in the order a folder's sources are listed
    "jpeg": SourceType("jpeg", "JPEG", (".jpg", ".jpeg", ".jpe", ".jfif"),
                       ((0, b"\xff\xd8"),), "jpegload_buffer", "jpeg", orientation=True,
                       icc=True, description=True, animation=False, hdr=True, streamed=True),
    "png": SourceType("png", "PNG", (".png",), ((0, b"\x89PNG\r\n\x1a\n"),), "pngload_buffer",
                      "png", orientation=True, icc=True, description=True, animation=False,
                      hdr=True, streamed=True),
    "webp": SourceType("webp", "WebP", (".webp",), ((8, b"WEBP"),), "webpload_buffer", "webp",
                       orientation=True, icc=True, description=True, animation=True,
                       hdr=False, streamed=False),
    "avif": SourceType("avif", "AVIF", (".avif",), _ISO, "heifload_buffer", "heif",
                       orientation=False, icc=True, description=True, animation=True,
                       hdr=True, streamed=False, brands=frozenset({b"avif", b"avis"})),
    "heif": SourceType("heif", "HEIC", (".heic", ".heif"), _ISO, "heifload_buffer", "heif",
                       orientation=False, icc=True, description=True, animation=True,
                       hdr=True, streamed=False,
                       brands=frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis"})),
    "tiff": SourceType("tiff", "TIFF", (".tif", ".tiff"), ((0, b"II*\x00"), (0, b"MM\x00*")),
                       "tiffload_buffer", "tiff", orientation=True, icc=True, description=True,
                       animation=False, hdr=True, streamed=False),
    "gif": SourceType("gif", "GIF", (".gif",), ((0, b"GIF87a"), (0, b"GIF89a")),
                      "gifload_buffer", "gif", orientation=False, icc=False, description=False,
                      animation=True, hdr=False, streamed=False),
}
SOURCES: tuple[SourceFormat, ...] = tuple(SOURCE_TYPES)

# Source files: the suffixes a folder scan takes, and the format each name says.
SOURCE_SUFFIXES: dict[str, SourceFormat] = {
    suffix: kind.name for kind in SOURCE_TYPES.values() for suffix in kind.suffixes}

# Content-Type of every file imgwarm writes, by suffix.
MEDIA_TYPES: dict[str, str] = {f".{f.extension}": f.media_type for f in OUTPUTS.values()} | {
    ".json": "application/json",
}


def by_extension(extension: str) -> OutputFormat | None:
    """The output format of a file suffix (``webp``, ``.jpg``), if it is one of ours."""
    wanted = extension.lower().lstrip(".")
    return next((f for f in OUTPUTS.values() if f.extension == wanted), None)
