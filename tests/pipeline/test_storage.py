"""Storage: atomic writes, nothing partial, nothing outside the root."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from imgwarm.exceptions import StorageError
from imgwarm.pipeline.storage import TEMP_PREFIX, LocalStore


def test_write_is_atomic_and_leaves_no_temp(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    assert store.write("a/b/c.webp", b"data") is True
    assert (tmp_path / "a/b/c.webp").read_bytes() == b"data"
    assert (tmp_path / "a/b/c.webp").stat().st_mode & 0o777 == 0o644
    assert store.write("a/b/c.webp", b"other") is False  # content-addressed: kept
    assert store.write("a/b/c.webp", b"new", replace=True) is True
    assert store.read("a/b/c.webp") == b"new"
    assert [p.name for p in tmp_path.rglob(f"{TEMP_PREFIX}*")] == []


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "taken").mkdir()  # a folder where the file should go: rename fails
    with pytest.raises(StorageError, match="cannot write"):
        store.write("x/taken", b"data", replace=True)
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["taken"]


def test_writer_killed_mid_write_leaves_nothing(tmp_path: Path) -> None:
    """A process SIGKILLed after writing the data but before naming the file: no entry."""
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from imgwarm.pipeline import storage\n"
        "storage.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)\n"
        "storage.LocalStore(Path(sys.argv[1])).write('a/b/c.webp', b'x' * 1_000_000)\n"
    )
    (tmp_path / "a" / "b").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=False)
    assert done.returncode == -signal.SIGKILL
    assert list((tmp_path / "a" / "b").iterdir()) == []
