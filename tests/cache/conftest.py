"""Cache fixtures: a site of six real sources in front of a real tmpfs RAM tier."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.config import Settings
from tests.support.sites import Site, make_site
from tests.support.tmpfs import mounted_tmpfs

# Site and mounted_tmpfs are also imported from here by tests/lifecycle/test_faults.py, until
# it imports tests.support.sites and tests.support.tmpfs itself.
__all__ = ["Site", "mounted_tmpfs", "site"]


@pytest.fixture
def site(settings: Settings, tmp_path: Path, ram: Path) -> Site:
    return make_site(settings, tmp_path, ram)
