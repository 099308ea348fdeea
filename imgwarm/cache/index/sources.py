"""Sources and their references in the index: which variants each source key references
now, set for many sources at once, and a listing of every source that tells the sources it
did not find. A part of ``Index`` (core.py), on its connection."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping

from imgwarm.cache.index.meta import Part
from imgwarm.cache.index.rows import HELD_ANYWHERE, chunks
from imgwarm.cache.index.scores import density_sql
from imgwarm.manifest import Variant


class Sources(Part):
    """The sources part of ``Index``."""

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
                    born: Mapping[str, float] | None = None,
                    added_to: set[str] | None = None) -> tuple[int, int]:
        """``set_source`` for many sources at once (a statement a kind of change, not one a
        source: a first run sets tens of thousands); a key given twice takes its last. A
        variant that loses its last reference is stamped ``now`` (gc's grace counts from it).
        A new variant's age counts from its source's time in ``born`` (by key as given: when
        its record was written); without one (a first run's listing) it counts as old.
        ``added_to`` gains the paths of the variants a source gained (a dry run's: it never
        commits them, so a log parser reading the index file needs them apart)."""
        born = {self.stored(k): t for k, t in (born or {}).items()}
        wanted = {self.stored(key): (variants, prior) for key, variants, prior in sources}
        # each source by its id (schema.py: a key is kept once, not once a variant); a new
        # one that references anything gets one
        self.db.executemany("INSERT OR IGNORE INTO sources (key) VALUES (?)",
                            [(key,) for key, (variants, _) in wanted.items() if variants])
        ids = self._source_ids(list(wanted))
        old: dict[str, set[str]] = {key: set() for key in wanted}
        by_id = {number: key for key, number in ids.items()}
        for chunk, marks in chunks(list(by_id)):
            for number, path in self.db.execute(
                    f"SELECT source, path FROM refs WHERE source IN ({marks})", chunk):
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
        if added_to is not None:
            added_to.update(v.path for _, v, _ in added)
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
        for chunk, marks in chunks(keys):
            found.update(self.db.execute(
                f"SELECT key, id FROM sources WHERE key IN ({marks})", chunk))
        return found

    def source_keys(self) -> set[str]:
        """Every source key that references a variant (as ``stored`` keeps it)."""
        return {key for (key,) in self.db.execute("SELECT key FROM sources")}

    def forget_unreferenced(self) -> None:
        """Rows of variants nobody references and no tier holds."""
        self.db.execute(f"DELETE FROM variants WHERE refs = 0 AND NOT ({HELD_ANYWHERE})")

    # --- a listing of every source (a first or full run) -------------------------------------

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
