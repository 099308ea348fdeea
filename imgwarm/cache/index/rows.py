"""The index's rows as named tuples (``Row``, ``Pending``, ``Totals``), each tier's state
column named by the tier (cache/policy.py names the tiers), and the batching of keys that a
query names."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

from imgwarm.cache.policy import TIERS, role_of

IN_CHUNK = 500  # keys a query names (SQLite allows 32,766 parameters: far from it)
STATES = ", ".join(TIERS)  # each tier's state column, in the tiers' order
ROW = f"path, refs, bytes, {STATES}"  # a Row's columns, in its order
HELD_ANYWHERE = " OR ".join(f"{t} IS NOT NULL" for t in TIERS)  # a tier holds it


class Row(NamedTuple):
    """A variant as the tiers see it: its references, its size and its state in each tier
    (None: not there; ``placing``, ``placed``, ``evicting``), in the tiers' order."""

    path: str
    refs: int
    bytes: int
    states: tuple[str | None, ...]

    @classmethod
    def read(cls, columns: tuple[Any, ...]) -> Row:
        """A row from ``ROW``'s columns."""
        return cls(columns[0], columns[1], columns[2], tuple(columns[3:]))

    def state(self, tier: str) -> str | None:
        """Its state in ``tier``."""
        return self.states[TIERS.index(column(tier))]


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


def column(tier: str) -> str:
    """The column that keeps ``tier``'s state (its name); ValueError for no tier."""
    return role_of(tier).name


T = TypeVar("T")


def chunks(items: Sequence[T]) -> Iterator[tuple[list[T], str]]:
    """``items`` a batch at a time, each with its ``?`` marks for an ``IN (...)``."""
    for start in range(0, len(items), IN_CHUNK):
        part = list(items[start:start + IN_CHUNK])
        yield part, ",".join("?" * len(part))
