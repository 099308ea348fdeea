"""Benchmark width ladders (and formats) against the 0.3.0 defaults (widths 320/640/1280/1920,
WebP + JPEG), on the corpus's camera photos and the Kodak images, in one process, one worker:

- time: the whole optimize of every photo, the candidates interleaved source by source; the
  median over the runs of each run's ratio to 0.3.0's, wall
  and CPU seconds (the process's, every thread);
- bytes stored: every variant's bytes, over the baseline's;
- bytes fetched: for viewports 320..1920 CSS px (every 40) at DPR 1, 1.75, 2 and 3 with the
  image at 100vw, the file Chromium takes: the first format of the <picture> (jxl, avif,
  webp: the fallback JPEG is for browsers that take none), the narrowest at least as wide as
  the slot needs, else the widest (the rule tests/serve/test_ladder.py checks in Chromium);
  and on phones alone (320..430 CSS px, every 10, at DPR 1.75, 2, 2.625 and 3);
- worst over-fetch: the largest ratio of the taken file's pixels to the slot's, on phones
  and over every viewport.

Also prints which device widths common phones ask for at 100vw (viewport x DPR), the pairs a
ladder should land near.

Usage (a quiet machine: no tests, no other sessions):
    .venv/bin/python bench/ladder.py [--runs 3] [--only defaults,bytes-20K]

The Markdown table is printed and, with the raw numbers, written to bench/results/ladder.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import HERE  # bench/common.py

from imgwarm.config import Settings
from imgwarm.formats import ORDER
from imgwarm.manifest import Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import Stores
from tests.support.corpus import corpus_dir

PHOTOS = ["42_IndexError.jpg", "HMD_Nokia_8.3_5G.jpg", "xmp_test.jpg", "33-type_error.jpg",
          "canon_hdr_YES.jpg", "pyvips_sample.jpg", *(f"Landscape_{i}.jpg" for i in (1, 5)),
          "kodim03.png", "kodim07.png"]
VIEWPORTS = (range(320, 1921, 40), (1, 1.75, 2, 3))
PHONES = (range(320, 431, 10), (1.75, 2, 2.625, 3))  # CSS px wide, device pixel ratios
# Common phones' CSS width and DPR (Android's 360/384/393/412 dp classes at their usual
# densities, the iPhones since the X): the device pixels a 100vw image asks for.
COMMON_PHONES = [(360, 2), (360, 3), (375, 2), (375, 3), (384, 2.8125), (390, 3),
                 (393, 2.75), (412, 1.75), (412, 2.625), (414, 2), (414, 3), (428, 3),
                 (430, 3)]
# 0.3.0's defaults, the baseline: four widths, every format at each
OLD = {"widths": [320, 640, 1280, 1920], "fallback_widths": []}
# each with the JPEG at the default fallback widths, and also at every width (fallback_widths
# empty: "/all-jpeg"). The defaults since 0.4.0: 320, 680, 860, 1080, 1290, 1920, 1.26
# apart over the phones' 560..1290 device px from 680 (the fewest that keep a phone within
# 1.6x the pixels it needs, with the 412 x 1.75 phone's 665-px grid slot in the 680 file),
# the JPEG at 320, 640 (so 680) and 1920.
LADDERS = {
    "phones-4": [320, 640, 810, 1024, 1290, 1920],  # 1.26 apart from 640 on (tried first)
    "phones-4/1296": [320, 640, 810, 1024, 1296, 1920],
    "phones-5": [320, 640, 750, 900, 1080, 1290, 1920],  # at the common phones' widths
    "geometric": [320, 400, 506, 640, 810, 1024, 1296, 1640, 1920],  # 1.26 apart throughout
    "next-image": [320, 640, 750, 828, 1080, 1200, 1920],  # next/image's deviceSizes to 1920
}
CANDIDATES: dict[str, dict[str, Any]] = {
    "0.3.0": OLD,
    "defaults": {},
    "defaults/all-jpeg": {"fallback_widths": []},
    "defaults/jpeg-4": {"fallback_widths": [320, 640, 1280, 1920]},  # the JPEG at 1290 too
    "bytes-20K": {"width_step_bytes": "20K", "fallback_widths": []},  # issue 27's
    "bytes-30K/7": {"width_step_bytes": "30K", "max_widths": 7},  # fewer, cheaper steps
    **{name: {"widths": widths} for name, widths in LADDERS.items()},
    **{f"{name}/all-jpeg": {"widths": widths, "fallback_widths": []}
       for name, widths in LADDERS.items()},
    "defaults+jxl from jpeg": {"formats": ["jxl", "webp", "jpeg"], "jxl_from_jpeg": True},
    "defaults+jxl": {"formats": ["jxl", "webp", "jpeg"], "jxl_from_jpeg": False},
}


def one_run(chosen: dict[str, Settings], work: Path, sources: list[Path]
            ) -> dict[str, tuple[float, float, list[Manifest]]]:
    """Every candidate makes every source, each into its own fresh stores: wall and CPU
    seconds (every thread of this process: libvips' too) summed over the sources, and the
    manifests. Interleaved by source, the candidates' order turning each time, so that a
    machine that slows for a minute slows every candidate alike."""
    stores: dict[str, tuple[Settings, Stores]] = {}
    for name, settings in chosen.items():
        shutil.rmtree(work / name, ignore_errors=True)
        here = settings.updated(origin_root=work / name / "origin",
                                manifest_root=work / name / "manifest", fsync=False, workers=1)
        stores[name] = (here, Stores.local(here.store))
    took = {name: [0.0, 0.0] for name in chosen}
    made: dict[str, list[Manifest]] = {name: [] for name in chosen}
    names = list(chosen)
    for turn, source in enumerate(sources):
        for name in names[turn % len(names):] + names[:turn % len(names)]:
            here, store = stores[name]
            started, cpu = time.perf_counter(), time.process_time()
            made[name].append(optimize_file(source, settings=here, stores=store).manifest)
            took[name][0] += time.perf_counter() - started
            took[name][1] += time.process_time() - cpu
    return {name: (wall, cpu, made[name]) for name, (wall, cpu) in took.items()}


def fetched(manifest: Manifest, grid: tuple[range, tuple[float, ...]]) -> tuple[int, float]:
    """Bytes a browser takes over every viewport and DPR of ``grid`` (the first format of the
    <picture>), and the worst ratio of pixels taken to pixels needed."""
    first = next(f for f in ORDER if f != "jpeg" and any(v.format == f for v in
                                                         manifest.variants))
    files = sorted((v for v in manifest.variants if v.format == first), key=lambda v: v.width)
    total, worst = 0, 0.0
    viewports, dprs = grid
    for dpr in dprs:
        for width in viewports:
            needed = width * dpr
            chosen = next((v for v in files if v.width >= needed), files[-1])
            total += chosen.bytes
            worst = max(worst, (chosen.width / needed) ** 2)
    return total, worst


def figures(made: list[Manifest], base: list[Manifest]) -> dict[str, Any]:
    def summed(manifests: list[Manifest], grid: tuple[range, tuple[float, ...]]) -> int:
        return sum(fetched(m, grid)[0] for m in manifests)

    return {
        "widths": max(len({v.width for v in m.variants}) for m in made),
        "stored": sum(v.bytes for m in made for v in m.variants)
        / sum(v.bytes for m in base for v in m.variants),
        "fetched": summed(made, VIEWPORTS) / summed(base, VIEWPORTS),
        "phones": summed(made, PHONES) / summed(base, PHONES),
        "worst_phone": max(fetched(m, PHONES)[1] for m in made),
        "worst": max(fetched(m, VIEWPORTS)[1] for m in made),
    }


def common_phones() -> list[str]:
    lines = ["| phone (CSS px x DPR) | device px at 100vw |", "|---|---:|"]
    lines += [f"| {w} x {d} | {round(w * d)} |"
              for w, d in sorted(COMMON_PHONES, key=lambda p: p[0] * p[1])]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="candidates to run (comma-separated; "
                        f"0.3.0 always): {', '.join(CANDIDATES)}")
    args = parser.parse_args()
    wanted = [c for c in args.only.split(",") if c]
    unknown = set(wanted) - set(CANDIDATES)
    if unknown:
        parser.error(f"unknown candidate(s): {', '.join(sorted(unknown))}")
    names = ["0.3.0", *(n for n in CANDIDATES if n != "0.3.0" and (not wanted or n in wanted))]
    sources = [corpus_dir() / p for p in PHOTOS]
    base = Settings()
    chosen = {name: base.updated(**CANDIDATES[name]) for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    made: dict[str, list[Manifest]] = {}
    work = Path(tempfile.mkdtemp(prefix="imgwarm-bench-ladder-", dir="/var/tmp"))
    try:
        for _ in range(args.runs):
            for name, (took, cpu, made[name]) in one_run(chosen, work, sources).items():
                times[name].append(took)
                cpus[name].append(cpu)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    t_base = statistics.median(times["0.3.0"])

    def ratio(measured: dict[str, list[float]], name: str) -> float:
        """The median over the runs of each run's ratio to 0.3.0's in that same run."""
        return statistics.median(a / b for a, b in zip(measured[name], measured["0.3.0"],
                                                       strict=True))

    rows = {name: {**figures(made[name], made["0.3.0"]),
                   "time": ratio(times, name), "cpu": ratio(cpus, name),
                   "settings": CANDIDATES[name]} for name in names}
    lines = [f"Ladders against 0.3.0's defaults (320/640/1280/1920, WebP + JPEG), {len(sources)} "
             f"photos, one worker; time: median over {args.runs} runs of the ratio in each, "
             "interleaved by source "
             f"(0.3.0: {t_base:.2f} s)", "",
             "| ladder | widths (most) | phone bytes | worst over-fetch, phones | all viewports "
             "| bytes fetched, all | optimize time | CPU time | bytes stored |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['widths']} | {row['phones']:.2f} | "
                     f"{row['worst_phone']:.2f} | {row['worst']:.2f} | {row['fetched']:.2f} | "
                     f"{row['time']:.2f} | {row['cpu']:.2f} | {row['stored']:.2f} |")
    lines += ["", *common_phones()]
    print("\n".join(lines))
    out = HERE / "results" / "ladder.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"times": times, "cpus": cpus, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
