"""Cache fixtures: a site of six real sources in front of a real tmpfs RAM tier."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.config import Settings
from tests.support.sites import Site, make_site


@pytest.fixture
def site(settings: Settings, tmp_path: Path, ram: Path) -> Site:
    return make_site(settings, tmp_path, ram)
