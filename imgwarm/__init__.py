"""imgwarm: photos in, compact web variants out, named by content hash, laid out for nginx.

Web apps call :func:`optimize` on upload::

    import imgwarm
    manifest = imgwarm.optimize("upload.jpg", description="Red bicycle", widths=[320, 640])
    for variant in manifest.variants:
        print(variant.format, variant.width, variant.path)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import ImgwarmError, SourceError
from imgwarm.pipeline.manifest import Manifest, Variant
from imgwarm.pipeline.metadata import Credits
from imgwarm.pipeline.optimize import Stores, optimize_file

__all__ = [
    "Credits", "ImgwarmError", "Manifest", "Settings", "SourceError", "Variant",
    "load_settings", "optimize",
]
__version__ = "0.1.0"


def optimize(
    path: str | Path,
    *,
    settings: Settings | None = None,
    key: str | None = None,
    description: str | None = None,
    copyright: str | None = None,
    artist: str | None = None,
    **options: Any,
) -> Manifest:
    """Make the variants of one image file and return its manifest.

    ``options`` are settings by name (``widths=[320, 640]``, ``webp_quality=75``...), applied
    over ``settings`` (default: loaded from imgwarm.toml and IMGWARM_* variables). ``key``
    names the source in the manifest store (default: its absolute path). Raises SourceError
    for a bad image (permanent) and other ImgwarmError subclasses for the rest.
    """
    if settings is None:
        settings = load_settings(**options)
    elif options:
        settings = load_settings(**{**settings.model_dump(), **options})
    credits = Credits.given(description=description, copyright=copyright, artist=artist)
    outcome = optimize_file(
        Path(path), settings=settings, stores=Stores.local(settings), credits=credits, key=key
    )
    return outcome.manifest
