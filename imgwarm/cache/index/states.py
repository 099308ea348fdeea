"""Tier states in the index: what each tier holds, is being given or is losing, the tallies
of it, what a killed run left unsettled, and the identity of each file warm itself wrote
(cache/identity.py). A part of ``Index`` (core.py), on its connection."""

from __future__ import annotations

from collections.abc import Iterable

from imgwarm.cache.identity import Identity
from imgwarm.cache.index.meta import Part
from imgwarm.cache.index.rows import HELD_ANYWHERE, ROW, Pending, Row, Totals, chunks, column
from imgwarm.cache.index.schema import TALLY_PAGE, tallies
from imgwarm.cache.policy import BACKING


class States(Part):
    """The tier-state part of ``Index``."""

    def held(self, tier: str) -> dict[str, int]:
        """What a tier holds or is being given: path -> bytes."""
        name = column(tier)
        return dict(self.db.execute(
            f"SELECT path, bytes FROM variants WHERE {name} IS NOT NULL"))

    def totals(self, tier: str, page: int) -> Totals:
        """What a tier holds or is being given, counted in whole pages of ``page`` bytes too:
        the tallies its triggers keep (schema.py), read in one row; counted from the tier's
        rows only for a page they do not count in."""
        name = column(tier)
        files, size, units, paged = self.db.execute(
            "SELECT files, bytes, units, pages FROM held WHERE tier = ?", (name,)).fetchone()
        if page == 1:
            return Totals(int(files), int(size), int(units))
        if page == TALLY_PAGE:
            return Totals(int(files), int(size), int(paged) * TALLY_PAGE)
        row = self.db.execute(
            f"SELECT count(*), total(bytes), total((max(bytes, 1) + ?1 - 1) / ?1 * ?1) "
            f"FROM variants WHERE {name} IS NOT NULL", (page,)).fetchone()
        return Totals(int(row[0]), int(row[1]), int(row[2]))

    def missing(self, tier: str) -> list[tuple[str, int]]:
        """(path, bytes) of every referenced variant a tier neither holds nor is given (the
        backing tier's from its own partial index: what is new since the last run)."""
        name = column(tier)
        indexed = f" INDEXED BY need_{name}" if name == BACKING else ""
        return list(self.db.execute(
            f"SELECT path, bytes FROM variants{indexed} WHERE refs > 0 AND {name} IS NULL"))

    def unreferenced(self) -> list[Row]:
        """Variants no source references that a tier holds."""
        return [Row.read(row) for row in self.db.execute(
            f"SELECT {ROW} FROM variants WHERE refs = 0 AND ({HELD_ANYWHERE})")]

    def states(self, paths: Iterable[str]) -> dict[str, Row]:
        """path -> row of those of ``paths`` the index knows."""
        found: dict[str, Row] = {}
        for part, marks in chunks(list(paths)):
            for row in self.db.execute(
                    f"SELECT {ROW} FROM variants WHERE path IN ({marks})", part):
                found[row[0]] = Row.read(row)
        return found

    def unreferenced_before(self, cutoff: float, now: float) -> dict[str, Row]:
        """Variants a tier holds that no source has referenced since before ``cutoff``:
        path -> row. Rows from before such stamps are stamped ``now`` (their grace starts
        here)."""
        self.db.execute("UPDATE variants SET dropped = ? WHERE refs = 0 AND dropped IS NULL",
                        (now,))
        return {row[0]: Row.read(row) for row in self.db.execute(
            f"SELECT {ROW} FROM variants WHERE refs = 0 AND dropped < ? "
            f"AND ({HELD_ANYWHERE})", (cutoff,))}

    def unsettled(self, tier: str) -> list[Pending]:
        """What a killed run left being placed in or evicted from ``tier``."""
        name = column(tier)
        return [Pending(*row) for row in self.db.execute(
            f"SELECT path, bytes, {name} FROM variants INDEXED BY unsettled_{name} "
            f"WHERE {name} IN ('placing', 'evicting')")]

    def mark(self, tier: str, paths: Iterable[str], state: str | None) -> None:
        """Set the state of ``paths`` in ``tier``; what the tier holds (``held``, schema.py)
        follows the rows that come into it or leave it."""
        name = column(tier)
        batch = list(paths)
        # (the rows that change sides, read before they do: by key, a batch at a time)
        now = "IS NULL" if state is not None else "IS NOT NULL"
        sign = 1 if state is not None else -1
        for part, marks in chunks(batch):
            files, size, units, paged = self.db.execute(
                "SELECT count(*), total(bytes), total(max(bytes, 1)), "
                f"total((max(bytes, 1) + {TALLY_PAGE - 1}) / {TALLY_PAGE}) FROM variants "
                f"WHERE path IN ({marks}) AND {name} {now}", part).fetchone()
            if files:
                self.db.execute(
                    "UPDATE held SET files = files + ?1 * ?2, bytes = bytes + ?1 * ?3, "
                    "units = units + ?1 * ?4, pages = pages + ?1 * ?5 WHERE tier = ?6",
                    (sign, files, int(size), int(units), int(paged), name))
        self.db.executemany(f"UPDATE variants SET {name} = ? WHERE path = ?",
                            [(state, p) for p in batch])

    def recount(self) -> None:
        """The tallies (what each tier holds, the requests' totals) counted from every row."""
        tallies(self.db)

    def forget_tier(self, tier: str) -> None:
        """The tier was found empty (a reboot, a new disk): it holds nothing."""
        self.db.execute(f"UPDATE variants SET {column(tier)} = NULL")
        self.db.execute("UPDATE held SET files = 0, bytes = 0, units = 0, pages = 0 "
                        "WHERE tier = ?", (column(tier),))
        self.db.execute("DELETE FROM written WHERE tier = ?", (column(tier),))

    # --- what warm itself wrote (cache/identity.py) ------------------------------------------

    def note_identities(self, tier: str, found: dict[str, Identity]) -> None:
        """The identity of each file warm just placed in ``tier``."""
        self.db.executemany("INSERT OR REPLACE INTO written VALUES (?, ?, ?, ?, ?, ?)",
                            [(column(tier), path, *known) for path, known in found.items()])

    def known_identities(self, tier: str, paths: Iterable[str]) -> dict[str, Identity]:
        """path -> identity of those of ``paths`` warm recorded writing in ``tier``."""
        found: dict[str, Identity] = {}
        for part, marks in chunks(list(paths)):
            for path, dev, ino, mtime_ns, size in self.db.execute(
                    "SELECT path, dev, ino, mtime_ns, size FROM written WHERE tier = ? AND "
                    f"path IN ({marks})", [column(tier), *part]):
                found[path] = Identity(dev, ino, mtime_ns, size)
        return found

    def sizes(self, paths: Iterable[str], *, placed_in: str | None = None) -> dict[str, int]:
        """path -> bytes of those of ``paths`` the index knows (and ``placed_in`` that tier
        holds, whole)."""
        where = "" if placed_in is None else f" AND {column(placed_in)} = 'placed'"
        found: dict[str, int] = {}
        for part, marks in chunks(list(paths)):
            found.update(self.db.execute(
                f"SELECT path, bytes FROM variants WHERE path IN ({marks}){where}", part))
        return found
