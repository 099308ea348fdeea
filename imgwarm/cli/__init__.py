"""The command line: parse, build Settings, call the pipeline, turn errors into exit codes."""

from __future__ import annotations

import os

# pydantic looks for plugins in every installed package's metadata when the first model is
# built: ~0.1 s of a cold start, for plugins imgwarm does not use. A user who wants them
# sets the variable to something else.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from imgwarm.cli.main import main

__all__ = ["main"]
