"""Running the pipeline on test bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def refused(data: bytes, name: str, settings: Settings) -> str:
    """The one line a source is refused with (by ``run``); nothing of it written."""
    from imgwarm.exceptions import SourceError
    from tests.support.files import all_files

    with pytest.raises(SourceError) as error:
        run(data, name, settings)
    origin = settings.store.origin_root
    assert not origin.exists() or all_files(origin) == []
    said = str(error.value)
    assert "\n" not in said and said.startswith(str(Path.cwd() / "sources" / name))
    return said


def decoded(settings: Settings, manifest: Manifest, fmt: str = "webp") -> pyvips.Image:
    """The widest variant of ``fmt``, decoded."""
    variant = max((v for v in manifest.variants if v.format == fmt), key=lambda v: v.width)
    return pyvips.Image.new_from_file(str(settings.store.origin_root / variant.path))
