"""Versions fixtures: a site of real sources in front of a real tmpfs RAM tier (as the cache
tests have it), for warm to be refused on."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.config import Settings
from tests.support.sites import Site, make_site


@pytest.fixture
def site(settings: Settings, tmp_path: Path, ram: Path) -> Site:
    return make_site(settings, tmp_path, ram, count=2)
