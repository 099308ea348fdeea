"""Formats: one table of what imgwarm knows about the files it reads and writes.

Outputs are listed best first, the order a ``<picture>`` offers them in (a browser takes the
first ``<source>`` it supports). Plain data, no imports: settings, the pipeline, the stores and
the serving half all read it.
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

SOURCES: tuple[SourceFormat, ...] = ("jpeg", "png", "webp", "avif", "heif", "tiff", "gif")

# Source files: the suffixes a folder scan takes, and the format each name claims.
SOURCE_SUFFIXES: dict[str, SourceFormat] = {
    ".jpg": "jpeg", ".jpeg": "jpeg", ".jpe": "jpeg", ".jfif": "jpeg", ".png": "png",
    ".webp": "webp", ".avif": "avif", ".heic": "heif", ".heif": "heif", ".tif": "tiff",
    ".tiff": "tiff", ".gif": "gif",
}

# Content-Type of every file imgwarm writes, by suffix.
MEDIA_TYPES: dict[str, str] = {f".{f.extension}": f.media_type for f in OUTPUTS.values()} | {
    ".json": "application/json",
}


def by_extension(extension: str) -> OutputFormat | None:
    """The output format of a file suffix (``webp``, ``.jpg``), if it is one of ours."""
    wanted = extension.lower().lstrip(".")
    return next((f for f in OUTPUTS.values() if f.extension == wanted), None)
