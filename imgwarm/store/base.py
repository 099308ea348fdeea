"""The Store interface: a place that keeps files by key, and what every implementation promises.

Keys are relative POSIX paths, checked by ``layout.safe_relative`` (no ``..``, no absolute
paths, no control characters). A write is atomic: a reader sees the whole file or nothing,
even when the writer is killed. ``tests/store/test_contract.py`` holds every Store to this.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Protocol

Key = str | PurePosixPath


class Store(Protocol):
    """What the pipeline, the manifest store and the tiers need of a place that keeps files."""

    def exists(self, key: Key) -> bool: ...

    def size(self, key: Key) -> int | None:
        """The bytes of the file at key; None when there is none."""
        ...

    def describe(self, key: Key) -> str:
        """Where ``key`` is, for messages (a path, an s3:// URL)."""
        ...

    def read(self, key: Key, *, limit: int | None = None) -> bytes | None:
        """The bytes at key, None when there are none; ObjectTooLarge over ``limit`` bytes,
        found before reading them."""
        ...

    def write(self, key: Key, data: bytes, *, replace: bool = False) -> bool:
        """Write atomically; True when written, False when a file was there and ``replace``
        is not asked (content-addressed files never need replacing)."""
        ...

    def delete(self, key: Key) -> None:
        """Remove the file; nothing when there is none."""
        ...

    def files(self, under: str = "") -> Iterator[PurePosixPath]:
        """Every file's key below the folder (or prefix) ``under``, in no set order; never a
        temporary file. A full listing: for a full reconciliation, not for every run."""
        ...

    def stamped(self, under: str = "") -> Iterator[tuple[PurePosixPath, float]]:
        """``files``, each with the time it was last written (Unix seconds): what ``gc``
        weighs against its grace period, from the listing itself where the store has it."""
        ...
