"""The image settings as the pixel steps read them: the rules they ask (``ImageRules``, which
``ImageSettings`` shares) and a plain, read-only copy of the values (``ImageOptions``) for the
worker processes of pipeline/isolate.py. A worker then never loads pydantic: about 20 MB less
resident in each (docs/benchmarks.md, "Optimize")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from imgwarm.formats import Format, SourceFormat


class ImageRules:
    """What the image settings mean where it takes more than reading one value."""

    if TYPE_CHECKING:  # (the values these rules read: fields of ImageSettings)
        formats: list[Format]
        fallback_widths: list[int]
        webp_quality: int | Literal["auto"]
        jpeg_quality: int | Literal["auto"]
        avif_quality: int | Literal["auto"]
        jxl_quality: int | Literal["auto"]
        quality_check_width: int
        width_step_bytes: int
        source_formats: list[SourceFormat]
        accept_png: bool

    def auto_quality(self) -> bool:
        """Is any format's quality auto (the target then changes outputs)?"""
        return "auto" in (self.webp_quality, self.jpeg_quality, self.avif_quality,
                          self.jxl_quality)

    def thins_fallback(self) -> bool:
        """Is the JPEG a fallback made at fewer widths (fallback_widths then changes outputs)?"""
        return bool(self.fallback_widths) and len(self.formats) > 1

    def makes_jxl(self) -> bool:
        """Is JPEG XL among the formats (its settings then change outputs)?"""
        return "jxl" in self.formats

    def predicts_quality(self) -> bool:
        """Are some auto qualities predicted (quality_check_width then changes outputs)?"""
        return self.auto_quality() and self.quality_check_width > 0

    def byte_ladder(self) -> bool:
        """Are widths chosen by bytes (width_step_bytes and max_widths then change outputs)?"""
        return self.width_step_bytes > 0

    def quality(self, fmt: Format) -> int | Literal["auto"]:
        found: int | Literal["auto"] = getattr(self, f"{fmt}_quality")
        return found

    def accepts(self, source: SourceFormat) -> bool:
        """Is a source of this format taken (accept_png=false still refuses PNG)?"""
        return source in self.source_formats and (source != "png" or self.accept_png)


class ImageOptions(ImageRules):
    """The values of an ``ImageSettings`` as plain Python (numbers, strings, lists), read-only,
    with the same names and rules: it stands in for the settings where the pixel steps run in
    a worker process (tests/pipeline/test_options.py checks that they agree)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.__dict__.update({name: _plain(name, value) for name, value in values.items()})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"image options are read-only ({name})")

    def __getattr__(self, name: str) -> Any:  # (only for a name it lacks: say which)
        raise AttributeError(f"image options have no {name!r}")


def _plain(name: str, value: Any) -> Any:
    """A setting's value as a built-in type (a Size is an int, a Duration a float), so that
    unpickling it imports nothing of imgwarm.config."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_plain(name, item) for item in value]
    raise TypeError(f"{name}: a {type(value).__name__} is not a plain value (teach _plain it)")
