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

import re
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


# --- 2: a quiet run reads what changed (issue 41) ---------------------------------------------

TALLY_PAGE = 4096  # the page ``held.pages`` counts in (rank.PAGE: a tmpfs's, most disks')
_REQUESTS = """
    total = total + iif(new.refs > 0, new.score, 0) - iif(old.refs > 0, old.score, 0),
    in_ram = in_ram + iif(new.refs > 0 AND new.ram IS 'placed', new.score, 0)
                    - iif(old.refs > 0 AND old.ram IS 'placed', old.score, 0),
    scored = scored + iif(new.refs > 0 AND new.score > 0, 1, 0)
                    - iif(old.refs > 0 AND old.score > 0, 1, 0),
    above = above + iif(new.refs > 0 AND new.score > 0 AND new.score > threshold, 1, 0)
                  - iif(old.refs > 0 AND old.score > 0 AND old.score > threshold, 1, 0)"""


def _only(side: str, text: str) -> str:
    """A tally's update for an insert (no ``old`` row) or a delete (no ``new`` one): the
    missing side's terms are those of a row that is nowhere (NULL in every column: each
    term is then 0)."""
    gone = "old" if side == "new" else "new"
    return re.sub(rf"\b{gone}\.\w+", "NULL", text)


def tallies(db: sqlite3.Connection) -> None:
    """The tallies counted again from every row (a migration, a rescale of every score, or
    rows made directly, as benchmarks make them)."""
    db.execute("DELETE FROM held")
    for t in ("ram", "nvme"):
        db.execute(
            "INSERT INTO held SELECT ?, count(*), total(bytes), total(max(bytes, 1)), "
            f"total((max(bytes, 1) + {TALLY_PAGE - 1}) / {TALLY_PAGE}) FROM variants "
            f"WHERE {t} IS NOT NULL", (t,))
    db.execute("DELETE FROM requests")
    db.execute("INSERT INTO requests SELECT 1, total(score), "
               "total(CASE WHEN ram = 'placed' THEN score END), "
               "count(CASE WHEN score > 0 THEN 1 END), NULL, 0 FROM variants WHERE refs > 0")


def _to_2(db: sqlite3.Connection) -> None:
    """What a tier holds and the requests' totals kept as they change (triggers), so a run
    reads them, not every row; indexes that cover what a quiet run asks (unsettled copies
    in either tier, what NVMe lacks); ``kept_wide_nvme`` dropped (NVMe takes every width: a
    tenth of the index's bytes, never read); a source's key kept once, in ``sources``, and
    named by its id in ``refs`` (it was in two rows a variant)."""
    db.execute("CREATE TABLE sources (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE)")
    db.execute("INSERT INTO sources (key) SELECT DISTINCT key FROM refs ORDER BY key")
    db.execute("CREATE TABLE refs_by_source (source INTEGER NOT NULL, path TEXT NOT NULL, "
               "PRIMARY KEY (source, path)) WITHOUT ROWID")
    db.execute("INSERT INTO refs_by_source SELECT s.id, r.path FROM refs r "
               "JOIN sources s ON s.key = r.key ORDER BY s.id, r.path")
    db.execute("DROP TABLE refs")  # (and its refs_by_path)
    db.execute("ALTER TABLE refs_by_source RENAME TO refs")
    db.execute("CREATE INDEX refs_by_path ON refs (path)")
    db.execute("DROP INDEX IF EXISTS kept_wide_nvme")
    for name in ("unsettled_nvme", "need_nvme"):
        db.execute(f"DROP INDEX IF EXISTS {name}")
    for t in ("ram", "nvme"):
        db.execute(f"CREATE INDEX unsettled_{t} ON variants (path, bytes, {t}) "
                   f"WHERE {t} IN ('placing', 'evicting')")
    db.execute("CREATE INDEX need_nvme ON variants (path, bytes) WHERE refs > 0 AND nvme IS NULL")
    # what each tier holds: kept by Index.mark and forget_tier, the only writers of a tier's
    # state (a trigger a row would cost a first fill half its time again)
    db.execute("CREATE TABLE held (tier TEXT PRIMARY KEY, files INTEGER NOT NULL, "
               "bytes INTEGER NOT NULL, units INTEGER NOT NULL, pages INTEGER NOT NULL) "
               "WITHOUT ROWID")
    # the requests: their total, what RAM answers, how many variants have a score, and how
    # many of those score above ``threshold`` (the prior's percentile as last found: the
    # next is found from it, walking as far as it moved: Scores.score_percentile)
    db.execute("CREATE TABLE requests (one INTEGER PRIMARY KEY CHECK (one = 1), "
               "total REAL NOT NULL, in_ram REAL NOT NULL, scored INTEGER NOT NULL, "
               "threshold REAL, above INTEGER NOT NULL)")
    tallies(db)
    # (only a row with a score counts: a new variant's, a placement's, a reference's change
    # fires nothing while it has none)
    db.execute("CREATE TRIGGER requests_insert AFTER INSERT ON variants "
               "WHEN new.refs > 0 AND new.score != 0 "
               f"BEGIN UPDATE requests SET {_only('new', _REQUESTS)}; END")
    db.execute("CREATE TRIGGER requests_delete AFTER DELETE ON variants "
               "WHEN old.refs > 0 AND old.score != 0 "
               f"BEGIN UPDATE requests SET {_only('old', _REQUESTS)}; END")
    db.execute("CREATE TRIGGER requests_update AFTER UPDATE OF score, refs, ram ON variants "
               "WHEN (old.score != 0 OR new.score != 0) AND (old.score IS NOT new.score "
               "OR (old.refs > 0) IS NOT (new.refs > 0) "
               "OR (old.ram IS 'placed') IS NOT (new.ram IS 'placed')) "
               f"BEGIN UPDATE requests SET {_REQUESTS}; END")


Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: tuple[Migration, ...] = (_to_1, _to_2)  # MIGRATIONS[n - 1] makes version n
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
