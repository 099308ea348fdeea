"""Hotness: what is new in the access logs, each successful request to a variant weighed by
its time (rank.py) and added to its score; a hot list pins paths (first in every tier that
takes them, whatever their density)."""

from __future__ import annotations

from imgwarm.cache.logs import Hits, log_files, read_logs
from imgwarm.cache.placeable import Placeable, url_key
from imgwarm.cache.run import Run
from imgwarm.exceptions import StorageError


def read_access_logs(run: Run) -> None:
    """Scores from the log lines written since the last run (each file's position is kept)."""
    positions: dict[str, int] = run.index.meta("logs", {})
    index = run.index
    placeable = Placeable(run.cache.image_prefix, run.stores.layout, str(index.path),
                          lambda keys: index.sizes(keys).keys())
    hits: Hits = read_logs(log_files(run.access_logs), run.parser, positions, run.decay,
                           run.now, placeable)
    # by variant key, checked as read: unsafe paths counted and dropped there
    weights = {k.decode("utf-8", "surrogateescape"): w for k, w in hits.by_path.items()}
    counts = {k.decode("utf-8", "surrogateescape"): c for k, c in hits.count_by_path.items()}
    report = run.report
    report.unsafe_paths += hits.unsafe
    known = set(index.sizes(weights))
    index.add_scores({k: w for k, w in weights.items() if k in known})
    index.rerank(known, now=run.now, decay=run.decay)
    report.log_files, report.log_lines = hits.files, hits.lines
    report.requests, report.malformed_lines = hits.counted, hits.malformed
    report.requests_to_variants = sum(counts[k] for k in known)
    run.changed = run.changed or bool(known)
    index.remember("logs", positions)
    run.commit()


def pin(run: Run) -> None:
    """The paths of the hot list pinned, the others unpinned (no hot list: nothing)."""
    if run.hot_list is None:
        return
    try:
        lines = run.hot_list.read_bytes().splitlines()
    except OSError as error:
        raise StorageError(f"cannot read the hot list {run.hot_list}: {error.strerror}") \
            from None
    keys = {url_key(line.strip(), run.cache.image_prefix) for line in lines if line.strip()}
    run.report.unsafe_paths += sum(1 for k in keys if k is None)
    known = set(run.index.sizes(k for k in keys if k is not None))
    run.changed = run.index.set_pinned(known) or run.changed
