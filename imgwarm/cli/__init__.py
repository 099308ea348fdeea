"""The command line: parse, build Settings, call the pipeline, turn errors into exit codes."""

from __future__ import annotations

from imgwarm.cli.main import main

__all__ = ["main"]
