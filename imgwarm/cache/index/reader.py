"""The index file read by a log parser, in whatever process it runs: the variants a committed
index holds, through a read-only connection of that process's own (WAL: it never waits for
the run's writes, and sees what was committed when it asks)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from imgwarm.cache.index.rows import chunks


class IndexReader:
    """A read-only connection to an index file, opened by the process that uses it (a
    connection made before a fork is not the child's to use)."""

    def __init__(self, index: str | Path) -> None:
        uri = Path(index).resolve().as_uri() + "?mode=ro"
        self.db = sqlite3.connect(uri, uri=True)

    def known(self, paths: list[str]) -> set[str]:
        """Of ``paths``, those the index file holds a variant row for (committed)."""
        found: set[str] = set()
        for part, marks in chunks(paths):
            found.update(row[0] for row in self.db.execute(
                f"SELECT path FROM variants WHERE path IN ({marks})", part))
        return found

    def close(self) -> None:
        self.db.close()
