"""The index itself: its connection (SQLite in WAL mode, one transaction open at a time),
migrated to this code's schema when opened, and made of its parts: sources (sources.py),
scores (scores.py), the planner (planner.py) and tier states (states.py)."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

from imgwarm.cache.index.planner import Planner
from imgwarm.cache.index.schema import migrate
from imgwarm.cache.index.scores import Scores
from imgwarm.cache.index.sources import Sources


class Index(Planner, Sources, Scores):
    """What ``warm`` knows between runs, in the SQLite file at ``path``."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute("PRAGMA cache_size = -65536")  # 64 MiB: large updates stay in memory
        try:
            self.migrated_from = migrate(self.db, path)  # (schema.py: FormatTooNew if newer)
        except BaseException:
            self.db.close()
            raise
        try:
            self.db.execute("SELECT power(2, 1), log2(2)")
        except sqlite3.OperationalError:  # an SQLite built without its math functions
            self.db.create_function("power", 2, math.pow, deterministic=True)
            self.db.create_function("log2", 1, math.log2, deterministic=True)
        self.weights: dict[tuple[str, int], float] = {}  # the site's shares (rerank)
        self.db.execute("BEGIN")

    # --- transactions: one open at a time; commit() settles and opens the next -----------------

    def commit(self) -> None:
        self.db.execute("COMMIT")
        self.db.execute("BEGIN")

    def close(self, *, keep: bool) -> None:
        self.db.execute("COMMIT" if keep else "ROLLBACK")
        self.db.close()

