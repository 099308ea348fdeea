"""The index: what ``warm`` knows between runs, in SQLite (the standard library's), so that a
run costs what changed, not what is placed.

One row a variant: its size and width, how many sources reference it, its score and prior
(rank.py) and density, and its state in each tier: NULL (not there), ``placing`` (being
copied), ``placed``, ``evicting`` (being removed). A state is committed before the file
operation and settled after it, so a run killed at any point leaves rows that the next run
finishes (``recover``): the index and the tiers never disagree for longer than one run.
Partial indexes give each run only the rows it acts on: variants wanted but not on NVMe,
variants no source references any more, what RAM holds.

Every SQL statement on the index is in this module, its scores' (scores.py, a part of
``Index``) and its schema's (schema.py: the version in ``PRAGMA user_version`` and the
migrations); rows come out as named tuples (``Row``,
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
from imgwarm.cache.rank import ANY_WIDTH, Candidate, choose, pages
from imgwarm.cache.schema import TALLY_PAGE, migrate, tallies
from imgwarm.cache.scores import IN_CHUNK, Scores, density_sql
from imgwarm.manifest import Variant

TIERS = ("ram", "nvme")
# tiers with an index of what they hold by width (NVMe's policy takes every width: its own
# index would be a tenth of the index's bytes, never read; a plan of it that bounds the
# width reads what it holds)
_WIDTH_BOUNDED = ("ram",)


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


class Index(Scores):
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
        # each source by its id (schema.py: a key is kept once, not once a variant); a new
        # one that references anything gets one
        self.db.executemany("INSERT OR IGNORE INTO sources (key) VALUES (?)",
                            [(key,) for key, (variants, _) in wanted.items() if variants])
        ids = self._source_ids(list(wanted))
        old: dict[str, set[str]] = {key: set() for key in wanted}
        by_id = {number: key for key, number in ids.items()}
        numbers = list(by_id)
        for at in range(0, len(numbers), IN_CHUNK):
            chunk = numbers[at:at + IN_CHUNK]
            for number, path in self.db.execute(
                    "SELECT source, path FROM refs "
                    f"WHERE source IN ({','.join('?' * len(chunk))})", chunk):
                old[by_id[number]].add(path)
        added: list[tuple[str, Variant, float]] = []
        dropped: list[tuple[int, str]] = []
        for key, (variants, prior) in wanted.items():
            new = {v.path: v for v in variants}
            added.extend((key, v, prior) for path, v in new.items() if path not in old[key])
            dropped.extend((ids[key], path) for path in old[key] if path not in new)
        # a new variant row starts referenced (its partial indexes written once, not moved
        # by a second statement); one already there gains a reference
        self.db.executemany(
            "INSERT INTO variants (path, format, width, bytes, refs, prior, density, born) "
            f"VALUES (?, ?, ?, ?, 1, ?, {density_sql('0', '?', '?')}, ?) "
            "ON CONFLICT (path) DO UPDATE SET refs = refs + 1",
            [(v.path, v.format, v.width, v.bytes, prior, prior, v.bytes, born.get(key))
             for key, v, prior in added])
        self.db.executemany("INSERT INTO refs VALUES (?, ?)",
                            [(ids[k], v.path) for k, v, _ in added])
        self.db.executemany("DELETE FROM refs WHERE source = ? AND path = ?", dropped)
        self.db.executemany("DELETE FROM sources WHERE id = ?",  # (gone: nothing named)
                            [(ids[key],) for key, (variants, _) in wanted.items()
                             if not variants and key in ids])
        when = time.time() if now is None else now
        self.db.executemany(  # (SET reads the row as it was: refs before the update)
            "UPDATE variants SET refs = refs - 1, "
            "dropped = CASE WHEN refs <= 1 THEN ?1 ELSE dropped END WHERE path = ?2",
            [(when, path) for _, path in dropped])
        return len(added), len(dropped)

    def _source_ids(self, keys: list[str]) -> dict[str, int]:
        """key -> id of those of ``keys`` the index has a source for."""
        found: dict[str, int] = {}
        for at in range(0, len(keys), IN_CHUNK):
            chunk = keys[at:at + IN_CHUNK]
            found.update(self.db.execute(
                f"SELECT key, id FROM sources WHERE key IN ({','.join('?' * len(chunk))})",
                chunk))
        return found

    def source_keys(self) -> set[str]:
        """Every source key that references a variant (as ``stored`` keeps it)."""
        return {key for (key,) in self.db.execute("SELECT key FROM sources")}

    def forget_unreferenced(self) -> None:
        """Rows of variants nobody references and no tier holds."""
        self.db.execute("DELETE FROM variants WHERE refs = 0 AND ram IS NULL AND nvme IS NULL")

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
        self.remember(f"chose:{column}", taken + sum(pages(s, page) for s in past.values()))
        return place, evict

    def last_plan(self, tier: str) -> tuple[int | None, bool]:
        """What ``plan`` last chose for a tier: its pages (None: never planned), and whether
        that was every candidate (no cut)."""
        column = _column(tier)
        return self.meta(f"chose:{column}"), self.meta(f"cut:{column}") is None

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
        if column in _WIDTH_BOUNDED or where["width"] < ANY_WIDTH:  # (else none is wider)
            wide = f"kept_wide_{column}" if column in _WIDTH_BOUNDED else f"kept_{column}"
            found.update(self.db.execute(
                f"SELECT path, bytes FROM variants INDEXED BY {wide} "
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
        """What a tier holds or is being given, counted in whole pages of ``page`` bytes too:
        the tallies its triggers keep (schema.py), read in one row; counted from the tier's
        rows only for a page they do not count in."""
        column = _column(tier)
        files, size, units, paged = self.db.execute(
            "SELECT files, bytes, units, pages FROM held WHERE tier = ?", (column,)).fetchone()
        if page == 1:
            return Totals(int(files), int(size), int(units))
        if page == TALLY_PAGE:
            return Totals(int(files), int(size), int(paged) * TALLY_PAGE)
        row = self.db.execute(
            f"SELECT count(*), total(bytes), total((max(bytes, 1) + ?1 - 1) / ?1 * ?1) "
            f"FROM variants WHERE {column} IS NOT NULL", (page,)).fetchone()
        return Totals(int(row[0]), int(row[1]), int(row[2]))

    def missing(self, tier: str) -> list[tuple[str, int]]:
        """(path, bytes) of every referenced variant a tier neither holds nor is given (NVMe's
        from its own partial index: what is new since the last run)."""
        column = _column(tier)
        indexed = " INDEXED BY need_nvme" if column == "nvme" else ""
        return list(self.db.execute(
            f"SELECT path, bytes FROM variants{indexed} WHERE refs > 0 AND {column} IS NULL"))

    def unreferenced(self) -> list[Row]:
        """Variants no source references that a tier holds."""
        return [Row(*row) for row in self.db.execute(
            f"SELECT {_ROW} FROM variants "
            "WHERE refs = 0 AND (ram IS NOT NULL OR nvme IS NOT NULL)")]

    def states(self, paths: Iterable[str]) -> dict[str, Row]:
        """path -> row of those of ``paths`` the index knows."""
        found: dict[str, Row] = {}
        batch = list(paths)
        for start in range(0, len(batch), IN_CHUNK):
            part = batch[start:start + IN_CHUNK]
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
            f"SELECT path, bytes, {column} FROM variants INDEXED BY unsettled_{column} "
            f"WHERE {column} IN ('placing', 'evicting')")]

    def mark(self, tier: str, paths: Iterable[str], state: str | None) -> None:
        """Set the state of ``paths`` in ``tier``; what the tier holds (``held``, schema.py)
        follows the rows that come into it or leave it."""
        column = _column(tier)
        batch = list(paths)
        # (the rows that change sides, read before they do: by key, a batch at a time)
        now = "IS NULL" if state is not None else "IS NOT NULL"
        sign = 1 if state is not None else -1
        for start in range(0, len(batch), IN_CHUNK):
            part = batch[start:start + IN_CHUNK]
            files, size, units, paged = self.db.execute(
                "SELECT count(*), total(bytes), total(max(bytes, 1)), "
                f"total((max(bytes, 1) + {TALLY_PAGE - 1}) / {TALLY_PAGE}) FROM variants "
                f"WHERE path IN ({','.join('?' * len(part))}) AND {column} {now}",
                part).fetchone()
            if files:
                self.db.execute(
                    "UPDATE held SET files = files + ?1 * ?2, bytes = bytes + ?1 * ?3, "
                    "units = units + ?1 * ?4, pages = pages + ?1 * ?5 WHERE tier = ?6",
                    (sign, files, int(size), int(units), int(paged), column))
        self.db.executemany(f"UPDATE variants SET {column} = ? WHERE path = ?",
                            [(state, p) for p in batch])

    def recount(self) -> None:
        """The tallies (what each tier holds, the requests' totals) counted from every row."""
        tallies(self.db)

    def forget_tier(self, tier: str) -> None:
        """The tier was found empty (a reboot, a new disk): it holds nothing."""
        self.db.execute(f"UPDATE variants SET {_column(tier)} = NULL")
        self.db.execute("UPDATE held SET files = 0, bytes = 0, units = 0, pages = 0 "
                        "WHERE tier = ?", (_column(tier),))
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
        for start in range(0, len(batch), IN_CHUNK):
            part = batch[start:start + IN_CHUNK]
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
        for start in range(0, len(batch), IN_CHUNK):
            part = batch[start:start + IN_CHUNK]
            marks = ",".join("?" * len(part))
            found.update(self.db.execute(
                f"SELECT path, bytes FROM variants WHERE path IN ({marks}){where}", part))
        return found

    # --- first fill ---

    def listing_started(self) -> None:
        """A listing of every source begins: the keys it finds are kept in a temporary table
        (in SQLite's cache, then its temporary file: not a set that grows with the store),
        so that after it the sources it did not find can be told."""
        self.db.execute(
            "CREATE TEMP TABLE IF NOT EXISTS listed (key TEXT PRIMARY KEY) WITHOUT ROWID")
        self.db.execute("DELETE FROM temp.listed")

    def listed(self, keys: Iterable[str]) -> None:
        """Keys the listing found (as ``stored`` keeps them)."""
        self.db.executemany("INSERT OR IGNORE INTO temp.listed VALUES (?)",
                            ((key,) for key in keys))

    def unlisted(self, batch: int = 1024) -> Iterator[list[str]]:
        """The keys that reference a variant and that the listing did not find, a batch at a
        time in key order (each read after the last: the caller may drop them meanwhile)."""
        last = ""
        while True:
            found = [key for (key,) in self.db.execute(
                "SELECT key FROM sources WHERE key > ? AND key NOT IN "
                "(SELECT key FROM temp.listed) ORDER BY key LIMIT ?", (last, batch))]
            if not found:
                return
            yield found
            last = found[-1]


def known_in(index: str | Path, paths: list[str]) -> set[str]:
    """Of ``paths``, those the index file holds a row for (committed), read through this
    process's own read-only connection: for a forked log parser, where the run's ``Index``
    is not to be used."""
    found: set[str] = set()
    db = _reader(str(index))
    for start in range(0, len(paths), IN_CHUNK):
        part = paths[start:start + IN_CHUNK]
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


def _column(tier: str) -> str:
    if tier not in TIERS:
        raise ValueError(f"no tier {tier!r}")
    return tier
