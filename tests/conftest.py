"""Shared fixtures: isolated settings, the real corpus, the CLI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

from imgwarm.cli.main import cli
from imgwarm.config import Settings, load_settings
from imgwarm.store import Stores

if TYPE_CHECKING:
    from tests.servers import RedisServer, S3Server
    from tests.support.corpus import Run

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in list(os.environ):
        if name.startswith("IMGWARM_") and name != "IMGWARM_CORPUS":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return load_settings(origin_root=tmp_path / "origin", manifest_root=tmp_path / "manifest")


@pytest.fixture
def stores(settings: Settings) -> Stores:
    return Stores.local(settings.store)


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
    import shutil

    from tests.servers import RedisServer

    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing on CI (./test.sh installs it as root)")
        pytest.skip("redis-server is not installed (./test.sh installs it as root)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server over HTTP on a free loopback port; boto3 clients made in the tests
    find its credentials in the environment."""
    from tests.servers import AWS, S3Server

    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS.items():
            patch.setenv(name, value)
        server = S3Server()
        yield server
        server.stop()


def all_files(root: Path) -> list[Path]:
    """Every file under root (none when root does not exist)."""
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


class Cli:
    """Runs ``imgwarm`` in-process with click's runner (stdout and stderr kept apart)."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str | Path, env: dict[str, str] | None = None) -> Result:
        return self.runner.invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)


@pytest.fixture
def run_cli(settings: Settings) -> Cli:
    return Cli()
