"""Lifecycle fixtures: a site of a source and its twin on a local origin and on S3 over real
HTTP (moto's server, and SeaweedFS's); the helpers are in tests/support/lifecycle.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from imgwarm.config import Settings
from tests.support.lifecycle import site_on
from tests.support.s3 import s3_params
from tests.support.sites import Site
from tests.support.tmpfs import mounted_tmpfs


# On S3 (over HTTP) each case takes seconds: integration, and slow.
@pytest.fixture(params=["local", *s3_params(pytest.mark.slow)])
def site(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
         ram: Path) -> Site:
    return site_on(request.param, request, settings, tmp_path, ram)


@pytest.fixture
def on_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs for a scene's roots (tests/support/scenes.py): restored hundreds of times,
    folders and all, which on an overlay or a journaled disk costs milliseconds a folder."""
    with mounted_tmpfs(tmp_path / "scene", "256m") as root:
        yield root
