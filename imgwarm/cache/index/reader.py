"""The index read from another process (a forked log parser), through that process's own
read-only connection."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from imgwarm.cache.index.rows import chunks


def known_in(index: str | Path, paths: list[str]) -> set[str]:
    """Of ``paths``, those the index file holds a row for (committed), read through this
    process's own read-only connection: for a forked log parser, where the run's ``Index``
    is not to be used."""
    found: set[str] = set()
    db = _reader(str(index))
    for part, marks in chunks(paths):
        found.update(row[0] for row in db.execute(
            f"SELECT path FROM variants WHERE path IN ({marks})", part))
    return found


_readers: dict[tuple[int, str], sqlite3.Connection] = {}


def _reader(index: str) -> sqlite3.Connection:
    """A read-only connection of this process (one made before a fork is not the child's)."""
    mine = (os.getpid(), index)
    if mine not in _readers:
        uri = Path(index).resolve().as_uri() + "?mode=ro"
        _readers[mine] = sqlite3.connect(uri, uri=True)
    return _readers[mine]
