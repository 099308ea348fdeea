"""A real tmpfs mount for the RAM tier (root), with the reason given when it cannot be had."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.parts import missing


@contextlib.contextmanager
def mounted_tmpfs(where: Path, size: str, inodes: int | None = None) -> Iterator[Path]:
    """A real tmpfs of ``size`` at ``where``; skips the test (fails it on CI) when the mount
    cannot be made, which needs root."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True, check=False).returncode == 0
    if not mounted:
        missing("a tmpfs mount (mount -t tmpfs needs root; ./test.sh as root has it)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
