"""Benchmark the queue path against the in-process path on the same batch, in one run.

    (a) in-process  `imgwarm optimize --json --workers N FOLDER` (threads, one per core)
    (q) queue       `imgwarm enqueue --wait --json KEY...` with one `imgwarm worker
                    --concurrency N` already running (prefork processes) on a real
                    redis-server; originals are read from the local origin by key

Both write to the local origin with the same settings; each run starts from empty output
folders (so no job can be skipped), and the runs are interleaved (a, q, q, a, a, q...) so that
machine noise falls on both. Starting the worker is not timed: in production it is already
running. Then, on an idle worker, the time from enqueue to manifest for a single job
(median of several photos of median size), the same job enqueued again (skipped: same bytes
and settings), and the in-process time of the same work for comparison.

Usage:
    .venv/bin/python bench/workers.py                  # 50 corpus photos, 2 workers, 3 runs
    .venv/bin/python bench/workers.py --runs 5 --photos 100

The Markdown table is printed and, with the raw numbers, written to bench/results/workers.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("bench_optimize", HERE / "optimize.py")
assert _spec is not None and _spec.loader is not None
bench_optimize = importlib.util.module_from_spec(_spec)
sys.modules["bench_optimize"] = bench_optimize
_spec.loader.exec_module(bench_optimize)  # its photo choice and helpers, not a copy
DEFAULT_CORPUS = bench_optimize.DEFAULT_CORPUS
default_files = bench_optimize.default_files
find_imgwarm = bench_optimize.find_imgwarm
sys.path.insert(0, str(HERE.parent))
from tests.support.servers import (  # noqa: E402  (the tests' real Redis and worker)
    RedisServer,
    Worker,
)

DEFAULT_OUTPUT = HERE / "results" / "workers.json"


class Setup:
    """One output folder and Redis database: the environment both paths run with."""

    counter = itertools.count(1)

    def __init__(self, work: Path, redis_port: int, workers: int) -> None:
        self.root = work / f"out{next(self.counter)}"
        self.root.mkdir()
        url = f"redis://127.0.0.1:{redis_port}/{next(self.counter)}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
        env.pop("VIPS_CONCURRENCY", None)
        self.env = env | {
            "IMGWARM_ORIGIN_ROOT": str(self.root / "origin"),
            "IMGWARM_MANIFEST_ROOT": str(self.root / "manifest"),
            "IMGWARM_WORKERS": str(workers), "IMGWARM_BROKER_URL": url,
            "IMGWARM_RESULT_BACKEND": url,
        }

    def settings(self) -> Any:
        from imgwarm.config import load_settings

        return load_settings(**{k.removeprefix("IMGWARM_").lower(): v
                                for k, v in self.env.items() if k.startswith("IMGWARM_")})


def start_worker(setup: Setup, concurrency: int) -> Worker:
    """A real `imgwarm worker`, ready (its start is not timed: it runs all along in use)."""
    return Worker(setup.env, setup.root / "worker.log", "--concurrency", str(concurrency))


def stage(files: list[Path], count: int, folder: Path) -> list[Path]:
    """``count`` photos cycled from ``files`` under distinct names (distinct outputs)."""
    folder.mkdir(parents=True)
    staged = []
    for number, path in zip(range(count), itertools.cycle(files), strict=False):
        target = folder / f"p{number:03d}-{path.name}"
        shutil.copyfile(path, target)
        staged.append(target)
    return staged


def check(stdout: str, expected: int, what: str) -> None:
    results = [json.loads(line) for line in stdout.splitlines()]
    ok = sum(r["ok"] for r in results)
    if ok != expected:
        raise RuntimeError(f"{what}: {ok} of {expected} sources succeeded")


def run_in_process(imgwarm: str, setup: Setup, photos: list[Path], workers: int) -> float:
    start = time.perf_counter()
    done = subprocess.run([imgwarm, "optimize", "--json", "--workers", str(workers),
                           *map(str, photos)], env=setup.env, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - start
    check(done.stdout, len(photos), "in-process")
    return wall


def run_queue(imgwarm: str, setup: Setup, photos: list[Path], workers: int) -> float:
    keys = []
    for photo in photos:  # the originals, uploaded to the origin before the clock starts
        target = setup.root / "origin" / "uploads" / photo.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(photo, target)
        keys.append(f"uploads/{photo.name}")
    worker = start_worker(setup, workers)
    try:
        start = time.perf_counter()
        done = subprocess.run([imgwarm, "enqueue", "--wait", "--json", *keys], env=setup.env,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    finally:
        worker.stop()
    check(done.stdout, len(photos), "queue")
    return wall


def latency(work: Path, redis_port: int, files: list[Path], samples: int,
            workers: int) -> dict[str, list[float]]:
    """Enqueue -> manifest for one job at a time on an idle worker; the same job again
    (skipped); and the same work in-process (imgwarm.optimize_file, warm)."""
    from imgwarm import optimize_file
    from imgwarm.workers.client import enqueue_all

    sizes = sorted(files, key=lambda p: p.stat().st_size)
    photo = sizes[len(sizes) // 2]
    setup = Setup(work, redis_port, workers)
    settings = setup.settings()
    keys = []
    for number in range(samples):
        target = setup.root / "origin" / "single" / f"s{number}-{photo.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(photo, target)
        keys.append(f"single/{target.name}")
    found: dict[str, list[float]] = {"queue": [], "skipped": [], "in_process": []}
    worker = start_worker(setup, workers)
    try:
        enqueue_all(["single/warm-up"], settings)[0].wait(60)  # connections, imports
        for key in keys:
            for kind in ("queue", "skipped"):
                start = time.perf_counter()
                result = enqueue_all([key], settings)[0].wait(120)
                found[kind].append(time.perf_counter() - start)
                if not result.ok:
                    raise RuntimeError(result.error)
    finally:
        worker.stop()
    local = setup.settings().model_copy(update={"origin_root": setup.root / "inproc",
                                                "manifest_root": setup.root / "inproc-m"})
    for number in range(samples + 1):
        copy = setup.root / f"inproc-{number}-{photo.name}"
        shutil.copyfile(photo, copy)
        start = time.perf_counter()
        optimize_file(copy, settings=local)
        if number:  # the first one warms up
            found["in_process"].append(time.perf_counter() - start)
    found["photo"] = [float(photo.stat().st_size)]
    return found


def markdown(context: dict[str, Any]) -> str:
    a, q = context["in_process_jobs_per_s"], context["queue_jobs_per_s"]
    lat = context["latency_ms"]
    lines = [
        f"{context['photos']} corpus photos, {context['workers']} workers, "
        f"median of {context['runs']} interleaved runs, {os.cpu_count()} cores",
        "",
        "| path | jobs/s (median) | runs (s) |",
        "|---|---:|---|",
        f"| in-process `imgwarm optimize` | {a:.2f} | "
        f"{', '.join(f'{w:.1f}' for w in context['walls']['in_process'])} |",
        f"| queue: `imgwarm enqueue --wait`, worker --concurrency {context['workers']} | "
        f"{q:.2f} | {', '.join(f'{w:.1f}' for w in context['walls']['queue'])} |",
        "",
        f"**queue / in-process throughput: {q / a:.2f}** (target: at least 0.90)",
        "",
        "| single job on an idle worker (median) | ms |",
        "|---|---:|",
        f"| enqueue -> manifest | {lat['queue']:.0f} |",
        f"| enqueue -> done when skipped (same bytes and settings) | {lat['skipped']:.0f} |",
        f"| same work in-process (`imgwarm.optimize_file`, warm) | {lat['in_process']:.0f} |",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--photos", type=int, default=50, help="batch size (default 50)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each path (default 3)")
    parser.add_argument("--workers", type=int, default=2,
                        help="threads in-process and worker concurrency (default 2)")
    parser.add_argument("--samples", type=int, default=9, help="single jobs timed (default 9)")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    imgwarm = find_imgwarm()
    files = default_files(args.corpus)
    if not files:
        print(f"no corpus photos in {args.corpus}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="imgwarm-bench-queue-") as tmp:
        work = Path(tmp)
        redis = RedisServer(work)
        port = redis.port
        try:
            photos = stage(files, args.photos, work / "photos")
            walls: dict[str, list[float]] = {"in_process": [], "queue": []}
            runners = {"in_process": run_in_process, "queue": run_queue}
            for run in range(args.runs):
                order = ["in_process", "queue"] if run % 2 == 0 else ["queue", "in_process"]
                for kind in order:
                    wall = runners[kind](imgwarm, Setup(work, port, args.workers), photos,
                                         args.workers)
                    walls[kind].append(wall)
                    print(f"run {run + 1}: {kind:10} {wall:6.2f} s", file=sys.stderr)
            single = latency(work, port, files, args.samples, args.workers)
        finally:
            redis.stop()
    context = {
        "photos": args.photos, "workers": args.workers, "runs": args.runs, "walls": walls,
        "in_process_jobs_per_s": args.photos / statistics.median(walls["in_process"]),
        "queue_jobs_per_s": args.photos / statistics.median(walls["queue"]),
        "latency_ms": {k: 1000 * statistics.median(v) for k, v in single.items()
                       if k != "photo"},
        "latency_photo_bytes": single["photo"][0],
        "raw_latency_s": single,
    }
    context["ratio"] = context["queue_jobs_per_s"] / context["in_process_jobs_per_s"]
    table = markdown(context)
    print(table)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({**context, "table": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
