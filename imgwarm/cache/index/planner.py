"""The incremental planner: what a tier with a budget should hold (rank.choose's choice),
found without reading every row it keeps. The chosen are a prefix of the ranking, up to the
first candidate that does not fit (the cut), plus a few that fit past it; the cut moves
little between runs, so a run reads the rows that moved. A part of ``Index`` (core.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple, cast

from imgwarm.cache.index.rows import column as column_of
from imgwarm.cache.index.states import States
from imgwarm.cache.policy import role_of
from imgwarm.cache.rank import ANY_WIDTH, Candidate, choose, pages


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


class Planner(States):
    """The planning part of ``Index`` (it reads tier states)."""

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
        column = column_of(tier)
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
        column = column_of(tier)
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
        bounded = role_of(column).width_bounded  # (it has an index of what it holds by width)
        if bounded or where["width"] < ANY_WIDTH:  # (else none is wider)
            wide = f"kept_wide_{column}" if bounded else f"kept_{column}"
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
