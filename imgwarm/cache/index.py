"""The index: what ``warm`` knows between runs, in SQLite (the standard library's), so that a
run costs what changed, not what is placed.

One row a variant: its size and width, how many sources reference it, its score and prior
(rank.py) and density, and its state in each tier: NULL (not there), ``placing`` (being
copied), ``placed``, ``evicting`` (being removed). A state is committed before the file
operation and settled after it, so a run killed at any point leaves rows that the next run
finishes (``recover``): the index and the tiers never disagree for longer than one run.
Partial indexes give each run only the rows it acts on: variants wanted but not on NVMe,
variants no source references any more, what RAM holds.

Every SQL statement on the index is in this module but its schema and migrations
(schema.py: the version in ``PRAGMA user_version``); rows come out as named tuples (``Row``,
``Pending``, ``Totals``, ``Identity``), each tier's state under the tier's name.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

from imgwarm.cache.identity import Identity
from imgwarm.cache.rank import (
    AGE_FLOOR,
    PAGE,
    PRIOR_PERCENTILE,
    SHARE_PRIOR,
    YOUNG_FOR,
    Candidate,
    Decay,
    choose,
    class_weights,
    measure_shares,
    pages,
)
from imgwarm.cache.schema import migrate
from imgwarm.manifest import Variant

TIERS = ("ram", "nvme")
_IN_CHUNK = 500  # keys a query names (SQLite allows 32,766 parameters: far from it)


class Row(NamedTuple):
    """A variant as the tiers see it: its references, its size and its state in each tier
    (None: not there; ``placing``, ``placed``, ``evicting``)."""

    path: str
    refs: int
    bytes: int
    ram: str | None
    nvme: str | None

    def state(self, tier: str) -> str | None:
        """Its state in ``tier`` (a tier's state is kept under the tier's name)."""
        state: str | None = getattr(self, _column(tier))
        return state


class Pending(NamedTuple):
    """A variant a killed run left unsettled in one tier."""

    path: str
    bytes: int
    state: str  # placing, evicting


class Totals(NamedTuple):
    """What a tier holds or is being given."""

    files: int
    bytes: int
    paged: int  # bytes counted in whole pages


_ROW = "path, refs, bytes, ram, nvme"  # a Row's columns, in its order


class Cut(NamedTuple):
    """Where a tier's prefix of the ranking ends: the first candidate that did not fit."""

    p: int  # pinned
    d: float  # density
    path: str


# A candidate for a tier with a budget (rank.choose's order: pinned, then density, path), and
# "ranked before the cut" as three ranges of the ranking index, in that order (an OR of them
# would be a scan); from the cut on, the same the other way round
_CANDIDATE = "refs > 0 AND (pinned = 1 OR width <= :width) AND (pinned = 1 OR density > 0)"
_BEFORE = ("pinned > :p", "pinned = :p AND density > :d",
           "pinned = :p AND density = :d AND path < :path")
_FROM = ("pinned = :p AND density = :d AND path >= :path", "pinned = :p AND density < :d",
         "pinned < :p")


class Index:
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

    # --- meta --------------------------------------------------------------------------------

    def meta(self, name: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else default

    def remember(self, name: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, json.dumps(value)))

    # --- sources and their variants ------------------------------------------------------------

    @staticmethod
    def stored(key: str) -> str:
        """A source key as the index keeps it: one that was not UTF-8 (a file name's odd bytes,
        kept as surrogates) with those bytes as backslash escapes; the same key every time."""
        return key.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")

    def set_source(self, key: str, variants: list[Variant], prior: float) -> tuple[int, int]:
        """The variants ``key`` references now (none: it is gone). New variants start with
        ``prior``. Returns (references added, references dropped)."""
        return self.set_sources([(key, variants, prior)])

    def set_sources(self, sources: Iterable[tuple[str, list[Variant], float]],
                    now: float | None = None,
                    born: Mapping[str, float] | None = None) -> tuple[int, int]:
        """``set_source`` for many sources at once (a statement a kind of change, not one a
        source: a first run sets tens of thousands); a key given twice takes its last. A
        variant that loses its last reference is stamped ``now`` (gc's grace counts from it).
        A new variant's age counts from its source's time in ``born`` (by key as given: when
        its record was written); without one (a first run's listing) it counts as old."""
        born = {self.stored(k): t for k, t in (born or {}).items()}
        wanted = {self.stored(key): (variants, prior) for key, variants, prior in sources}
        old: dict[str, set[str]] = {key: set() for key in wanted}
        keys = list(wanted)
        for at in range(0, len(keys), _IN_CHUNK):
            chunk = keys[at:at + _IN_CHUNK]
            for key, path in self.db.execute(
                    f"SELECT key, path FROM refs WHERE key IN ({','.join('?' * len(chunk))})",
                    chunk):
                old[key].add(path)
        added: list[tuple[str, Variant, float]] = []
        dropped: list[tuple[str, str]] = []
        for key, (variants, prior) in wanted.items():
            new = {v.path: v for v in variants}
            added.extend((key, v, prior) for path, v in new.items() if path not in old[key])
            dropped.extend((key, path) for path in old[key] if path not in new)
        # a new variant row starts referenced (its partial indexes written once, not moved
        # by a second statement); one already there gains a reference
        self.db.executemany(
            "INSERT INTO variants (path, format, width, bytes, refs, prior, density, born) "
            f"VALUES (?, ?, ?, ?, 1, ?, {_density('0', '?', '?')}, ?) "
            "ON CONFLICT (path) DO UPDATE SET refs = refs + 1",
            [(v.path, v.format, v.width, v.bytes, prior, prior, v.bytes, born.get(key))
             for key, v, prior in added])
        self.db.executemany("INSERT INTO refs VALUES (?, ?)", [(k, v.path) for k, v, _ in added])
        self.db.executemany("DELETE FROM refs WHERE key = ? AND path = ?", dropped)
        when = time.time() if now is None else now
        self.db.executemany(  # (SET reads the row as it was: refs before the update)
            "UPDATE variants SET refs = refs - 1, "
            "dropped = CASE WHEN refs <= 1 THEN ?1 ELSE dropped END WHERE path = ?2",
            [(when, path) for _, path in dropped])
        return len(added), len(dropped)

    def source_keys(self) -> set[str]:
        """Every source key that references a variant (as ``stored`` keeps it)."""
        return {key for (key,) in self.db.execute("SELECT DISTINCT key FROM refs")}

    def forget_unreferenced(self) -> None:
        """Rows of variants nobody references and no tier holds."""
        self.db.execute("DELETE FROM variants WHERE refs = 0 AND ram IS NULL AND nvme IS NULL")

    # --- scores -------------------------------------------------------------------------------

    def add_scores(self, weights: dict[str, float]) -> int:
        """Add request weights to the variants at these paths; returns how many were ours.
        Their densities are those of their own score until ``rerank``."""
        before = self.db.total_changes
        self.db.executemany(
            "UPDATE variants SET score = score + ?1, "
            f"density = {_density('score + ?1', 'prior', 'bytes')} "
            "WHERE path = ?2",  # in key order: each B-tree page is visited once, not at random
            [(weights[path], path) for path in sorted(weights)])
        return self.db.total_changes - before

    def rerank(self, paths: Iterable[str], *, now: float, decay: Decay) -> int:
        """The densities of every variant of the sources of these paths (their scores moved)
        and of the sources with a young variant (its age moved), as rank.py estimates them:
        each variant's score corrected for its age, plus its prior, pooled over its source
        and shared out by each variant's own score plus SHARE_PRIOR requests now spread by
        the site's shares (measured on the sources ranked again). Returns how many sources
        were ranked again."""
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS touched (key TEXT PRIMARY KEY) "
                        "WITHOUT ROWID")
        self.db.execute("DELETE FROM touched")
        found = sorted(set(paths))
        for at in range(0, len(found), _IN_CHUNK):
            chunk = found[at:at + _IN_CHUNK]
            self.db.execute(
                "INSERT OR IGNORE INTO touched SELECT key FROM refs "
                f"WHERE path IN ({','.join('?' * len(chunk))})", chunk)
        # The young: under a half-life old at every run (their estimate moves fastest), up to
        # YOUNG_FOR half-lives once an hour (a few percent an hour then)
        ages = 1.0
        if now - self.meta("young_ranked", float("-inf")) >= 3600.0:
            ages = YOUNG_FOR
            self.remember("young_ranked", now)
        self.db.execute(
            "INSERT OR IGNORE INTO touched SELECT r.key FROM variants v JOIN refs r "
            "ON r.path = v.path WHERE v.refs > 0 AND v.born IS NOT NULL AND v.born > ?",
            (now - ages * decay.half_life,))
        # each variant of those sources, with its value: its corrected score plus its prior
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS base (key TEXT, path TEXT, score REAL, "
                        "format TEXT, class INTEGER, value REAL)")
        # (by key: the shares join a source's variants to its mean; a scan instead would be
        # sources x variants)
        self.db.execute("CREATE INDEX IF NOT EXISTS temp.base_by_key ON base (key)")
        self.db.execute("DELETE FROM base")
        self.db.execute(
            f"INSERT INTO base SELECT r.key, v.path, v.score, v.format, {_width_class('v')}, "
            f"{_estimate('v')} + v.prior FROM touched t JOIN refs r ON r.key = t.key "
            "JOIN variants v ON v.path = r.path WHERE v.refs > 0",
            {"now": now, "half_life": decay.half_life})
        self._measure(now, decay)
        self.db.execute(
            "UPDATE variants SET density = e.estimate / "
            f"((max(bytes, 1) + {PAGE - 1}) / {PAGE} * {PAGE}) FROM ("
            "  WITH weighed AS MATERIALIZED ("
            "    SELECT b.key AS key, b.path AS path, b.score AS score, b.value AS value,"
            "           coalesce(s.weight, 1.0) AS weight"
            "    FROM base b LEFT JOIN shares s ON s.format = b.format AND s.class = b.class),"
            "  source AS (SELECT key, sum(value) AS total, sum(score) AS score,"
            "             sum(weight) AS weight FROM weighed GROUP BY key)"
            "  SELECT w.path AS path,"
            "        max(source.total * (w.score + ?1 * w.weight)"
            "            / (source.score + ?1 * source.weight)) AS estimate"
            "  FROM weighed w JOIN source ON source.key = w.key GROUP BY w.path"
            ") AS e WHERE variants.path = e.path", (SHARE_PRIOR * decay(now),))
        ranked: int = self.db.execute("SELECT count(*) FROM touched").fetchone()[0]
        return ranked

    def _measure(self, now: float, decay: Decay) -> None:
        """The site's shares (rank.measure_shares) with the sources about to be re-ranked
        (``base``), kept in the index and in the temporary table ``shares`` for rerank."""
        kept = {(fmt, cls): (score, mean) for fmt, cls, score, mean in self.meta("classes", [])}
        faded = 2.0 ** (-max(0.0, now - self.meta("classes_at", now)) / decay.half_life)
        shares = measure_shares(kept, faded, self.db.execute(
            "WITH sources AS (SELECT key, total(score) / count(*) AS mean FROM base"
            "                 GROUP BY key HAVING count(*) >= 2)"
            "SELECT b.format, b.class, total(b.score), total(s.mean) "
            "FROM base b JOIN sources s ON s.key = b.key GROUP BY b.format, b.class"),
            decay(now))
        self.remember("classes", [[*key, *totals] for key, totals in sorted(shares.items())])
        self.remember("classes_at", now)
        self.weights = class_weights(shares)
        self.db.execute("CREATE TEMP TABLE IF NOT EXISTS shares (format TEXT, class INTEGER, "
                        "weight REAL, PRIMARY KEY (format, class)) WITHOUT ROWID")
        self.db.execute("DELETE FROM shares")
        self.db.executemany("INSERT INTO shares VALUES (?, ?, ?)",
                            [(fmt, cls, w) for (fmt, cls), w in self.weights.items()])

    def rescale(self, factor: float) -> None:
        """Multiply every score and prior (the decay's epoch moved, or its half-life)."""
        self.db.execute("UPDATE variants SET score = score * ?1, prior = prior * ?1, "
                        "density = density * ?1", (factor,))

    def score_percentile(self, fraction: float) -> float | None:
        count = self.db.execute(
            "SELECT count(*) FROM variants WHERE score > 0 AND refs > 0").fetchone()[0]
        if not count:
            return None
        row = self.db.execute(
            "SELECT score FROM variants WHERE score > 0 AND refs > 0 ORDER BY score "
            "LIMIT 1 OFFSET ?", (min(count - 1, int(count * fraction)),)).fetchone()
        return float(row[0])

    def set_pinned(self, paths: set[str]) -> bool:
        """Pin these paths (a hot list), unpin the rest; True when anything changed."""
        now = {r[0] for r in self.db.execute("SELECT path FROM variants WHERE pinned = 1")}
        if now == paths:
            return False
        self.db.executemany("UPDATE variants SET pinned = 0 WHERE path = ?",
                            [(p,) for p in now - paths])
        self.db.executemany("UPDATE variants SET pinned = 1 WHERE path = ?",
                            [(p,) for p in paths - now])
        return True

    def hit_share(self) -> tuple[float, float]:
        """(decayed weight of the requests the RAM tier holds, of all requests to variants)."""
        row = self.db.execute(
            "SELECT total(score), total(CASE WHEN ram = 'placed' THEN score END) "
            "FROM variants WHERE refs > 0").fetchone()
        return float(row[1]), float(row[0])

    # --- what each tier should hold -------------------------------------------------------------

    def ranked(self, max_width: int) -> Iterator[Candidate]:
        """Variants for the RAM tier, pinned first, then by density (rows read as taken)."""
        return map(Candidate._make, self._ranked(max_width))

    def _ranked(self, max_width: int) -> Iterator[tuple[str, int, float, int]]:
        # read from a covering index (``ranking``): in its order, without visiting the rows
        rows: Iterator[tuple[str, int, float, int]] = self.db.execute(
            "SELECT path, bytes, density, pinned FROM variants WHERE refs > 0 "
            "AND (pinned = 1 OR width <= ?) ORDER BY pinned DESC, density DESC, path",
            (max_width,))
        return rows

    def prior(self, now_weight: float) -> float:
        """The prior of a variant uploaded now (rank.py): the PRIOR_PERCENTILE score of the
        variants with traffic, or the weight of one request now while there is none."""
        return self.score_percentile(PRIOR_PERCENTILE) or now_weight

    def choose(self, budget: int, *, max_width: int, page: int) -> dict[str, int]:
        """What a tier of ``budget`` bytes should hold (path -> bytes): the pinned, then the
        densest variants up to ``max_width``, each counted in whole pages of ``page`` bytes."""
        rows = cast(Iterator[Candidate], self._ranked(max_width))  # (plain tuples: faster)
        return {path: size for path, size, _, _ in choose(rows, budget, page)}

    def plan(self, tier: str, budget: int, *, max_width: int, page: int
             ) -> tuple[dict[str, int], dict[str, int]]:
        """(what to place, what to evict), path -> bytes, for ``tier`` to hold what ``choose``
        would choose, found without reading every row it keeps: the chosen are a prefix of
        the ranking (up to the first candidate that does not fit: the cut) plus a few that
        fit past it, and the cut moves little between runs. So one pass over the prefix
        before the last run's cut sums its pages and finds what the tier lacks of it, the cut
        is walked forward or back over the rows that moved, and what the tier holds past the
        new cut (or no longer as a candidate) is read from its own indexes in ranking order."""
        column = _column(tier)
        where = {"width": max_width, "page": page}
        kept = self.meta(f"cut:{column}")
        start = Cut(*kept) if kept else None
        taken, place = self._before(start, where, column) if start else (0, {})
        cut: Cut | None = None
        if taken <= budget:  # forward from the last cut, taking while they fit
            for path, size, density, pinned, state in self._from(start, where, column):
                if taken + pages(size, page) > budget:
                    cut = Cut(pinned, density, path)
                    break
                taken += pages(size, page)
                if state is None:
                    place[path] = size
        else:  # back from it, giving up the last taken until the rest fit
            for path, size, density, pinned in self._back_from(start, where):
                taken -= pages(size, page)
                place.pop(path, None)
                if taken <= budget:
                    cut = Cut(pinned, density, path)
                    break
        self.remember(f"cut:{column}", None if cut is None else list(cut))
        evict = self._kept_past(cut, where, column)
        past = {} if cut is None else {  # (the cut itself is the first, which does not fit)
            path: size for path, size, _, _ in choose(
                (cast(Candidate, row[:4]) for row in self._from(cut, where, column)),
                budget - taken, page)}
        for path, row in self.states(past).items():  # (a few rows)
            if row.state(tier) is None:
                place[path] = row.bytes
            evict.pop(path, None)
        return place, evict

    def _before(self, cut: Cut, where: dict[str, Any], column: str
                ) -> tuple[int, dict[str, int]]:
        """(the pages of the candidates ranked before ``cut``, those of them the tier lacks:
        path -> bytes), in one pass over ranges of the ranking index (which covers both)."""
        taken, lacking = 0, {}
        for part in _BEFORE:
            total, missing = self.db.execute(
                f"SELECT total((max(bytes, 1) + :page - 1) / :page * :page), "
                f"json_group_object(path, bytes) FILTER (WHERE {column} IS NULL) "
                f"FROM variants WHERE {_CANDIDATE} AND {part}",
                {**where, **cut._asdict()}).fetchone()
            taken += int(total)
            lacking.update(json.loads(missing))
        return taken, lacking

    def _kept_past(self, cut: Cut | None, where: dict[str, Any], column: str
                   ) -> dict[str, int]:
        """What the tier holds that is not a candidate ranked before ``cut`` (path -> bytes):
        what it holds from the cut on (all candidates fit: what ranks after every candidate),
        what no source references, and what is wider than the tier takes and not pinned;
        each a range of one of the tier's own indexes."""
        parts = list(_FROM) if cut is not None else ["pinned = 0 AND density <= 0"]
        params = {**where, **({} if cut is None else cut._asdict())}
        found: dict[str, int] = {}
        for part in parts:
            found.update(self.db.execute(
                f"SELECT path, bytes FROM variants INDEXED BY kept_{column} "
                f"WHERE {column} IS NOT NULL AND {part}", params))
        found.update(self.db.execute(
            f"SELECT path, bytes FROM variants INDEXED BY kept_gone_{column} "
            f"WHERE {column} IS NOT NULL AND refs = 0"))
        found.update(self.db.execute(
            f"SELECT path, bytes FROM variants INDEXED BY kept_wide_{column} "
            f"WHERE {column} IS NOT NULL AND width > :width AND pinned = 0", params))
        return found

    def _from(self, cut: Cut | None, where: dict[str, Any], column: str
              ) -> Iterator[tuple[str, int, float, int, str | None]]:
        """Candidates from ``cut`` on (all: None), in ranking order, with their state in
        ``column``."""
        parts = ["1"] if cut is None else list(_FROM)
        for part in parts:
            yield from self.db.execute(
                f"SELECT path, bytes, density, pinned, {column} FROM variants "
                f"WHERE {_CANDIDATE} AND {part} ORDER BY pinned DESC, density DESC, path",
                {**where, **({} if cut is None else cut._asdict())})

    def _back_from(self, cut: Cut | None, where: dict[str, Any]
                   ) -> Iterator[tuple[str, int, float, int]]:
        """Candidates before ``cut``, last first."""
        if cut is None:
            return
        for part in reversed(_BEFORE):
            yield from self.db.execute(
                f"SELECT path, bytes, density, pinned FROM variants WHERE {_CANDIDATE} AND "
                f"{part} ORDER BY pinned, density, path DESC", {**where, **cut._asdict()})

    def held(self, tier: str) -> dict[str, int]:
        """What a tier holds or is being given: path -> bytes."""
        column = _column(tier)
        return dict(self.db.execute(
            f"SELECT path, bytes FROM variants WHERE {column} IS NOT NULL"))

    def totals(self, tier: str, page: int) -> Totals:
        """What a tier holds or is being given, counted in whole pages of ``page`` bytes too;
        read from a covering index, without visiting the rows."""
        column = _column(tier)
        row = self.db.execute(
            f"SELECT count(*), total(bytes), total((max(bytes, 1) + ?1 - 1) / ?1 * ?1) "
            f"FROM variants WHERE {column} IS NOT NULL", (page,)).fetchone()
        return Totals(int(row[0]), int(row[1]), int(row[2]))

    def missing(self, tier: str) -> list[tuple[str, int]]:
        """(path, bytes) of every referenced variant a tier neither holds nor is given."""
        column = _column(tier)
        return list(self.db.execute(
            f"SELECT path, bytes FROM variants WHERE refs > 0 AND {column} IS NULL"))

    def unreferenced(self) -> list[Row]:
        """Variants no source references that a tier holds."""
        return [Row(*row) for row in self.db.execute(
            f"SELECT {_ROW} FROM variants "
            "WHERE refs = 0 AND (ram IS NOT NULL OR nvme IS NOT NULL)")]

    def states(self, paths: Iterable[str]) -> dict[str, Row]:
        """path -> row of those of ``paths`` the index knows."""
        found: dict[str, Row] = {}
        batch = list(paths)
        for start in range(0, len(batch), _IN_CHUNK):
            part = batch[start:start + _IN_CHUNK]
            for row in self.db.execute(
                    f"SELECT {_ROW} FROM variants "
                    f"WHERE path IN ({','.join('?' * len(part))})", part):
                found[row[0]] = Row(*row)
        return found

    def unreferenced_before(self, cutoff: float, now: float) -> dict[str, Row]:
        """Variants a tier holds that no source has referenced since before ``cutoff``:
        path -> row. Rows from before such stamps are stamped ``now`` (their grace starts
        here)."""
        self.db.execute("UPDATE variants SET dropped = ? WHERE refs = 0 AND dropped IS NULL",
                        (now,))
        return {row[0]: Row(*row) for row in self.db.execute(
            f"SELECT {_ROW} FROM variants WHERE refs = 0 AND dropped < ? "
            "AND (ram IS NOT NULL OR nvme IS NOT NULL)", (cutoff,))}

    def unsettled(self, tier: str) -> list[Pending]:
        """What a killed run left being placed in or evicted from ``tier``."""
        column = _column(tier)
        return [Pending(*row) for row in self.db.execute(
            f"SELECT path, bytes, {column} FROM variants "
            f"WHERE {column} IN ('placing', 'evicting')")]

    def mark(self, tier: str, paths: Iterable[str], state: str | None) -> None:
        self.db.executemany(f"UPDATE variants SET {_column(tier)} = ? WHERE path = ?",
                            [(state, p) for p in paths])

    def forget_tier(self, tier: str) -> None:
        """The tier was found empty (a reboot, a new disk): it holds nothing."""
        self.db.execute(f"UPDATE variants SET {_column(tier)} = NULL")
        self.db.execute("DELETE FROM written WHERE tier = ?", (_column(tier),))

    # --- what warm itself wrote (cache/identity.py) ---------------------------------------------

    def note_written(self, tier: str, found: dict[str, Identity]) -> None:
        """The identity of each file warm just placed in ``tier``."""
        self.db.executemany("INSERT OR REPLACE INTO written VALUES (?, ?, ?, ?, ?, ?)",
                            [(_column(tier), path, *known) for path, known in found.items()])

    def written(self, tier: str, paths: Iterable[str]) -> dict[str, Identity]:
        """path -> identity of those of ``paths`` warm recorded writing in ``tier``."""
        found: dict[str, Identity] = {}
        batch = list(paths)
        for start in range(0, len(batch), _IN_CHUNK):
            part = batch[start:start + _IN_CHUNK]
            for path, dev, ino, mtime_ns, size in self.db.execute(
                    "SELECT path, dev, ino, mtime_ns, size FROM written WHERE tier = ? AND "
                    f"path IN ({','.join('?' * len(part))})", [_column(tier), *part]):
                found[path] = Identity(dev, ino, mtime_ns, size)
        return found

    def sizes(self, paths: Iterable[str], *, placed_in: str | None = None) -> dict[str, int]:
        """path -> bytes of those of ``paths`` the index knows (and ``placed_in`` that tier
        holds, whole)."""
        where = "" if placed_in is None else f" AND {_column(placed_in)} = 'placed'"
        found: dict[str, int] = {}
        batch = list(paths)
        for start in range(0, len(batch), _IN_CHUNK):
            part = batch[start:start + _IN_CHUNK]
            marks = ",".join("?" * len(part))
            found.update(self.db.execute(
                f"SELECT path, bytes FROM variants WHERE path IN ({marks}){where}", part))
        return found


def known_in(index: str | Path, paths: list[str]) -> set[str]:
    """Of ``paths``, those the index file holds a row for (committed), read through this
    process's own read-only connection: for a forked log parser, where the run's ``Index``
    is not to be used."""
    found: set[str] = set()
    db = _reader(str(index))
    for start in range(0, len(paths), _IN_CHUNK):
        part = paths[start:start + _IN_CHUNK]
        found.update(row[0] for row in db.execute(
            f"SELECT path FROM variants WHERE path IN ({','.join('?' * len(part))})", part))
    return found


_readers: dict[tuple[int, str], sqlite3.Connection] = {}


def _reader(index: str) -> sqlite3.Connection:
    """A read-only connection of this process (one made before a fork is not the child's)."""
    mine = (os.getpid(), index)
    if mine not in _readers:
        uri = Path(index).resolve().as_uri() + "?mode=ro"
        _readers[mine] = sqlite3.connect(uri, uri=True)
    return _readers[mine]


def _density(score: str, prior: str, size: str) -> str:
    """rank.density as an SQL expression (a Python function called for every row of a large
    update costs more than the update)."""
    return f"(({score}) + ({prior})) * 1.0 / ((max(({size}), 1) + {PAGE - 1}) / {PAGE} * {PAGE})"


def _estimate(v: str) -> str:
    """rank.estimate as an SQL expression of table ``v`` and :now, :half_life."""
    age = f"max(:now - {v}.born, {AGE_FLOOR})"
    return (f"(CASE WHEN {v}.born IS NULL OR {age} >= {YOUNG_FOR} * :half_life THEN {v}.score "
            f"ELSE {v}.score / (1.0 - power(2.0, -{age} / :half_life)) END)")


def _width_class(v: str) -> str:
    """rank.width_class as an SQL expression of table ``v``."""
    return f"CAST(round(2 * log2(max({v}.width, 1))) AS INTEGER)"


def _column(tier: str) -> str:
    if tier not in TIERS:
        raise ValueError(f"no tier {tier!r}")
    return tier
