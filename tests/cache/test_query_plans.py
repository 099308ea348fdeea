"""A quiet warm costs what changed (issue 41): every statement a real warm runs on its index,
with nothing changed and with a few uploads and log lines, is planned from the small side.
Each is read back through SQLite's own ``EXPLAIN QUERY PLAN``, with its parameters, on the
run's own connection (its temporary tables are there), and none may scan a table that grows
with the store, nor the whole of an index of one: only the partial indexes named in BOUNDED
(what their predicate selects does not grow with the store) may be read end to end."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from imgwarm.cache.index import Index
from tests.support.logs import requests, write_log
from tests.support.sites import Site, make_site, synthetic

pytestmark = pytest.mark.slow

# tables with a row a variant, a reference or a file placed: they grow with the store
GROWING = {"variants", "refs", "written"}
# partial indexes that may be read whole, and why what they hold does not grow with the store
BOUNDED = {
    "kept_ram": "what the RAM tier holds: bounded by its budget",
    "unsettled_ram": "what a killed run left being copied or removed: a batch or two",
    "unsettled_nvme": "what a killed run left being copied or removed: a batch or two",
    "need_nvme": "referenced variants NVMe lacks: what is new since the last run",
    "gone": "variants no source references: dropped within gc's grace",
    **{f"kept_gone_{t}": f"what {t} holds that no source references: dropped within gc's "
       "grace" for t in ("ram", "nvme")},
    "pinned": "the hot list's paths",
    "young": "variants uploaded within YOUNG_FOR half-lives: the recent uploads",
}
# indexes that may be read over an open range (no column held equal), and why the range
# is short
RANGES = {
    "ranking": "plan walks the ranking from where the last run's cut was, as far as it moved",
    "kept_ram": "what the RAM tier holds past its cut: bounded by its budget",
    "kept_wide_ram": "what the RAM tier holds wider than it takes: bounded by its budget",
    "young": "variants uploaded within YOUNG_FOR half-lives: the recent uploads",
    "by_score": "the prior's percentile, walked from the last one found as far as it moved "
                "(the first ever from the top: a tenth of the scored)",
}
SOURCES = 300


class Traced:
    """An index's connection, with the plan of every statement it is given (before it
    runs: a temporary table it reads is there by then) kept beside the statement."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.plans: list[tuple[str, list[str]]] = []  # (statement, its plan's steps)

    def _explain(self, sql: str, params: Any) -> None:
        if re.match(r"\s*(BEGIN|COMMIT|ROLLBACK|PRAGMA|CREATE|DROP)\b", sql, re.I):
            return
        steps = [row[3] for row in self._db.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        self.plans.append((" ".join(sql.split()), steps))

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self._explain(sql, params)
        return self._db.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> sqlite3.Cursor:
        rows = list(rows)
        if rows:  # (none: SQLite runs nothing)
            self._explain(sql, rows[0])
        return self._db.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Traced]]:
    """Every Index opened from here on runs on a Traced connection (one a warm)."""
    opened: list[Traced] = []
    init = Index.__init__

    def traced_init(self: Index, path: Path) -> None:
        init(self, path)
        self.db = Traced(self.db)  # type: ignore[assignment]
        opened.append(self.db)  # type: ignore[arg-type]

    monkeypatch.setattr(Index, "__init__", traced_init)
    yield opened


def _tables(sql: str) -> dict[str, str]:
    """Each name a statement reads a table under (its alias, or its own) -> the table."""
    found = {}
    for table, alias in re.findall(
            r"\b(?:FROM|JOIN|UPDATE|INTO)\s+(\w+)(?:\s+(?:AS\s+)?(?!(?:ON|WHERE|JOIN|CROSS|"
            r"LEFT|INNER|INDEXED|SET|GROUP|ORDER|VALUES|SELECT|USING|LIMIT)\b)(\w+))?",
            sql, re.I):
        found[table] = table
        if alias:
            found[alias] = table
    return found


def whole_reads(plans: list[tuple[str, list[str]]]) -> list[str]:
    """The steps that read a growing table end to end (or an index of it not in BOUNDED), or
    over an open range of an index not in RANGES."""
    bad = []
    for sql, steps in plans:
        names = _tables(sql)
        for step in steps:
            read = re.match(r"(SCAN|SEARCH) (\w+)"
                            r"(?: USING (?:(?:COVERING )?INDEX (\w+)|PRIMARY KEY))?"
                            r"(?: \((.*)\))?", step)
            if read is None or names.get(read[2], read[2]) not in GROWING:
                continue
            if (read[1] == "SCAN" and read[3] not in BOUNDED) or \
                    (read[1] == "SEARCH" and "=" not in (read[4] or "=") and \
                    read[3] not in RANGES):
                bad.append(f"{step}\n    in: {sql}")
    return bad


def test_a_quiet_warm_and_one_with_a_few_uploads_read_no_table_whole(
        settings: Any, tmp_path: Path, ram: Path, traced: list[Traced]) -> None:
    site: Site = make_site(settings, tmp_path, ram, count=0, ram_budget="256k")
    made = synthetic(site, SOURCES, per_source=2, sizes=(300, 3000))
    log = site.root / "access.log"
    now = time.time()
    hot = [m.variants[0].path for m in made[:40]]
    write_log(log, requests(dict.fromkeys(hot, 2), now - 600))
    site.settings = site.settings.updated(access_logs=str(log))
    first = site.warm(now=now - 300)  # the first fill: reading every record is its job
    assert first.sources == SOURCES and first.nvme.copied == 2 * SOURCES
    assert 0 < first.ram.copied < 2 * SOURCES  # a budget that ranks

    quiet = site.warm(now=now - 200)  # nothing new: no record, no log line
    assert (quiet.sources, quiet.log_lines, quiet.nvme.copied, quiet.ram.copied) == (0, 0, 0, 0)

    new = synthetic(site, 2, per_source=2, seed=1, sizes=(300, 3000))
    write_log(log, requests({new[0].variants[0].path: 3, hot[-1]: 1}, now - 50), append=True)
    few = site.warm(now=now)
    assert (few.sources, few.nvme.copied, few.log_lines) == (2, 4, 4)

    assert len(traced) == 3
    bad = []
    for run, name in ((traced[1], "nothing changed"), (traced[2], "a few uploads")):
        assert len(run.plans) > 10, f"{name}: statements were captured"
        bad.extend(f"{name}: {line}" for line in whole_reads(run.plans))
    assert not bad, f"{len(bad)} whole reads:\n" + "\n".join(bad)
    # what the runs read instead of counting: the tallies, as a count of the rows finds them
    state = site.settings.cache.cache_state / "index.sqlite"
    assert tallies_agree(state) == (few.ram.held, few.nvme.held, 41)  # 41: hot + new upload
    with sqlite3.connect(state) as db:  # a row edited by hand: the tallies are off by one...
        db.execute("UPDATE variants SET nvme = NULL WHERE path = ?", (hot[0],))
    full = site.warm(full=True)  # ... until a whole pass counts them again
    assert full.nvme.repaired == 1
    assert tallies_agree(state) == (few.ram.held, few.nvme.held, 41)


def tallies_agree(state: Path) -> tuple[int, int, int]:
    """The tallies (what each tier holds, the requests' totals), checked against a count of
    the rows; (files in RAM, on NVMe, variants with a score)."""
    db = sqlite3.connect(state)
    try:
        files = []
        for tier in ("ram", "nvme"):
            kept = db.execute("SELECT files, bytes, units, pages FROM held WHERE tier = ?",
                              (tier,)).fetchone()
            assert kept == tuple(int(n) for n in db.execute(
                "SELECT count(*), total(bytes), total(max(bytes, 1)), "
                f"total((max(bytes, 1) + 4095) / 4096) FROM variants WHERE {tier} IS NOT NULL"
            ).fetchone()), tier
            files.append(kept[0])
        total, in_ram, scored = db.execute(
            "SELECT total, in_ram, scored FROM requests").fetchone()
        counted = db.execute("SELECT total(score), total(CASE WHEN ram = 'placed' THEN score "
                             "END), count(CASE WHEN score > 0 THEN 1 END) FROM variants "
                             "WHERE refs > 0").fetchone()
        assert (total, in_ram, scored) == (pytest.approx(counted[0]), pytest.approx(counted[1]),
                                           counted[2])
        return files[0], files[1], scored
    finally:
        db.close()


def test_the_check_sees_a_whole_read(tmp_path: Path) -> None:
    """The checker itself: a scan of a growing table (through an alias too, or an index not
    in BOUNDED) and an open range of an index not in RANGES are found; a search by key, a
    scan of a bounded partial index or of a temporary table is not."""
    index = Index(tmp_path / "index.db")
    try:
        db = Traced(index.db)
        db.execute("CREATE TEMP TABLE t (source INTEGER PRIMARY KEY)")
        db.execute("SELECT path FROM variants WHERE format = 'webp'")
        db.execute("SELECT * FROM t JOIN refs r ON r.source = t.source")
        db.execute("SELECT source FROM refs WHERE source > ?", (5,))
        db.execute("SELECT * FROM t CROSS JOIN refs r ON r.source = t.source")
        db.execute("SELECT bytes FROM variants WHERE path = ?", ("x",))
        db.execute("SELECT path FROM variants WHERE pinned = 1")
        assert [line.split("\n")[0] for line in whole_reads(db.plans)] == [
            "SCAN variants", "SCAN r USING COVERING INDEX refs_by_path",
            "SEARCH refs USING PRIMARY KEY (source>?)"]
    finally:
        index.close(keep=False)
