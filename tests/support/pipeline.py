"""Running the pipeline on test bytes."""

from __future__ import annotations

from pathlib import Path

import pyvips

from imgwarm.config import Settings
from imgwarm.manifest import Credits, Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import Stores


def run(data: bytes, name: str, settings: Settings, credits: Credits | None = None) -> Manifest:
    path = Path.cwd() / "sources" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return optimize_file(path, settings=settings, stores=Stores.local(settings.store),
                         credits=credits).manifest


def decoded(settings: Settings, manifest: Manifest, fmt: str = "webp") -> pyvips.Image:
    """The widest variant of ``fmt``, decoded."""
    variant = max((v for v in manifest.variants if v.format == fmt), key=lambda v: v.width)
    return pyvips.Image.new_from_file(str(settings.store.origin_root / variant.path))
