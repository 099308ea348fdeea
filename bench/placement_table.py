"""The placement table of the docs: imgwarm's replay beside libCacheSim's policies and the
hourly rate oracle, on bench/tracegen.py traces at several Zipf alphas and RAM budgets.

For each alpha a trace is generated (48 h, the classifieds shape); for each budget (a share
of the trace's working set, in pages) bench/placement.py --trace --compare runs, JOBS at a
time (replays are deterministic: the hit ratios do not depend on what else runs; the
planning time does, so it is measured on its own, --planning). Results are printed as
Markdown and written to bench/results/placement_table.json.

Usage:
    .venv/bin/python bench/placement_table.py                       # 0.7, 0.8, 1.0 x 4 budgets
    .venv/bin/python bench/placement_table.py --alphas 0.8 --budgets 0.01 --jobs 1
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
ORDER = ("oracle", "imgwarm", "GDSF", "LHD", "WTinyLFU", "S3FIFO", "nginx", "LRU",
         "BeladySize")
NAMES = {"oracle": "hourly rate oracle", "imgwarm": "**imgwarm**", "GDSF": "GDSF",
         "LHD": "LHD", "WTinyLFU": "W-TinyLFU", "S3FIFO": "S3-FIFO",
         "nginx": "nginx proxy_cache", "LRU": "LRU", "BeladySize": "Belady-Size (offline)"}


def working_set(trace: Path) -> int:
    """Every variant's bytes in whole pages."""
    total = 0
    with gzip.open(trace, "rt") as lines:
        for line in lines:
            if line.startswith("U"):
                size = int(line.split("\t")[3])
                total += -(-size // 4096) * 4096
    return total


def one(trace: Path, budget: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    subprocess.run([PYTHON, str(HERE / "placement.py"), "--trace", str(trace), "--ram-budget",
                    str(budget), "--warmup", str(args.warmup), "--interval", str(args.interval),
                    "--compare", "--output", str(out)], check=True, capture_output=True)
    found: dict[str, Any] = json.loads(out.read_text())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alphas", default="0.7,0.8,1.0")
    parser.add_argument("--budgets", default="0.005,0.01,0.05,0.1")
    parser.add_argument("--warmup", type=float, default=43_200.0)
    parser.add_argument("--interval", type=float, default=300.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", action="store_true",
                        help="take a cell's result from its file in --folder when there")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/placement-traces"))
    parser.add_argument("--output", type=Path, default=HERE / "results" / "placement_table.json")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    alphas = [float(a) for a in args.alphas.split(",")]
    shares = [float(b) for b in args.budgets.split(",")]
    jobs: list[tuple[float, float, Path, int, Path]] = []
    for alpha in alphas:
        trace = args.folder / f"alpha{alpha}.tsv.gz"
        if not trace.exists():
            subprocess.run([PYTHON, str(HERE / "tracegen.py"), str(trace), "--alpha",
                            str(alpha)], check=True)
        size = working_set(trace)
        for share in shares:
            jobs.append((alpha, share, trace, int(size * share),
                         args.folder / f"alpha{alpha}-{share}.json"))
    def cell(job: tuple[float, float, Path, int, Path]) -> dict[str, Any]:
        if args.keep and job[4].exists():
            found: dict[str, Any] = json.loads(job[4].read_text())
            return found
        return one(job[2], job[3], args, job[4])

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(cell, jobs))
    table: dict[str, Any] = {}
    print("| alpha | RAM | " + " | ".join(NAMES[n] for n in ORDER) + " |")
    print("|---|---|" + "---:|" * len(ORDER))
    for (alpha, share, _, budget, _), found in zip(jobs, results, strict=True):
        rows = found["rows"]
        cells = [f"{rows[n][0]:.1%} / {rows[n][1]:.1%}" if n in rows else "-" for n in ORDER]
        print(f"| {alpha} | {share:.1%} | " + " | ".join(cells) + " |")
        table[f"{alpha} {share}"] = {"budget": budget, **found}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
