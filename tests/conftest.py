"""Shared fixtures: isolated settings, the real corpus, the CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from imgwarm.cli.main import cli
from imgwarm.config import Settings, load_settings
from imgwarm.pipeline.origin import Stores

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
    return Stores.local(settings)


def corpus_dir() -> Path | None:
    folder = Path(os.environ.get("IMGWARM_CORPUS", REPO.parent / "shared" / "corpus"))
    return folder if folder.is_dir() else None


@pytest.fixture(scope="session")
def corpus() -> Path:
    folder = corpus_dir()
    if folder is None:
        if os.environ.get("CI"):
            pytest.fail("the shared corpus is missing on CI (set IMGWARM_CORPUS)")
        pytest.skip("no shared corpus here (../shared/corpus or IMGWARM_CORPUS)")
    return folder


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
