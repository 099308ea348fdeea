"""The index's schema: its version (SQLite's ``PRAGMA user_version``) and the numbered
migrations that bring an older index to it, in place, in one transaction.

``INDEX_SCHEMA`` is the version this code writes. Migration N takes an index at version N-1
to N; an index is migrated from its own version on. Version 0 is an index made before
versions (imgwarm 0.2.0 and older: ``user_version`` 0, with or without its tables), so
migration 1 is what the in-place patches of those versions did, written down once: the
tables and indexes as 0.2.0 made them, the columns an older index lacks (``dropped``, from
gc; ``born``, from the age-corrected estimate) added, and the indexes renamed since dropped.
An index at a version above ``INDEX_SCHEMA`` was made by a newer imgwarm: ``FormatTooNew``,
with one line naming both, and nothing changed. A new migration is a new function at the end
of ``MIGRATIONS`` (and the CHANGELOG says what it changed); a migration never edits another.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from imgwarm.exceptions import FormatTooNew

_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS variants (
    path TEXT PRIMARY KEY, format TEXT NOT NULL, width INTEGER NOT NULL,
    bytes INTEGER NOT NULL, refs INTEGER NOT NULL DEFAULT 0,
    score REAL NOT NULL DEFAULT 0, prior REAL NOT NULL DEFAULT 0,
    density REAL NOT NULL DEFAULT 0, pinned INTEGER NOT NULL DEFAULT 0,
    ram TEXT, nvme TEXT, dropped REAL, born REAL
) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS refs (key TEXT NOT NULL, path TEXT NOT NULL,
    PRIMARY KEY (key, path)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS written (tier TEXT NOT NULL, path TEXT NOT NULL,
    dev INTEGER NOT NULL, ino INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL, PRIMARY KEY (tier, path)) WITHOUT ROWID""",
)
# columns an index from before 0.2.0 may lack (what ALTER TABLE patched in place)
_ADDED = (("dropped", "REAL"),  # an index made before gc
          ("born", "REAL"))  # before the age-corrected estimate: its variants count as old
# indexes of older versions, since renamed or given other columns
_DROPPED = ("by_rank", "in_ram", "on_nvme", "held_ram", "held_nvme")
_INDEXES = (
    "refs_by_path ON refs (path)",
    "ranking ON variants (pinned DESC, density DESC, path, bytes, width, refs, ram, nvme) "
    "WHERE refs > 0",
    "by_score ON variants (score) WHERE score > 0 AND refs > 0",
    "need_nvme ON variants (path) WHERE refs > 0 AND nvme IS NULL",
    *(f"kept_{t} ON variants (pinned DESC, density DESC, path, bytes, {t}) "
      f"WHERE {t} IS NOT NULL" for t in ("ram", "nvme")),
    *(f"kept_gone_{t} ON variants (path, bytes, refs, {t}) WHERE {t} IS NOT NULL AND refs = 0"
      for t in ("ram", "nvme")),
    *(f"kept_wide_{t} ON variants (width, pinned, path, bytes, {t}) WHERE {t} IS NOT NULL"
      for t in ("ram", "nvme")),
    "unsettled_nvme ON variants (path) WHERE nvme IN ('placing', 'evicting')",
    "gone ON variants (path) WHERE refs = 0",
    "pinned ON variants (path) WHERE pinned = 1",
    "young ON variants (born) WHERE refs > 0 AND born IS NOT NULL",
)


def _to_1(db: sqlite3.Connection) -> None:
    """0.2.0's index, from nothing or from any index made before versions."""
    for table in _TABLES:
        db.execute(table)
    columns = {row[1] for row in db.execute("PRAGMA table_info(variants)")}
    for column, kind in _ADDED:
        if column not in columns:
            db.execute(f"ALTER TABLE variants ADD COLUMN {column} {kind}")
    for name in _DROPPED:
        db.execute(f"DROP INDEX IF EXISTS {name}")
    for index in _INDEXES:
        db.execute(f"CREATE INDEX IF NOT EXISTS {index}")


Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: tuple[Migration, ...] = (_to_1,)  # MIGRATIONS[n - 1] makes version n
INDEX_SCHEMA: int = len(MIGRATIONS)  # the version this code writes


def version_of(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def too_new(path: Path, found: int) -> FormatTooNew:
    from imgwarm.store.format import imgwarm_version

    return FormatTooNew(f"index {path} is schema {found}; imgwarm {imgwarm_version()} knows "
                        f"schemas up to {INDEX_SCHEMA}: upgrade imgwarm first")


def migrate(db: sqlite3.Connection, path: Path) -> int:
    """Bring the index open on ``db`` (autocommit: isolation_level None) to INDEX_SCHEMA, in
    one transaction that holds the write lock (two processes opening one old index: the
    second finds it migrated); the version it was at. FormatTooNew when it is newer."""
    found = version_of(db)  # (no lock needed to refuse: nothing is written)
    if found > INDEX_SCHEMA:
        raise too_new(path, found)
    if found == INDEX_SCHEMA:
        return found
    db.execute("BEGIN IMMEDIATE")
    try:
        found = version_of(db)  # again, under the lock
        if found > INDEX_SCHEMA:
            raise too_new(path, found)
        for number in range(found + 1, INDEX_SCHEMA + 1):
            MIGRATIONS[number - 1](db)
        db.execute(f"PRAGMA user_version = {INDEX_SCHEMA}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return found
