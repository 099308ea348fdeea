"""The command line in-process, as the tests drive it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from imgwarm.cli.main import cli


class Cli:
    """Runs ``imgwarm`` in-process with click's runner (stdout and stderr kept apart)."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str | Path, env: dict[str, str] | None = None) -> Result:
        return self.runner.invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)
