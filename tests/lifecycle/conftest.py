"""Lifecycle fixtures: a site of a source and its twin on a local origin and on S3 (moto over
real HTTP); the helpers are in tests/support/lifecycle.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.config import Settings
from tests.support.lifecycle import site_on
from tests.support.sites import Site


# On S3 (moto's server over HTTP) each case takes seconds: integration, and slow.
@pytest.fixture(params=["local", pytest.param("s3", marks=[pytest.mark.integration,
                                                           pytest.mark.slow])])
def site(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
         ram: Path) -> Site:
    return site_on(request.param, request, settings, tmp_path, ram)
