"""How results are shown: one human line, or one JSON object, per source."""

from __future__ import annotations

import json
from typing import Any

from imgwarm.pipeline.batch import SourceResult
from imgwarm.pipeline.manifest import Manifest


def result_object(result: SourceResult) -> dict[str, Any]:
    """The ``--json`` object of a source (the shape is a public contract)."""
    return result.to_object()


def json_line(result: SourceResult) -> str:
    return json.dumps(result_object(result), ensure_ascii=False)


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
    if result.manifest is None:
        return f"FAILED {result.error}"
    state = "unchanged" if result.reused else "done"
    return f"{state:9} {result.source}  {summarize(result.manifest)}"
