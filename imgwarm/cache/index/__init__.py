"""The index: what ``warm`` knows between runs, in SQLite (the standard library's), so that a
run costs what changed, not what is placed.

One row a variant: its size and width, how many sources reference it, its score and prior
(rank.py) and density, and its state in each tier: NULL (not there), ``placing`` (being
copied), ``placed``, ``evicting`` (being removed). A state is committed before the file
operation and settled after it, so a run killed at any point leaves rows that the next run
finishes (``recover``): the index and the tiers never disagree for longer than one run.
Partial indexes give each run only the rows it acts on: variants wanted but not on NVMe,
variants no source references any more, what RAM holds.

Every SQL statement on the index is in this package, one concept a module:

    schema.py    the version (``PRAGMA user_version``) and the numbered migrations
    core.py      ``Index``: the connection and its transactions, made of the parts below
    sources.py   which variants each source references; a listing of every source
    scores.py    request weights, densities and re-ranking
    planner.py   what a tier with a budget should hold, read from what moved
    states.py    each tier's state of each variant, their tallies, what warm wrote
    meta.py      the connection and the meta values every part shares
    rows.py      rows as named tuples, each tier's state column (named by cache/policy.py)
    reader.py    the index file read by a log parser, in its own process
"""

from imgwarm.cache.index.core import Index
from imgwarm.cache.index.reader import IndexReader
from imgwarm.cache.index.rows import Pending, Row, Totals

__all__ = ["Index", "IndexReader", "Pending", "Row", "Totals"]
