"""Benchmark the width ladder by bytes (issue 27) against the fixed ladder (320/640/1280/1920)
on the corpus's camera photos and the Kodak images, WebP + JPEG, in one process, one worker:

- time: the whole optimize of every photo, fixed and by bytes, interleaved (median of runs);
- bytes stored: every variant's bytes, by bytes over fixed;
- bytes fetched: for viewports 320..1920 CSS px (every 40) at DPR 1, 1.75, 2 and 3 with the
  image at 100vw, the WebP Chromium takes (the narrowest at least as wide as the slot needs,
  else the widest: the rule tests/serve/test_ladder.py checks in Chromium), and the worst
  ratio of its pixels to the pixels the slot needs; and on phones alone (320..430 CSS px at
  DPR 1.75, 2, 2.625 and 3).

Usage (a quiet machine: no tests, no other sessions):
    .venv/bin/python bench/ladder.py [--step 20K] [--runs 3]

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
from imgwarm.manifest import Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import Stores
from tests.support.corpus import corpus_dir

PHOTOS = ["42_IndexError.jpg", "HMD_Nokia_8.3_5G.jpg", "xmp_test.jpg", "33-type_error.jpg",
          "canon_hdr_YES.jpg", "pyvips_sample.jpg", *(f"Landscape_{i}.jpg" for i in (1, 5)),
          "kodim03.png", "kodim07.png"]
VIEWPORTS = range(320, 1921, 40)
DPRS = (1, 1.75, 2, 3)
PHONES = (range(320, 431, 10), (1.75, 2, 2.625, 3))  # CSS px wide, device pixel ratios


def make_all(settings: Settings, work: Path, sources: list[Path]) -> tuple[float, list[Manifest]]:
    shutil.rmtree(work, ignore_errors=True)
    here = settings.updated(origin_root=work / "origin", manifest_root=work / "manifest",
                            fsync=False, workers=1)
    stores = Stores.local(here.store)
    started = time.perf_counter()
    made = [optimize_file(s, settings=here, stores=stores).manifest for s in sources]
    return time.perf_counter() - started, made


def fetched(manifest: Manifest, viewports: range = VIEWPORTS,
            dprs: tuple[float, ...] = DPRS) -> tuple[int, float]:
    """Bytes of WebP a browser takes over every viewport and DPR, and the worst pixel ratio."""
    webp = sorted((v for v in manifest.variants if v.format == "webp"), key=lambda v: v.width)
    total, worst = 0, 0.0
    for dpr in dprs:
        for width in viewports:
            needed = width * dpr
            chosen = next((v for v in webp if v.width >= needed), webp[-1])
            total += chosen.bytes
            worst = max(worst, (chosen.width / needed) ** 2)
    return total, worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", default="20K", help="width_step_bytes (default 20K)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    corpus = corpus_dir()
    sources = [corpus / p for p in PHOTOS]
    fixed = Settings()
    ladder = fixed.updated(width_step_bytes=args.step)
    times: dict[str, list[float]] = {"fixed": [], "ladder": []}
    made: dict[str, list[Manifest]] = {}
    work = Path(tempfile.mkdtemp(prefix="imgwarm-bench-ladder-", dir="/var/tmp"))
    try:
        for _ in range(args.runs):
            for name, chosen in (("fixed", fixed), ("ladder", ladder)):
                took, made[name] = make_all(chosen, work / name, sources)
                times[name].append(took)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows: list[dict[str, Any]] = []
    for one, other in zip(made["fixed"], made["ladder"], strict=True):
        (f_got, f_worst), (l_got, l_worst) = fetched(one), fetched(other)
        rows.append({
            "photo": Path(one.key).name, "width": one.width,
            "widths": [len({v.width for v in m.variants}) for m in (one, other)],
            "stored": [sum(v.bytes for v in m.variants) for m in (one, other)],
            "fetched": [f_got, l_got], "worst": [f_worst, l_worst],
            "phones": [fetched(m, *PHONES)[0] for m in (one, other)]})
    t_fixed, t_ladder = statistics.median(times["fixed"]), statistics.median(times["ladder"])
    lines = [f"Width ladder by bytes (width_step_bytes={args.step}, max_widths="
             f"{ladder.image.max_widths}) against the fixed 320/640/1280/1920, WebP + JPEG, "
             f"{len(sources)} photos, one worker; time: median of {args.runs} interleaved runs",
             "", "| photo | widths fixed / ladder | bytes stored ladder / fixed | bytes fetched "
             "ladder / fixed | on phones | worst pixels / needed, fixed | ladder |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['photo']} ({row['width']} px) | {row['widths'][0]} / "
                     f"{row['widths'][1]} | {row['stored'][1] / row['stored'][0]:.2f} | "
                     f"{row['fetched'][1] / row['fetched'][0]:.2f} | "
                     f"{row['phones'][1] / row['phones'][0]:.2f} | {row['worst'][0]:.2f} | "
                     f"{row['worst'][1]:.2f} |")
    stored = [sum(r["stored"][n] for r in rows) for n in (0, 1)]
    got = [sum(r["fetched"][n] for r in rows) for n in (0, 1)]
    phones = [sum(r["phones"][n] for r in rows) for n in (0, 1)]
    lines.append(f"| **all** | | **{stored[1] / stored[0]:.2f}** | **{got[1] / got[0]:.2f}** | "
                 f"**{phones[1] / phones[0]:.2f}** | "
                 f"{max(r['worst'][0] for r in rows):.2f} | "
                 f"{max(r['worst'][1] for r in rows):.2f} |")
    lines += ["", f"optimize time, ladder / fixed: **{t_ladder / t_fixed:.2f}** "
              f"({t_ladder:.2f} s against {t_fixed:.2f} s)"]
    print("\n".join(lines))
    out = HERE / "results" / "ladder.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"step": args.step, "times": times, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
