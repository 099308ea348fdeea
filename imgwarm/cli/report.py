"""How results are shown: one human line, or one JSON object, per source."""

from __future__ import annotations

from typing import Any

from imgwarm.pipeline.batch import SourceResult
from imgwarm.pipeline.manifest import Manifest, to_json
from imgwarm.pipeline.text import printable


def result_object(result: SourceResult) -> dict[str, Any]:
    """The ``--json`` object of a source (the shape is a public contract)."""
    return result.to_object()


def json_line(result: SourceResult) -> str:
    return to_json(result_object(result))


def _size(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"


def summarize(manifest: Manifest) -> str:
    """``4032x3024 -> webp 320..1920 (4), jpeg 320..1920 (4), 1.2 MiB``."""
    parts = []
    for fmt in dict.fromkeys(v.format for v in manifest.variants):
        widths = [v.width for v in manifest.variants if v.format == fmt]
        span = f"{widths[0]}" if len(widths) == 1 else f"{widths[0]}..{widths[-1]}"
        parts.append(f"{fmt} {span} ({len(widths)})")
    total = sum(v.bytes for v in manifest.variants)
    return f"{manifest.width}x{manifest.height} -> {', '.join(parts)}, {_size(total)}"


def human_line(result: SourceResult) -> str:
    """One terminal line, whatever the file name holds (newlines, escapes, odd bytes)."""
    if result.manifest is None:
        return printable(f"FAILED {result.error}")
    state = "unchanged" if result.reused else "done"
    warned = "".join(f"; warning: {w}" for w in result.manifest.warnings)
    return printable(f"{state:9} {result.source}  {summarize(result.manifest)}{warned}")
