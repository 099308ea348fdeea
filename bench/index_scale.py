"""The index's part of a quiet warm at the size of a big store (issue 41): a real ``warm`` with
nothing changed, and one with a few uploads and log lines, on an index of N sources (two
variants each, all on NVMe, a tenth in RAM) made directly as rows, and the time its SQL took
(every statement timed on the run's own connection), which must not grow with N.

The rows are what placing the sources would leave (as bench/warm.py's ``scale`` part makes
them); the files of the few uploads are real, on the origin and in the manifest store, so
the run reads them from the journal and copies them. The end-to-end figures of every
store-wide command are bench/scale.py's; this one is the index alone.

Usage (root, for the tmpfs; small sizes while others work, 1M on a quiet machine):
    .venv/bin/python bench/index_scale.py                       # 10k, 100k
    .venv/bin/python bench/index_scale.py --sizes 10000,100000,1000000 --runs 5 --json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from common import (  # bench/common.py (puts the repo on the path)
    index_references,
    mount,
    settings_for,
    unmount,
)

from imgwarm.cache.identity import Identity
from imgwarm.cache.index import Index
from imgwarm.cache.rank import density
from imgwarm.cache.tiers import Tiers
from imgwarm.cache.warm import warm
from imgwarm.config import Settings
from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.naming import file_name
from imgwarm.store import Stores
from tests.support.logs import requests, write_log


class Timed:
    """An index's connection whose statements are timed (the SQL's share of a run)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.seconds = 0.0
        self.statements = 0
        self.by_statement: dict[str, float] = {}

    def _took(self, sql: str, started: float, count: bool = True) -> None:
        took = time.perf_counter() - started
        self.seconds += took
        self.statements += count
        key = " ".join(sql.split())[:160]
        self.by_statement[key] = self.by_statement.get(key, 0.0) + took

    def execute(self, sql: str, params: Any = ()) -> Any:
        started = time.perf_counter()
        cursor = self._db.execute(sql, params)
        self._took(sql, started)
        return _Rows(self, sql, cursor)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        rows = list(rows)
        started = time.perf_counter()
        done = self._db.executemany(sql, rows)
        self._took(sql, started)
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


class _Rows:
    """A cursor whose rows are timed as they are read (as the run reads them: a walk that
    stops early reads no more)."""

    def __init__(self, timed: Timed, sql: str, cursor: sqlite3.Cursor) -> None:
        self._timed, self._sql, self._cursor = timed, sql, cursor

    def __iter__(self) -> _Rows:
        return self

    def __next__(self) -> Any:
        started = time.perf_counter()
        try:
            return next(self._cursor)
        finally:
            self._timed._took(self._sql, started, count=False)

    def fetchone(self) -> Any:
        return next(self, None)

    def fetchall(self) -> list[Any]:
        return list(self)


OPENED: list[Timed] = []
_INIT = Index.__init__


def _timed_init(self: Index, path: Path) -> None:
    _INIT(self, path)
    self.db = Timed(self.db)  # type: ignore[assignment]
    OPENED.append(self.db)  # type: ignore[arg-type]


_FOLDERS: dict[str, str] = {}  # a hash's first digits -> its shard folder (made once)


def _path(stores: Stores, s: int, width: int, fmt: str) -> str:
    """Where the layout puts a variant (what ``stores.place`` says, its folders made once:
    a million paths through pathlib would take minutes)."""
    digest = hashlib.sha256(f"{s}-{width}-{fmt}".encode()).hexdigest()
    layout = stores.layout
    head = digest[:-(-layout.bits * layout.levels // 4)]  # (the digits folder_for reads)
    if head not in _FOLDERS:
        _FOLDERS[head] = str(layout.folder_for(digest))
    return f"{_FOLDERS[head]}/{file_name(f'listing-{s}', digest, fmt, 16)}"


def fill(settings: Settings, sources: int) -> list[str]:
    """An index of ``sources`` sources placed on NVMe (rows), RAM holding what its plan
    chooses (those files made), the tiers claimed, the journal's cursor at its end: what a
    cache server's index holds after its runs. Returns the paths RAM holds."""
    stores = Stores.for_settings(settings.store)
    journal = stores.manifests.changes
    assert journal is not None
    tiers = Tiers.open(settings.cache.ram_root, settings.cache.nvme_root,
                       max_entries=settings.store.max_dir_entries, allow_non_tmpfs=False)
    index = Index(settings.cache.cache_state / "index.sqlite")
    rnd = random.Random(7)
    rows, refs = [], []
    for s in range(sources):
        for width, fmt in ((320, "webp"), (320, "jpeg")):
            path = _path(stores, s, width, fmt)
            size = rnd.randrange(300, 3000)
            score = rnd.paretovariate(1.0) if rnd.random() < 0.5 else 0.0
            rows.append((path, fmt, width, size, score, density(score, 0.0, size)))
            refs.append((f"uploads/{s:09d}.jpg", path))
    rows.sort()
    refs.sort()
    index.db.executemany("INSERT INTO variants (path, format, width, bytes, refs, score, "
                         "density, nvme) VALUES (?, ?, ?, ?, 1, ?, ?, 'placed')", rows)
    index_references(index.db, refs)
    index.note_identities("nvme", {p: Identity(1, i, 0, 1) for i, (p, *_) in enumerate(rows)})
    budget = settings.cache.ram_budget
    assert budget is not None
    hot, _ = index.plan("ram", budget.of(tiers.ram.space()[0]), max_width=640, page=4096)
    for path, size in hot.items():
        target = settings.cache.ram_root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bytes(size))
    index.mark("ram", hot, "placed")
    for tier in tiers:
        index.remember(f"tier:{tier.name}", tier.new_identity())
    index.remember("changes", journal.now())
    index.close(keep=True)
    return list(hot)


def upload(settings: Settings, count: int, seed: int) -> list[Manifest]:
    """``count`` new sources, their variant files on the origin and their records written
    (the journal says they changed)."""
    stores = Stores.for_settings(settings.store)
    made = []
    for s in range(count):
        variants = []
        for width in (320, 640):
            data = random.Random(seed * 1000 + s * 10 + width).randbytes(2000)
            name = file_name(f"new-{seed}-{s}", hashlib.sha256(data).hexdigest(), "webp", 16)
            path = stores.path_of(name)
            stores.origin.write(path, data)
            variants.append(Variant(format="webp", width=width, height=width * 2 // 3,
                                    bytes=len(data), path=str(path)))
        manifest = Manifest(key=f"new/{seed}/{s}.jpg", source_sha256="0" * 64, width=640,
                            height=427, settings_digest="bench", variants=variants)
        stores.manifests.put(manifest)
        made.append(manifest)
    return made


def _run(settings: Settings) -> tuple[float, float, int, list[tuple[str, float]]]:
    """One warm: (its seconds, its SQL's, its statements, its slowest statements)."""
    OPENED.clear()
    started = time.perf_counter()
    report = warm(settings)
    took = time.perf_counter() - started
    assert report.nvme.failed == 0 and report.ram.failed == 0, report
    db = OPENED[0]
    slowest = sorted(db.by_statement.items(), key=lambda item: -item[1])[:3]
    return took, db.seconds, db.statements, slowest


def bench(sizes: list[int], runs: int) -> dict[str, Any]:
    Index.__init__ = _timed_init  # type: ignore[method-assign]
    found: dict[str, Any] = {}
    for sources in sizes:
        base = Path(tempfile.mkdtemp(prefix="imgwarm-index-scale-", dir="/var/tmp"))
        ram = base / "ram"
        mount(ram, "64m")
        try:
            settings = settings_for(base, ram, ram_budget="16m", ram_max_width=640)
            log = base / "access.log"
            log.touch()
            settings = settings.updated(access_logs=str(log))
            started = time.perf_counter()
            hot = fill(settings, sources)
            filled = time.perf_counter() - started
            warm(settings)  # settles RAM's placement once, as the server's runs would have
            quiet = [_run(settings) for _ in range(runs)]
            few = []
            for run in range(runs):
                new = upload(settings, 2, seed=run)
                write_log(log, requests({new[0].variants[0].path: 2, hot[run]: 1}, time.time()),
                          append=True)
                few.append(_run(settings))
            size = (settings.cache.cache_state / "index.sqlite").stat().st_size
            found[str(sources)] = {
                "fill_seconds": filled, "bytes_a_source": size / sources,
                "quiet_seconds": statistics.median(r[0] for r in quiet),
                "quiet_sql_seconds": statistics.median(r[1] for r in quiet),
                "quiet_statements": quiet[0][2],
                "few_seconds": statistics.median(r[0] for r in few),
                "few_sql_seconds": statistics.median(r[1] for r in few),
                "few_statements": few[0][2],
                "quiet_runs": [r[:2] for r in quiet], "few_runs": [r[:2] for r in few],
                "slowest": {"quiet": quiet[-1][3], "few": few[-1][3]}}
        finally:
            unmount(ram)
            shutil.rmtree(base, ignore_errors=True)
    return found


def table(found: dict[str, Any]) -> str:
    lines = ["| sources | index B/source | quiet warm | its SQL | few uploads | its SQL |",
             "|---:|---:|---:|---:|---:|---:|"]
    for sources, f in found.items():
        lines.append(f"| {int(sources):,} | {f['bytes_a_source']:.0f} | "
                     + " | ".join(f"{f[k] * 1000:.1f} ms" for k in (
                         "quiet_seconds", "quiet_sql_seconds", "few_seconds",
                         "few_sql_seconds")) + " |")
    sizes = list(found)
    if len(sizes) > 1:
        first, last = found[sizes[0]], found[sizes[-1]]
        growth = ", ".join(f"{k} {last[k] / first[k]:.2f}x" for k in (
            "quiet_seconds", "quiet_sql_seconds", "few_seconds", "few_sql_seconds"))
        lines.append(f"\ngrowth {sizes[0]} -> {sizes[-1]}: {growth}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="sources in each index, comma-separated (default 10k, 100k)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind (median)")
    parser.add_argument("--json", action="store_true", help="the raw figures, as JSON")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        sys.exit(f"--sizes: a comma-separated list of numbers, not {args.sizes!r}")
    found = bench(sizes, args.runs)
    print(json.dumps(found, indent=2) if args.json else table(found))


if __name__ == "__main__":
    main()
