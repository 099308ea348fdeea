"""Sources: the index set from what the manifest store's journal says changed since the last
run (every record on a first run, with ``--full``, or when the journal cannot say). Each
source's variants are wanted; a source gone drops its references; a deleted one's variants
are noted for taking down; new variants start with the prior (rank.py)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from imgwarm.cache import fill
from imgwarm.cache.index import Index
from imgwarm.cache.run import Run
from imgwarm.cache.steps import ahead
from imgwarm.cache.steps.copy import BATCH
from imgwarm.manifest import Manifest, Record, Tombstone
from imgwarm.store.references import key_digest

Found = list[tuple[str, Record | None, float]]  # (key, its record or None: gone, read at)


def read(run: Run) -> None:
    """The index set from the records that changed (all of them when the journal cannot
    say what did), and the journal's cursor moved past them."""
    journal = run.stores.manifests.changes
    cursor = run.index.meta("changes")
    if run.full or journal is None or cursor is None or not journal.readable(cursor):
        fresh = journal.now() if journal is not None else ""
        _listed(run, fill.records(run.stores.manifests,
                                  fill.processes_for(run.cache.fill_processes),
                                  drop=() if run.lock is None else (run.lock,)))
    else:
        batch = journal.since(cursor)
        fresh = batch.cursor
        times = {key: t for t, key in batch.entries}  # the latest change of each key
        with ThreadPoolExecutor(max_workers=16) as pool:
            found = list(pool.map(run.stores.manifests.read, times))
        # a record that cannot be read is not a source gone: what it referenced stays
        damaged = {p.stem for p in run.stores.manifests.damaged}
        run.report.damaged_records = len(damaged)
        readable = [(key, record, times[key])
                    for key, record in zip(times, found, strict=True)
                    if key_digest(key) not in damaged]
        if readable:  # the percentile reads every scored row: only when something is new
            _set_sources(run, readable, run.index.prior(run.decay(run.now)), aged=True)
    if journal is not None:
        run.index.remember("changes", fresh)
    run.commit()


def _listed(run: Run, records: Iterator[Record]) -> None:
    """Every record (a first run, --full): the index set from them as they are read, and
    where the backing tier takes every variant (no budget), their files copied there
    meanwhile. Memory holds a batch of records, whatever the store's size: the keys found
    are kept in the index (``listed``), not in a set."""
    prior_now = run.index.prior(run.decay(run.now))
    run.index.listing_started()
    ahead.prepare(run)
    found: Found = []
    entries: list[tuple[str, int]] = []  # (path, width)
    for record in records:
        found.append((Index.stored(record.key), record, run.now))
        if isinstance(record, Manifest):
            entries.extend((v.path, v.width) for v in record.variants)
        if len(entries) >= BATCH or len(found) >= BATCH:
            _set_sources(run, found, prior_now)
            run.index.listed(key for key, _, _ in found)
            ahead.copy(run, entries)
            found, entries = [], []
    _set_sources(run, found, prior_now)
    run.index.listed(key for key, _, _ in found)
    ahead.copy(run, entries)
    # gone, but for a damaged record's source: what it referenced stays until it is read
    damaged = {p.stem for p in run.stores.manifests.damaged}
    run.report.damaged_records = len(damaged)
    for keys in run.index.unlisted(BATCH):
        gone = [key for key in keys if key_digest(key) not in damaged]
        _set_sources(run, [(key, None, run.now) for key in gone], prior_now)
    ahead.settle(run)


def _set_sources(run: Run, found: Found, prior_now: float, *, aged: bool = False) -> None:
    """The index set from records (None: the source is gone), each read at a time (with
    ``aged``, the journal's time of its change: when its variants were made, from which
    their age counts; a listing's time says nothing of that)."""
    now = run.decay(run.now)
    added, dropped = run.index.set_sources(
        [(key, record.variants if isinstance(record, Manifest) else [],
          prior_now * run.decay(min(when, run.now)) / now)
         for key, record, when in found], run.now,
        born={key: min(when, run.now) for key, _, when in found} if aged else None,
        added_to=run.uncommitted if run.dry_run else None)
    run.taken_down.update(path for _, record, _ in found if isinstance(record, Tombstone)
                          for path in record.variants)
    run.report.variants_added += added
    run.report.variants_dropped += dropped
    run.report.sources += len(found)
    run.changed = run.changed or bool(added or dropped)
