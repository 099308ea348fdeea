"""Planning time a run at the size of a big site: ``Index.plan`` (what warm's plan step runs)
against the greedy choice over every row plus reading what the tier holds (what it replaced),
on a synthetic index whose scores move between runs (issue 29: under 0.1 s at 500 k variants).

The index: SOURCES listings of 4-8 variants (widths 320-1920, sizes lognormal around 14, 40,
120 and 220 KB by width), each variant scored by a Zipf share by random rank; every run,
CHANGED variants take new scores (more churn than the 48 h classifieds trace has in 10 min),
the tier is planned at each budget (a share of every variant's pages), and the plan is
settled as warm settles it. Both ways are checked to agree on every run.

Usage:
    .venv/bin/python bench/planning.py                 # 83,900 listings (about 503,000 variants)
    .venv/bin/python bench/planning.py --runs 8 --budgets 0.01,0.05,0.1 --json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from imgwarm.cache.index import Index
from imgwarm.cache.rank import pages
from imgwarm.manifest import Variant

PAGE = 4096
WIDTHS = (320, 640, 1280, 1920)
MEDIAN_BYTES = {320: 14_000, 640: 40_000, 1280: 120_000, 1920: 220_000}


def site(index: Index, rnd: random.Random, sources: int) -> list[str]:
    """Every listing, in one set_sources; returns the variants' paths."""
    listings = []
    for s in range(sources):
        count = rnd.randint(4, 8)  # (webp for every width, jpeg for some)
        variants = [Variant(format=fmt, width=w, height=w * 3 // 4,
                            bytes=max(200, int(rnd.lognormvariate(0, 0.5) * MEDIAN_BYTES[w]
                                              * (1.4 if fmt == "jpeg" else 1.0))),
                            path=f"{s % 256:02x}/{s}-{w}.{fmt}")
                    for n, (fmt, w) in enumerate((f, w) for f in ("webp", "jpeg")
                                                 for w in WIDTHS) if n < count]
        listings.append((f"l{s}", variants, 0.0))
    index.set_sources(listings, now=0.0)
    index.commit()
    return [v.path for _, variants, _ in listings for v in variants]


def scores(rnd: random.Random, paths: list[str]) -> dict[str, float]:
    """A Zipf-like score (alpha 0.8) by random rank."""
    return {path: 1e6 / (1 + rnd.randrange(len(paths))) ** 0.8 for path in paths}


def run(args: argparse.Namespace) -> dict[str, Any]:
    rnd = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as folder:
        index = Index(Path(folder) / "index.sqlite")
        paths = site(index, rnd, args.sources)
        index.add_scores(scores(rnd, paths))
        index.commit()
        every = sum(pages(size, PAGE) for size in index.sizes(paths).values())
        found: dict[str, Any] = {"variants": len(paths), "bytes_in_pages": every, "budgets": {}}
        for share in args.budgets:
            budget = int(every * share)
            index.forget_tier("ram")
            index.remember("cut:ram", None)
            plan_s: list[float] = []
            old_s: list[float] = []
            for _ in range(args.runs):
                index.add_scores(scores(rnd, rnd.sample(paths, min(args.changed, len(paths)))))
                index.commit()
                started = time.perf_counter()
                place, evict = index.plan("ram", budget, max_width=1 << 14, page=PAGE)
                plan_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                chosen = index.choose(budget, max_width=1 << 14, page=PAGE)
                held = index.held("ram")
                old_s.append(time.perf_counter() - started)
                if (place, evict) != ({p: s for p, s in chosen.items() if p not in held},
                                      {p: s for p, s in held.items() if p not in chosen}):
                    sys.exit(f"planning: the plan and the greedy choice differ at {share}")
                index.mark("ram", evict, None)
                index.mark("ram", place, "placed")
                index.commit()
            found["budgets"][str(share)] = {
                "first_run_s": plan_s[0], "plan_s": plan_s[1:], "old_s": old_s[1:],
                "plan_median_s": statistics.median(plan_s[1:]),
                "old_median_s": statistics.median(old_s[1:])}
        index.close(keep=False)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=83_900)
    parser.add_argument("--changed", type=int, default=15_000, help="scores moved a run")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--budgets", default="0.01,0.05,0.1",
                        help="shares of every variant's pages")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        args.budgets = [float(b) for b in args.budgets.split(",")]
    except ValueError:
        parser.error(f"--budgets {args.budgets!r}: shares such as 0.01,0.05")
    if not all(0 < b <= 1 for b in args.budgets) or args.runs < 2 or args.sources < 1 \
            or args.changed < 0:
        parser.error("--budgets in (0, 1], --runs at least 2 (the first is timed apart), "
                     "--sources at least 1, --changed at least 0")
    found = run(args)
    if args.json:
        print(json.dumps(found))
        return
    print(f"{found['variants']:,} variants; {args.changed:,} scores moved a run; "
          f"runs 2-{args.runs}, median (range)")
    print("| RAM | Index.plan | choose + held | ratio | first run |\n|---|---:|---:|---:|---:|")
    for share, cell in found["budgets"].items():
        print(f"| {float(share):.0%} | {cell['plan_median_s']:.3f} s "
              f"({min(cell['plan_s']):.3f}-{max(cell['plan_s']):.3f}) | "
              f"{cell['old_median_s']:.3f} s | "
              f"{cell['plan_median_s'] / max(cell['old_median_s'], 1e-9):.2f} | "
              f"{cell['first_run_s']:.2f} s |")


if __name__ == "__main__":
    main()
