"""A cache box's index has a schema version (PRAGMA user_version): a new index is made at
INDEX_SCHEMA, indexes of older versions (0.2.0's, and one from before gc) are migrated in
place with every row kept, and one newer than this code is refused with one line, untouched."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from imgwarm.cache.index import Index
from imgwarm.cache.index.schema import INDEX_SCHEMA, MIGRATIONS
from imgwarm.cache.lock import INDEX
from imgwarm.exceptions import FormatTooNew
from imgwarm.manifest import Variant
from imgwarm.store.format import imgwarm_version
from tests.support.cli import Cli
from tests.support.files import all_files
from tests.support.servers import wait_for
from tests.support.sites import Site, settings_env
from tests.support.versions import (
    INDEX_0_2_0,
    INDEX_BEFORE_GC,
    OLD_META,
    OLD_REFS,
    OLD_VARIANTS,
    index_names,
    old_index,
    set_user_version,
    user_version,
)

# the indexes 0.2.0 had, by name (the ones renamed since must be gone)
INDEXES = {"refs_by_path", "ranking", "by_score", "need_nvme", "kept_ram", "kept_nvme",
           "kept_gone_ram", "kept_gone_nvme", "kept_wide_ram", "unsettled_ram",
           "unsettled_nvme", "gone", "pinned", "young"}  # (schema 2: kept_wide_nvme dropped)
RENAMED = {"by_rank", "in_ram", "on_nvme", "held_ram", "held_nvme"}
REFS = "SELECT s.key, r.path FROM refs r JOIN sources s ON s.id = r.source"  # (schema 2)


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return sorted(db.execute(sql).fetchall(), key=repr)
    finally:
        db.close()


def test_a_new_index_says_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "state" / INDEX
    Index(path).close(keep=True)
    assert user_version(path) == INDEX_SCHEMA
    assert index_names(path) == INDEXES
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(variants)")]
    assert columns[-2:] == ["dropped", "born"]


@pytest.mark.parametrize("ddl", [INDEX_0_2_0, INDEX_BEFORE_GC], ids=["0.2.0", "before-gc"])
def test_an_older_index_is_migrated_in_place_with_its_rows(tmp_path: Path, ddl: str) -> None:
    path = tmp_path / "state" / INDEX
    old_index(path, ddl)
    assert user_version(path) == 0
    index = Index(path)
    assert index.migrated_from == 0
    # what the old rows said, read back through the index's own API
    rows = index.states([v[0] for v in OLD_VARIANTS])
    for path_, _, _, size, refs, *_, ram, nvme in OLD_VARIANTS:
        assert rows[path_].bytes == size and rows[path_].refs == refs
        assert rows[path_].states == (ram, nvme)  # (RAM, then NVMe: the tiers' order)
    assert index.meta("clock") == [1700000000.0, 1.0]
    assert index.source_keys() == {"uploads/photo.jpg"}
    index.close(keep=True)
    assert user_version(path) == INDEX_SCHEMA
    assert index_names(path) == INDEXES and not index_names(path) & RENAMED
    assert _rows(path, "SELECT path, format, width, bytes, refs, score, prior, density, "
                       "pinned, ram, nvme FROM variants") == sorted(OLD_VARIANTS, key=repr)
    assert _rows(path, REFS) == sorted(OLD_REFS, key=repr)
    assert _rows(path, "SELECT name, value FROM meta") == sorted(OLD_META, key=repr)
    if "written" in ddl:  # 0.2.0's gc stamps and ages kept
        assert _rows(path, "SELECT dropped, born FROM variants WHERE refs = 0") == [
            (1700000000.5, 1699999999.0)]
        assert _rows(path, "SELECT tier, path FROM written") == [("nvme", OLD_VARIANTS[0][0])]
    else:  # added empty: the variants count as old, their grace starts at the next gc
        assert _rows(path, "SELECT DISTINCT dropped, born FROM variants") == [(None, None)]
    again = Index(path)  # opened again: nothing to migrate
    assert again.migrated_from == INDEX_SCHEMA
    again.close(keep=False)


def test_an_index_newer_than_this_code_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state" / INDEX
    Index(path).close(keep=True)
    set_user_version(path, INDEX_SCHEMA + 1)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(FormatTooNew) as raised:
        Index(path)
    assert str(raised.value) == (
        f"index {path} is schema {INDEX_SCHEMA + 1}; imgwarm {imgwarm_version()} knows "
        f"schemas up to {INDEX_SCHEMA}: upgrade imgwarm first")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert user_version(path) == INDEX_SCHEMA + 1


def test_warm_refuses_a_newer_index_in_one_line_and_touches_no_tier(
        site: Site, run_cli: Cli) -> None:
    settings = site.settings
    cache = settings.cache
    path = cache.cache_state / INDEX
    Index(path).close(keep=True)
    set_user_version(path, INDEX_SCHEMA + 1)
    result = run_cli("warm", env=settings_env(settings))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"warm FAILED: index {path} is schema {INDEX_SCHEMA + 1}; imgwarm {imgwarm_version()} "
        f"knows schemas up to {INDEX_SCHEMA}: upgrade imgwarm first"]
    assert all_files(cache.nvme_root) == [] and all_files(cache.ram_root) == []
    assert user_version(path) == INDEX_SCHEMA + 1


OPENER = """
import os, sys, time
from pathlib import Path
from imgwarm.cache.index import Index
path, ready, start = sys.argv[1:4]
Path(ready).touch()
while not os.path.exists(start):
    time.sleep(0.001)
index = Index(Path(path))
print(index.migrated_from)
index.close(keep=True)
"""


def test_processes_opening_one_old_index_at_once_migrate_it_once(tmp_path: Path) -> None:
    """The migration holds the write lock (BEGIN IMMEDIATE) and reads the version again
    under it: one process migrates, the others find it done; the rows are kept."""
    path = tmp_path / "state" / INDEX
    old_index(path, INDEX_0_2_0)
    start = tmp_path / "go"
    openers = [subprocess.Popen([sys.executable, "-c", OPENER, str(path),
                                 str(tmp_path / f"ready.{n}"), str(start)],
                                stdout=subprocess.PIPE, text=True) for n in range(4)]
    wait_for(lambda: all((tmp_path / f"ready.{n}").exists() for n in range(4)),
             "every opener to be ready")
    start.touch()
    found = [int(opener.communicate(timeout=60)[0]) for opener in openers]
    assert all(opener.returncode == 0 for opener in openers)
    assert found.count(0) == 1 and found.count(INDEX_SCHEMA) == 3
    assert user_version(path) == INDEX_SCHEMA
    assert _rows(path, REFS) == sorted(OLD_REFS, key=repr)


def schema_1_index(tmp_path: Path, refs: list[tuple[str, str]]) -> Path:
    """An index of schema 1 holding OLD_VARIANTS and ``refs`` (each variant's count of
    references as they say)."""
    path = tmp_path / "state" / INDEX
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](db)
    db.execute("PRAGMA user_version = 1")
    db.executemany("INSERT INTO variants (path, format, width, bytes, refs, score, prior, "
                   "density, pinned, ram, nvme) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   OLD_VARIANTS)
    db.executemany("INSERT INTO refs VALUES (?, ?)", refs)
    db.execute("UPDATE variants SET refs = (SELECT count(*) FROM refs r WHERE r.path = "
               "variants.path) WHERE path IN (SELECT path FROM refs)")
    db.close()
    return path


def test_a_schema_1_index_migrates_to_2_with_its_rows_and_its_tallies(tmp_path: Path) -> None:
    """Schema 2 (issue 41): what each tier holds and the requests' totals are kept by
    triggers, counted from the rows an index of schema 1 holds; the rows are kept, and the
    tallies follow every change after (a tier's state, a score, a reference)."""
    path = schema_1_index(tmp_path, OLD_REFS)
    index = Index(path)
    assert index.migrated_from == 1
    assert index_names(path) == INDEXES
    # every referenced variant (2) is on NVMe, one in RAM; the unreferenced one is evicting
    assert index.totals("nvme", 1) == (3, 117_000, 117_000)
    assert index.totals("ram", 4096) == (1, 20_000, 20_480)
    assert index.hit_share() == (3.5, 3.5)
    assert index.score_percentile(0.9) == 3.5
    assert [p.path for p in index.unsettled("nvme")] == [OLD_VARIANTS[2][0]]
    index.mark("ram", [OLD_VARIANTS[1][0]], "placed")
    index.add_scores({OLD_VARIANTS[1][0]: 0.5})
    index.mark("nvme", [OLD_VARIANTS[2][0]], None)
    assert index.totals("ram", 4096) == (2, 110_000, 20_480 + 90_112)
    assert index.totals("nvme", 1) == (2, 110_000, 110_000)
    assert index.hit_share() == (4.0, 4.0)
    index.set_source("uploads/photo.jpg", [], 0.0)  # the source is gone: nothing referenced
    assert index.hit_share() == (0.0, 0.0) and index.score_percentile(0.9) is None
    index.close(keep=True)
    assert user_version(path) == INDEX_SCHEMA == 2
    assert _rows(path, "SELECT path, format, width, bytes FROM variants") == sorted(
        (v[:4] for v in OLD_VARIANTS), key=repr)
    assert _rows(path, REFS) == [] and _rows(path, "SELECT key FROM sources") == []


def test_schema_2_keeps_a_source_s_key_once(tmp_path: Path) -> None:
    """A schema 1 index's references (key, path) become a source (its key once) and its
    references by id; the index reads them back as it did."""
    path = schema_1_index(tmp_path, [*OLD_REFS, ("b.jpg", OLD_VARIANTS[0][0])])
    index = Index(path)
    assert index.source_keys() == {"uploads/photo.jpg", "b.jpg"}
    assert _rows(path, "SELECT key FROM sources") == [("b.jpg",), ("uploads/photo.jpg",)]
    photo = [Variant(format="webp", width=640, height=427, bytes=20_000, path=OLD_VARIANTS[0][0])]
    assert index.set_source("uploads/photo.jpg", photo, 0.0) == (0, 1)  # the jpeg dropped
    assert index.set_source("b.jpg", [], 0.0) == (0, 1)
    assert index.set_source("c.jpg", photo, 0.0) == (1, 0)
    assert index.states([OLD_VARIANTS[0][0]])[OLD_VARIANTS[0][0]].refs == 2
    index.close(keep=True)
    assert _rows(path, REFS) == [("c.jpg", OLD_VARIANTS[0][0]),
                                 ("uploads/photo.jpg", OLD_VARIANTS[0][0])]
    assert _rows(path, "SELECT key FROM sources") == [("c.jpg",), ("uploads/photo.jpg",)]
