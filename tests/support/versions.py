"""Formats and versions in the tests: a store marked with a format record, what a folder or a
bucket holds (to tell that a refused command changed nothing), and cache indexes as older
imgwarm versions made them (their DDL copied from the history, never rebuilt from today's)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from imgwarm.store.format import FORMAT_RECORD, STORE_FORMAT

NEWER = STORE_FORMAT + 1


def record_bytes(number: int, readable_by: int | None = None,
                 written_by: str = "imgwarm 9.0.0") -> bytes:
    """A format record as a newer imgwarm would write it."""
    found: dict[str, Any] = {"format": number, "written_by": written_by}
    if readable_by is not None:
        found["readable_by"] = readable_by
    return json.dumps(found).encode()


def mark_local(origin: Path, number: int, readable_by: int | None = None) -> None:
    origin.mkdir(parents=True, exist_ok=True)
    (origin / FORMAT_RECORD).write_bytes(record_bytes(number, readable_by))


def mark_s3(client: Any, bucket: str, prefix: str, number: int,
            readable_by: int | None = None) -> None:
    client.put_object(Bucket=bucket, Key=prefix + FORMAT_RECORD,
                      Body=record_bytes(number, readable_by))


def refusal(where: str, number: int = NEWER) -> str:
    """The one line a command gives on a store of format ``number`` it may not write."""
    from imgwarm.store.format import imgwarm_version

    return (f"{where} is store format {number}; imgwarm {imgwarm_version()} knows formats up "
            f"to {STORE_FORMAT}: upgrade imgwarm first")


def snapshot(*roots: Path) -> dict[str, tuple[str, int, str]]:
    """Every folder and file under ``roots``: path -> (kind, mtime_ns, SHA-256 of a file)."""
    found: dict[str, tuple[str, int, str]] = {}
    for root in roots:
        if not root.exists():
            continue
        for folder, dirs, files in os.walk(root):
            for name in dirs:
                path = Path(folder, name)
                found[str(path)] = ("dir", path.stat().st_mtime_ns, "")
            for name in files:
                path = Path(folder, name)
                found[str(path)] = ("file", path.stat().st_mtime_ns,
                                    hashlib.sha256(path.read_bytes()).hexdigest())
    return found


def bucket_snapshot(client: Any, bucket: str) -> dict[str, tuple[str, str]]:
    """Every object of a bucket: key -> (ETag, LastModified)."""
    found: dict[str, tuple[str, str]] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            found[item["Key"]] = (item["ETag"], item["LastModified"].isoformat())
    return found


# --- cache indexes as older versions made them ---------------------------------------------

# imgwarm 0.2.0 (c02f84e:imgwarm/cache/index.py): user_version 0, its _SCHEMA, then the
# young index it made after its column patches
INDEX_0_2_0 = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS variants (
    path TEXT PRIMARY KEY, format TEXT NOT NULL, width INTEGER NOT NULL,
    bytes INTEGER NOT NULL, refs INTEGER NOT NULL DEFAULT 0,
    score REAL NOT NULL DEFAULT 0, prior REAL NOT NULL DEFAULT 0,
    density REAL NOT NULL DEFAULT 0, pinned INTEGER NOT NULL DEFAULT 0,
    ram TEXT, nvme TEXT, dropped REAL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS refs (key TEXT NOT NULL, path TEXT NOT NULL,
                                 PRIMARY KEY (key, path)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refs_by_path ON refs (path);
DROP INDEX IF EXISTS by_rank;
CREATE INDEX IF NOT EXISTS ranking ON variants (pinned DESC, density DESC, path, bytes, width,
    refs, ram, nvme) WHERE refs > 0;
CREATE INDEX IF NOT EXISTS by_score ON variants (score) WHERE score > 0 AND refs > 0;
CREATE INDEX IF NOT EXISTS need_nvme ON variants (path) WHERE refs > 0 AND nvme IS NULL;
DROP INDEX IF EXISTS in_ram;
DROP INDEX IF EXISTS on_nvme;
DROP INDEX IF EXISTS held_ram;
DROP INDEX IF EXISTS held_nvme;
CREATE INDEX IF NOT EXISTS kept_ram ON variants (pinned DESC, density DESC, path, bytes, ram)
    WHERE ram IS NOT NULL;
CREATE INDEX IF NOT EXISTS kept_nvme ON variants (pinned DESC, density DESC, path, bytes, nvme)
    WHERE nvme IS NOT NULL;
CREATE INDEX IF NOT EXISTS kept_gone_ram ON variants (path, bytes, refs, ram)
    WHERE ram IS NOT NULL AND refs = 0;
CREATE INDEX IF NOT EXISTS kept_gone_nvme ON variants (path, bytes, refs, nvme)
    WHERE nvme IS NOT NULL AND refs = 0;
CREATE INDEX IF NOT EXISTS kept_wide_ram ON variants (width, pinned, path, bytes, ram)
    WHERE ram IS NOT NULL;
CREATE INDEX IF NOT EXISTS kept_wide_nvme ON variants (width, pinned, path, bytes, nvme)
    WHERE nvme IS NOT NULL;
CREATE INDEX IF NOT EXISTS unsettled_nvme ON variants (path)
    WHERE nvme IN ('placing', 'evicting');
CREATE INDEX IF NOT EXISTS gone ON variants (path) WHERE refs = 0;
CREATE INDEX IF NOT EXISTS pinned ON variants (path) WHERE pinned = 1;
CREATE TABLE IF NOT EXISTS written (tier TEXT NOT NULL, path TEXT NOT NULL,
                                    dev INTEGER NOT NULL, ino INTEGER NOT NULL,
                                    mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
                                    PRIMARY KEY (tier, path)) WITHOUT ROWID;
ALTER TABLE variants ADD COLUMN born REAL;
CREATE INDEX IF NOT EXISTS young ON variants (born) WHERE refs > 0 AND born IS NOT NULL;
"""

# before gc (the parent of commit cbb9b6a): no dropped nor born column, no written table, and
# the indexes since renamed (by_rank, in_ram, on_nvme)
INDEX_BEFORE_GC = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS variants (
    path TEXT PRIMARY KEY, format TEXT NOT NULL, width INTEGER NOT NULL,
    bytes INTEGER NOT NULL, refs INTEGER NOT NULL DEFAULT 0,
    score REAL NOT NULL DEFAULT 0, prior REAL NOT NULL DEFAULT 0,
    density REAL NOT NULL DEFAULT 0, pinned INTEGER NOT NULL DEFAULT 0,
    ram TEXT, nvme TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS refs (key TEXT NOT NULL, path TEXT NOT NULL,
                                 PRIMARY KEY (key, path)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS by_rank ON variants (pinned DESC, density DESC, path)
    WHERE refs > 0;
CREATE INDEX IF NOT EXISTS by_score ON variants (score) WHERE score > 0 AND refs > 0;
CREATE INDEX IF NOT EXISTS need_nvme ON variants (path) WHERE refs > 0 AND nvme IS NULL;
CREATE INDEX IF NOT EXISTS in_ram ON variants (bytes) WHERE ram IS NOT NULL;
CREATE INDEX IF NOT EXISTS on_nvme ON variants (bytes) WHERE nvme IS NOT NULL;
CREATE INDEX IF NOT EXISTS unsettled_nvme ON variants (path)
    WHERE nvme IN ('placing', 'evicting');
CREATE INDEX IF NOT EXISTS gone ON variants (path) WHERE refs = 0;
CREATE INDEX IF NOT EXISTS pinned ON variants (path) WHERE pinned = 1;
"""

# rows both old schemas hold (the columns they share)
OLD_VARIANTS = [
    ("a/b/c/photo.0123456789abcdef.webp", "webp", 640, 20_000, 1, 3.5, 0.25, 0.0002, 0,
     "placed", "placed"),
    ("a/b/c/photo.fedcba9876543210.jpg", "jpeg", 1280, 90_000, 1, 0.0, 0.25, 0.0, 1,
     None, "placed"),
    ("d/e/f/gone.00112233445566778.webp", "webp", 320, 7_000, 0, 0.0, 0.0, 0.0, 0,
     None, "evicting"),
]
OLD_REFS = [("uploads/photo.jpg", OLD_VARIANTS[0][0]), ("uploads/photo.jpg", OLD_VARIANTS[1][0])]
OLD_META = [("clock", json.dumps([1700000000.0, 1.0])), ("cut:ram", json.dumps([0, 0.1, "x"]))]


def old_index(path: Path, ddl: str) -> None:
    """An index as an older imgwarm left it: its DDL, user_version 0, rows in every table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")  # as every version's Index set it
    db.executescript(ddl)
    db.executemany("INSERT INTO variants (path, format, width, bytes, refs, score, prior, "
                   "density, pinned, ram, nvme) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   OLD_VARIANTS)
    db.executemany("INSERT INTO refs VALUES (?, ?)", OLD_REFS)
    db.executemany("INSERT INTO meta VALUES (?, ?)", OLD_META)
    if "written" in ddl:
        db.execute("INSERT INTO written VALUES ('nvme', ?, 1, 2, 3, 20000)",
                   (OLD_VARIANTS[0][0],))
        db.execute("UPDATE variants SET dropped = 1700000000.5, born = 1699999999.0 "
                   "WHERE refs = 0")
    db.commit()
    db.close()


def index_names(path: Path) -> set[str]:
    """The indexes an index file holds, by name (SQLite's own autoindexes aside)."""
    db = sqlite3.connect(path)
    try:
        return {name for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
    finally:
        db.close()


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def set_user_version(path: Path, number: int) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute(f"PRAGMA user_version = {number}")
        db.commit()
    finally:
        db.close()
