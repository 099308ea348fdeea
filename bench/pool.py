"""The pixel-work pool: imgwarm's own (pipeline/isolate.py) against pebble's ProcessPool, with
new interpreters (spawn) or forked from a fork server that imported the pixel steps once,
and against plain threads in one process (no isolation: what isolation costs).

For each: wall time and CPU (the machine's busy seconds: run it quiet) of a batch of corpus
photos made at the default settings, peak RSS and PSS of the process tree (bench/optimize.py's
sampler), and crash isolation: a worker that dies mid-source (SIGABRT, as glibc's "double
free" does) must fail that source alone, every other source of the batch must still be made,
and the pool must go on.

    .venv/bin/pip install -e ".[bench]" && .venv/bin/python bench/pool.py --runs 5

Each contender runs in a subprocess of its own (``--worker KIND``), in turn, the order
turning each run; ratios are against imgwarm's pool, median of the runs. Run it on a quiet
machine (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import HERE, save_results  # bench/common.py
from optimize import DEFAULT_CORPUS, TreeSampler, default_files, machine_busy_s  # (bench/)

KINDS = ("isolate", "pebble-spawn", "pebble-forkserver", "threads")
WORKERS = 2


# --- in the contender's process ------------------------------------------------------------


def _make(data: bytes, name: str, options: Any) -> int:
    """One source's pixel work (what every contender runs), with the image settings as plain
    values (as imgwarm's pool sends them: no pydantic in a worker): the variants' bytes."""
    from imgwarm.carried import Credits
    from imgwarm.pipeline import make

    made = make.make(data, name, options, Credits())
    return sum(len(f.data) for f in made.files)


def _configure(parallel: int) -> None:
    """libvips as imgwarm's workers set it (one thread a source when several run at once):
    every contender alike, so that the pools alone differ."""
    from imgwarm.pipeline.vipsutil import configure_libvips

    configure_libvips(parallel)


class Pool:
    """A contender: submit(data, name) -> Future of the variants' bytes; pids() of workers."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.threads = ThreadPoolExecutor(WORKERS)
        from imgwarm.config import Settings

        self.options = Settings().image.options()
        if kind == "isolate":
            from imgwarm.carried import Credits
            from imgwarm.pipeline.isolate import Isolated

            self.isolated = Isolated(WORKERS)
            self.settings, self.credits = Settings().image, Credits()
        elif kind.startswith("pebble"):
            import pebble  # type: ignore[import-not-found]

            context = multiprocessing.get_context(kind.removeprefix("pebble-"))
            if kind == "pebble-forkserver":  # (one import of the pixel steps, workers forked)
                context.set_forkserver_preload(["imgwarm.pipeline.make"])
            self.pebble = pebble.ProcessPool(max_workers=WORKERS, context=context,
                                             initializer=_configure, initargs=(WORKERS,))
        else:
            _configure(WORKERS)

    def submit(self, data: bytes, name: str) -> Future[int]:
        if self.kind == "isolate":
            def run() -> int:
                made = self.isolated.make(data, name, self.settings, self.credits)
                return sum(len(f.data) for f in made.files)
            return self.threads.submit(run)
        if self.kind == "threads":
            return self.threads.submit(_make, data, name, self.options)
        future: Future[int] = self.pebble.schedule(_make, args=(data, name, self.options),
                                                   timeout=600)
        return future

    def pids(self) -> list[int]:
        if self.kind == "isolate":
            return self.isolated.pids()
        if self.kind == "threads":
            return []
        # (pebble's own table of its workers, by pid: the pool does not say otherwise)
        return list(self.pebble._pool_manager.worker_manager.workers)

    def close(self) -> None:
        if self.kind == "isolate":
            self.isolated.close()
        elif self.kind.startswith("pebble"):
            self.pebble.close()
            self.pebble.join()
        self.threads.shutdown()


def _results(futures: list[Future[int]]) -> list[Any]:
    """Each future's value, or what it raised (what each pool says of a dead worker)."""
    found: list[Any] = []
    for future in futures:
        try:
            found.append(future.result())
        except Exception as error:
            found.append(error)
    return found


def _batch(pool: Pool, files: list[tuple[bytes, str]]) -> list[Any]:
    return _results([pool.submit(data, name) for data, name in files])


def _crash_one(pool: Pool, files: list[tuple[bytes, str]]) -> dict[str, Any]:
    """A batch during which one worker dies mid-source (SIGABRT while every worker is busy),
    then a batch after it: what failed and whether the pool went on."""
    futures = [pool.submit(data, name) for data, name in files]
    time.sleep(0.3)  # (each source takes longer: every worker holds one)
    victims = pool.pids()
    if not victims:
        return {"isolated": False, "why": "no worker processes"}
    os.kill(victims[0], signal.SIGABRT)
    during = _results(futures)
    after = _batch(pool, files[:WORKERS * 2])
    failed = [f"{type(r).__name__}: {r}" for r in during if isinstance(r, Exception)]
    return {"failed": len(failed), "made": sum(not isinstance(r, Exception) for r in during),
            "of": len(during), "errors": failed[:2],
            "after": sum(not isinstance(r, Exception) for r in after),
            "after_of": len(after)}


def worker(kind: str, paths: list[Path], crash: bool) -> None:
    files = [(p.read_bytes(), p.name) for p in paths]
    start = time.perf_counter()
    pool = Pool(kind)
    try:
        results = _batch(pool, files)
        wall = time.perf_counter() - start
        report: dict[str, Any] = {
            "wall_s": wall,
            "made": sum(not isinstance(r, Exception) for r in results),
            "bytes": sum(r for r in results if not isinstance(r, Exception))}
        if crash:  # (after the timing: a run with a crash is not timed)
            report["crash"] = _crash_one(pool, files[:6])
    finally:
        pool.close()
    print(json.dumps(report))


# --- the driver ------------------------------------------------------------------------------


@contextmanager
def _sampled(pid: int) -> Iterator[TreeSampler]:
    sampler = TreeSampler(pid)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


def _one(kind: str, paths: list[Path], crash: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)])}
    command = [sys.executable, str(Path(__file__)), "--worker", kind, "--crash" if crash else
               "--no-crash", *map(str, paths)]
    busy = machine_busy_s()  # (a fork server's workers are not our children: the machine's
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env)  # busy CPU counts every contender alike, when quiet)
    with _sampled(run.pid) as sampler:
        out, err = run.communicate(timeout=1800)
    cpu = machine_busy_s() - busy
    if run.returncode != 0:
        raise SystemExit(f"pool.py: {kind} failed ({run.returncode}): {err.strip()[-2000:]}")
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    found |= {"peak_rss_mb": sampler.peak_rss / 2**20, "peak_pss_mb": sampler.peak_pss / 2**20,
              "cpu_s": cpu}
    return found


def _summary(runs: list[dict[str, Any]], base: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Medians of the runs, and of each run's ratio to imgwarm's pool in the same run."""
    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    def ratio(key: str) -> float:
        if not base:
            return float("nan")
        return statistics.median(r[key] / b[key] for r, b in zip(runs, base, strict=True))

    return {"wall_s": median("wall_s"), "cpu_s": median("cpu_s"),
            "peak_rss_mb": median("peak_rss_mb"), "peak_pss_mb": median("peak_pss_mb"),
            "wall_ratio": ratio("wall_s"), "rss_ratio": ratio("peak_rss_mb"),
            "crash": runs[0].get("crash", {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--copies", type=int, default=2, help="each photo so many times")
    parser.add_argument("--only", default=",".join(KINDS), help="contenders, comma-separated")
    parser.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--crash", action=argparse.BooleanOptionalAction, default=True,
                        help="also kill a worker mid-source and check isolation")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.files, args.crash)
        return
    kinds = [k for k in args.only.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"--only: no contender {', '.join(sorted(unknown))} "
                     f"(known: {', '.join(KINDS)})")
    paths = [p for p in (args.files or default_files(DEFAULT_CORPUS))] * args.copies
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for number in range(args.runs):
        turn = kinds[number % len(kinds):] + kinds[:number % len(kinds)]
        for kind in turn:
            results[kind].append(_one(kind, paths, crash=number == 0))
            print(f"run {number + 1} {kind}: {json.dumps(results[kind][-1])}", flush=True)
    base = results.get("isolate")
    print(f"\n{len(paths)} sources, {WORKERS} workers, median of {args.runs} runs")
    print(f"{'contender':<20} {'wall s':>8} {'CPU s':>8} {'RSS MB':>8} {'PSS MB':>8} "
          f"{'wall/isolate':>13} {'RSS/isolate':>12}  crash isolation")
    summary = {kind: _summary(results[kind], base) for kind in kinds}
    for kind, s in summary.items():
        print(f"{kind:<20} {s['wall_s']:>8.2f} {s['cpu_s']:>8.2f} {s['peak_rss_mb']:>8.0f} "
              f"{s['peak_pss_mb']:>8.0f} {s['wall_ratio']:>13.2f} {s['rss_ratio']:>12.2f}  "
              f"{json.dumps(s['crash'])}")
    print(f"results: {save_results('pool', summary)}")


if __name__ == "__main__":
    main()
