"""What every part of the index shares: its connection, and its meta values (the decay's
clock, the site's shares, each tier's cut), kept as JSON by name."""

from __future__ import annotations

import json
import sqlite3
from typing import Any


class Part:
    """A part of ``Index`` (core.py): ``db`` is the index's connection."""

    db: sqlite3.Connection

    def meta(self, name: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else default

    def remember(self, name: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, json.dumps(value)))
