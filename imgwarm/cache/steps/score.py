"""Hotness: what is new in the access logs, each successful request to a variant weighed by
its time (rank.py) and added to its score; a hot list pins paths (first in every tier that
takes them, whatever their density)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from imgwarm.cache.logs import Hits, log_files, read_logs
from imgwarm.cache.placeable import Placeable, key_text, url_key
from imgwarm.cache.run import Run
from imgwarm.exceptions import StorageError

# A hot list is a file someone wrote: bounded, as every file read is. 32 MiB holds some
# 400,000 paths, more than a RAM tier places; a path is never longer than PATH_MAX.
MAX_HOT_LIST = 32 << 20
MAX_HOT_LINE = 4096


def read_access_logs(run: Run) -> None:
    """Scores from the log lines written since the last run (each file's position is kept)."""
    positions: dict[str, int] = run.index.meta("logs", {})
    index = run.index
    placeable = Placeable(run.cache.image_prefix, run.stores.layout, str(index.path),
                          frozenset(run.uncommitted))  # (the file: committed by sources.read)
    hits: Hits = read_logs(log_files(run.access_logs), run.parser, positions, run.decay,
                           run.now, placeable)
    # by variant key, checked as read: unsafe paths counted and dropped there
    weights = {key_text(k): w for k, w in hits.by_path.items()}
    counts = {key_text(k): c for k, c in hits.count_by_path.items()}
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
    lines, too_long = read_hot_list(run.hot_list)
    found = [url_key(line, run.cache.image_prefix) for line in lines]
    run.report.unsafe_paths += too_long + sum(1 for k in found if k is None)
    known = set(run.index.sizes({k for k in found if k is not None}))
    run.changed = run.index.set_pinned(known) or run.changed


def read_hot_list(path: Path) -> tuple[list[bytes], int]:
    """The paths of a hot list (stripped, blank lines left out) and how many lines were longer
    than MAX_HOT_LINE (skipped). Opened without blocking and refused unless a regular file
    (a FIFO would wait for ever, /dev/zero never end) of at most MAX_HOT_LIST bytes:
    StorageError, one line."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        raise StorageError(f"cannot read the hot list {path}: {error.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise StorageError(f"the hot list {path} is not a regular file: give a file "
                                   "of paths, one a line")
            data = handle.read(MAX_HOT_LIST + 1)  # (it may have grown since fstat)
        except OSError as error:
            raise StorageError(f"cannot read the hot list {path}: {error.strerror}") from None
    if max(info.st_size, len(data)) > MAX_HOT_LIST:
        raise StorageError(f"the hot list {path} is larger than {MAX_HOT_LIST >> 20} MiB: "
                           "a hot list names the few paths to pin, one a line")
    lines = [line.strip() for line in data.splitlines()]
    kept = [line for line in lines if line and len(line) <= MAX_HOT_LINE]
    return kept, sum(1 for line in lines if len(line) > MAX_HOT_LINE)
