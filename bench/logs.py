"""Access-log parsing against hostile input: the time a byte as the hostile parts grow.

A parser that is linear in its input takes the same time a byte whatever the lines hold; one
that backtracks (a regex over a long 404 path, quotes inside quoted fields) takes 4x and more
a byte when the hostile parts double. The logs are tests/support/hostile_logs.py's (the same
kinds the tests read for what they are), at scales that double, parsed by warm's reader
(``read_logs``) in this process. Runs are interleaved (4, 8, 16, 32, 4, 8, ...) and the
median time a byte is reported per scale, with each doubling's ratio; a benign log of good
requests is the baseline (1.0 a byte).

Usage:
    .venv/bin/python bench/logs.py                # scales 4-32, 5 runs
    .venv/bin/python bench/logs.py --runs 9 --check 1.6   # exit 1 if a doubling costs more

Results are printed as Markdown and written to bench/results/logs.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.support.hostile_logs import VARIANT, hostile, line, parse  # noqa: E402

SCALES = (4, 8, 16, 32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lines", type=int, default=1600, help="hostile lines a log")
    parser.add_argument("--check", type=float, metavar="RATIO",
                        help="exit 1 when a doubling of the hostile parts costs more than "
                        "RATIO times the time a byte")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "logs.json")
    args = parser.parse_args()
    logs = {scale: hostile(scale, lines=args.lines) for scale in SCALES}
    benign = line(b"/" + VARIANT.encode()) * max(1, len(logs[SCALES[-1]]) // 120)
    per_byte: dict[str, list[float]] = {str(s): [] for s in SCALES} | {"benign": []}
    with tempfile.TemporaryDirectory(prefix="imgwarm-bench-logs-") as folder:
        for _ in range(args.runs):
            for name, data in [*((str(s), logs[s]) for s in SCALES), ("benign", benign)]:
                seconds = parse(Path(folder, "access.log"), data)[1]
                per_byte[name].append(seconds / len(data))
    median = {name: statistics.median(times) for name, times in per_byte.items()}
    rows = []
    for before, after in itertools.pairwise(SCALES):
        rows.append({"from": before, "to": after, "bytes_ratio":
                     len(logs[after]) / len(logs[before]),
                     "time_ratio": median[str(after)] * len(logs[after])
                     / (median[str(before)] * len(logs[before])),
                     "per_byte_ratio": median[str(after)] / median[str(before)]})
    print(f"hostile logs of {args.lines} lines; median of {args.runs} interleaved runs; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| scale | MB | time a byte vs benign |\n|---:|---:|---:|")
    for scale in SCALES:
        print(f"| {scale} | {len(logs[scale]) / 1e6:.1f} | "
              f"{median[str(scale)] / median['benign']:.2f} |")
    print("\n| doubling | bytes x | time x | time a byte x |\n|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['from']} -> {row['to']} | {row['bytes_ratio']:.2f} | "
              f"{row['time_ratio']:.2f} | {row['per_byte_ratio']:.2f} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"runs": args.runs, "lines": args.lines,
                                       "load_average": os.getloadavg(), "doublings": rows,
                                       "per_byte_vs_benign": {
                                           n: median[n] / median["benign"] for n in median}},
                                      indent=1))
    worst = max(row["per_byte_ratio"] for row in rows)
    if args.check is not None and worst > args.check:
        print(f"\nFAIL: a doubling cost {worst:.2f}x the time a byte (limit {args.check})")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
