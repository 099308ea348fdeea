"""The real parts the tests start (nginx, redis-server, chromium, a tmpfs mount...): found,
or the test skips with the reason and the way to get it. On CI (CI set) a missing part is a
failure instead: ./test.sh as root installs every part, so CI runs everything."""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

HOW = "./test.sh installs it as root"


def missing(what: str) -> NoReturn:
    """Skip the test, saying which part is missing; on CI, fail it."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing on CI", pytrace=False)
    pytest.skip(f"{what} is missing")


def binary(name: str, package: str | None = None, *, how: str | None = None,
           fallback: str | None = None) -> str:
    """The path of a program the tests run (on PATH, else ``fallback``), or a skip naming it
    and how to get it (its Debian package, unless ``how`` says otherwise)."""
    found = shutil.which(name) or (fallback if fallback and os.access(fallback, os.X_OK) else None)
    if found is None:
        missing(f"{name} ({how or f'Debian package {package or name}; {HOW}'})")
    return found


def root(what: str) -> None:
    """Skip unless running as root, which ``what`` needs."""
    if os.geteuid() != 0:
        missing(f"root ({what} needs it)")
