"""A cache box's index has a schema version (PRAGMA user_version): a new index is made at
INDEX_SCHEMA, indexes of older versions (0.2.0's, and one from before gc) are migrated in
place with every row kept, and one newer than this code is refused with one line, untouched."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from imgwarm.cache.index import Index
from imgwarm.cache.lock import INDEX
from imgwarm.cache.schema import INDEX_SCHEMA
from imgwarm.exceptions import FormatTooNew
from imgwarm.store.format import imgwarm_version
from tests.support.cli import Cli
from tests.support.files import all_files
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
           "kept_gone_ram", "kept_gone_nvme", "kept_wide_ram", "kept_wide_nvme",
           "unsettled_nvme", "gone", "pinned", "young"}
RENAMED = {"by_rank", "in_ram", "on_nvme", "held_ram", "held_nvme"}


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
        assert (rows[path_].ram, rows[path_].nvme) == (ram, nvme)
    assert index.meta("clock") == [1700000000.0, 1.0]
    assert index.source_keys() == {"uploads/photo.jpg"}
    index.close(keep=True)
    assert user_version(path) == INDEX_SCHEMA
    assert index_names(path) == INDEXES and not index_names(path) & RENAMED
    assert _rows(path, "SELECT path, format, width, bytes, refs, score, prior, density, "
                       "pinned, ram, nvme FROM variants") == sorted(OLD_VARIANTS, key=repr)
    assert _rows(path, "SELECT key, path FROM refs") == sorted(OLD_REFS, key=repr)
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
