"""Storage: atomic writes, nothing partial, nothing outside the root."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.exceptions import StorageError
from imgwarm.store.local import TEMP_PREFIX, LocalStore


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
