"""Benchmark auto quality: bytes, SSIMULACRA2 scores and time of fixed and auto qualities.

On the corpus photos (every good corpus file at least 640 pixels wide) and the Kodak images,
at widths 640 and 1280 (a Kodak image, 768 wide, gets 640 and its own 768), each contender is
the real CLI (`imgwarm optimize --json`, one worker a core) on the same staged batch, into
fresh folders:

    (a) fixed   WebP q80 and JPEG q82 (the defaults), one run
    (b) auto    WebP and JPEG at `auto` (target 75, tolerance 3)
    (c) AVIF    `auto` at effort 2, and at effort 4 (AVIF alone)
    (d) JPEG    mozjpeg (the libvips wheel's encoder) at the quality that reaches the same
                score: the JPEG half of (b)

(a) and (b) run R times interleaved, and their medians are compared; the AVIF runs once each
(they are slow, and timed against the median of (a)). Every file written is then decoded and
scored against the resized source's pixels (as the pipeline makes them), so the fixed runs
get scores too and the manifest's recorded scores are checked. Reported per line: total bytes
relative to (d), scores (min, median, max), how many variants are in [target, target + 3],
and wall time relative to (a).

Usage:
    .venv/bin/python bench/quality.py              # 3 rounds of (a) and (b)
    .venv/bin/python bench/quality.py --runs 1 --no-avif

The Markdown table is printed and, with the raw numbers, written to bench/results/quality.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy
from common import IMGWARM, ROOT, timed
from PIL import Image

from imgwarm.config import Settings
from imgwarm.pipeline.make import render_master
from imgwarm.pipeline.probe import probe
from imgwarm.pipeline.resize import fit
from imgwarm.pipeline.variants import height_for
from imgwarm.quality.ssimulacra2 import Reference

CORPUS = ROOT / "tests" / "corpus"
OUTPUT = Path(__file__).resolve().parent / "results" / "quality.json"
BAD = frozenset({"truncated.jpg", "corrupt-header.jpg", "notjpeg.jpg", "cogs_png_renamed.jpg",
                 "lottapixel.jpg", "corrupted.jpg", "monkey12.jpg"})
WIDTHS = "640,1280"
MIN_WIDTH = 640
TARGET, TOLERANCE = 75.0, 3.0


@dataclass
class Contender:
    key: str
    label: str
    formats: str
    options: list[str]
    env: dict[str, str] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)  # the last run's --json lines
    origin: Path = Path()


def contenders() -> list[Contender]:
    auto = ["--webp-quality", "auto", "--jpeg-quality", "auto"]
    return [
        Contender("a", "fixed", "webp,jpeg", ["--webp-quality", "80", "--jpeg-quality", "82"]),
        Contender("b", "auto", "webp,jpeg", auto),
        Contender("c2", "auto AVIF effort 2", "avif", ["--avif-quality", "auto"],
                  {"IMGWARM_AVIF_EFFORT": "2"}),
        Contender("c4", "auto AVIF effort 4", "avif", ["--avif-quality", "auto"],
                  {"IMGWARM_AVIF_EFFORT": "4"}),
    ]


def sources(corpus: Path) -> list[Path]:
    """Good corpus files at least MIN_WIDTH wide (photos, not the small test oddities), and
    the Kodak images."""
    import pyvips
    found = []
    for path in sorted(corpus.iterdir()):
        if path.suffix.lower() not in (".jpg", ".jpeg", ".png") or path.name in BAD:
            continue
        try:
            width = pyvips.Image.new_from_file(str(path)).width
        except pyvips.Error:
            continue
        if width >= MIN_WIDTH or path.name.startswith("kodim"):
            found.append(path)
    return found


def run(contender: Contender, batch: list[Path], scratch: Path, workers: int) -> None:
    out = Path(tempfile.mkdtemp(prefix=f"quality-{contender.key}-", dir=scratch))
    command = [str(IMGWARM), "optimize", "--json", "--origin-root", str(out / "origin"),
               "--manifest-root", str(out / "manifest"), "--widths", WIDTHS,
               "--formats", contender.formats, "--workers", str(workers),
               *contender.options, *map(str, batch)]
    took, stdout = timed(command, {**os.environ, **contender.env})
    contender.times.append(took)
    if contender.origin != Path():
        shutil.rmtree(contender.origin.parent, ignore_errors=True)
    contender.origin = out / "origin"
    contender.results = [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _decoded(data: bytes) -> numpy.ndarray:
    with Image.open(io.BytesIO(data)) as picture:
        return numpy.asarray(picture.convert("RGB"))


def score_all(entries: list[Contender], batch: list[Path]) -> tuple[
        dict[str, list[dict[str, Any]]], float]:
    """Every variant of every contender: format, width, bytes, quality, score (decoded and
    measured here), the score the manifest recorded. And the seconds that checking each of
    (a)'s files once took (preparing the reference a width, decoding, scoring): what any
    search that checks its result adds at the least."""
    settings = Settings().image
    by_source = {path.name: path for path in batch}
    rows: dict[str, list[dict[str, Any]]] = {e.key: [] for e in entries}
    references: dict[tuple[str, int], Reference] = {}
    check = 0.0
    for entry in entries:
        for result in entry.results:
            if not result["ok"]:
                raise SystemExit(f"{entry.label}: {result['source']}: {result['error']}")
            source = by_source[Path(result["source"]).name]
            variants = result["variants"]
            widest = max(v["width"] for v in variants)
            for variant in variants:
                key = (source.name, variant["width"])
                if key not in references:
                    info = probe(source.read_bytes(), source.name, settings)
                    master = render_master(info, widest, height_for(
                        widest, info.displayed_width, info.displayed_height), source.name)
                    resized = fit(master, variant["width"], variant["height"]).copy_memory()
                    started = time.perf_counter()
                    references[key] = Reference(resized)
                    check += time.perf_counter() - started
                data = (entry.origin / variant["path"]).read_bytes()
                started = time.perf_counter()
                found = references[key].score(_decoded(data))
                if entry.key == "a":
                    check += time.perf_counter() - started
                rows[entry.key].append({
                    "source": source.name, "format": variant["format"],
                    "width": variant["width"], "bytes": len(data),
                    "quality": variant["quality"], "recorded": variant["score"],
                    "score": found})
    return rows, check


def summary(entries: list[Contender],
            rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    base_time = statistics.median(entries[0].times)
    jpeg_bytes = sum(r["bytes"] for r in rows["b"] if r["format"] == "jpeg")
    lines = []
    for entry in entries:
        for fmt in dict.fromkeys(r["format"] for r in rows[entry.key]):
            mine = [r for r in rows[entry.key] if r["format"] == fmt]
            scores = sorted(r["score"] for r in mine)
            auto = entry.key != "a"
            lines.append({
                "contender": entry.key, "label": entry.label, "format": fmt,
                "variants": len(mine), "bytes": sum(r["bytes"] for r in mine),
                "bytes_vs_d": sum(r["bytes"] for r in mine) / jpeg_bytes,
                "score_min": scores[0], "score_median": statistics.median(scores),
                "score_max": scores[-1],
                "in_band": sum(TARGET <= s <= TARGET + TOLERANCE for s in scores) if auto else None,
                "qualities": sorted(r["quality"] for r in mine),
                "time_vs_a": statistics.median(entry.times) / base_time,
                "out_of_band": [r for r in mine if auto
                                and not TARGET <= r["score"] <= TARGET + TOLERANCE],
            })
    return lines


def table(lines: list[dict[str, Any]]) -> str:
    names = {("a", "webp"): "(a) fixed WebP q80", ("a", "jpeg"): "(a) fixed JPEG q82",
             ("b", "webp"): "(b) auto WebP", ("b", "jpeg"): "(b) = (d) auto JPEG (mozjpeg)",
             ("c2", "avif"): "(c) auto AVIF, effort 2", ("c4", "avif"): "(c) auto AVIF, effort 4"}
    out = ["| contender | bytes vs (d) | score min / median / max | in [75, 78] | "
           "time vs (a) |", "|---|---:|---:|---:|---:|"]
    for line in lines:
        band = "-" if line["in_band"] is None else f"{line['in_band']} of {line['variants']}"
        out.append(f"| {names[(line['contender'], line['format'])]} | "
                   f"{line['bytes_vs_d']:.2f} | {line['score_min']:.1f} / "
                   f"{line['score_median']:.1f} / {line['score_max']:.1f} | {band} | "
                   f"{line['time_vs_a']:.2f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--runs", type=int, default=3, help="rounds of (a) and (b)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-avif", action="store_true", help="leave out (c)")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    if args.runs < 1 or args.workers < 1:
        parser.error("--runs and --workers must be at least 1")
    batch = sources(args.corpus)
    if not batch:
        parser.error(f"no photos in {args.corpus}")
    entries = contenders()[:2] if args.no_avif else contenders()
    scratch = Path(tempfile.mkdtemp(prefix="bench-quality-", dir=args.tmp))
    try:
        for _ in range(args.runs):
            for entry in entries[:2]:
                run(entry, batch, scratch, args.workers)
                print(f"{entry.label}: {entry.times[-1]:.2f} s", file=sys.stderr)
        for entry in entries[2:]:
            run(entry, batch, scratch, args.workers)
            print(f"{entry.label}: {entry.times[-1]:.2f} s", file=sys.stderr)
        rows, check = score_all(entries, batch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lines = summary(entries, rows)
    print(f"{len(batch)} sources ({', '.join(p.name for p in batch)}), widths {WIDTHS}\n")
    print(table(lines))
    base = statistics.median(entries[0].times)
    floor = (base + check / args.workers) / base
    print(f"\nChecking each of (a)'s files once (a reference a width, a decode and a score a "
          f"file, spread over {args.workers} workers): {floor:.2f}x the time of (a), the least "
          "any search that checks its result costs")
    for line in lines:
        for r in line["out_of_band"]:
            print(f"  out of band: {line['label']} {r['format']} {r['source']} at "
                  f"{r['width']}: q{r['quality']} scored {r['score']:.1f}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({
        "sources": [p.name for p in batch], "widths": WIDTHS, "runs": args.runs,
        "times": {e.key: e.times for e in entries}, "check_seconds": check,
        "check_floor": floor, "summary": lines, "variants": rows,
    }, indent=1, default=str))


if __name__ == "__main__":
    main()
