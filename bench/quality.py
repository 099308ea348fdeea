"""Benchmark auto quality: bytes, SSIMULACRA2 scores and time of fixed and auto qualities.

On the corpus photos (every good corpus file at least 640 pixels wide) and the Kodak images,
at the default widths 320, 640, 1280 and 1920 (each below the photo's own, plus its own),
each contender is the real CLI (`imgwarm optimize --json`, one worker a core) on the same
staged batch, into fresh folders:

    (a)     fixed   WebP q80 and JPEG q82 (the defaults)
    (b)     auto    WebP and JPEG at `auto` (target 75, tolerance 3), every variant checked
    (p1280) auto    with --quality-check-width 1280: wider variants predicted (unchecked)
    (p640)  auto    with --quality-check-width 640
    (p320)  auto    with --quality-check-width 320
    (c)     AVIF    `auto` at effort 2, and at effort 4 (AVIF alone; --avif to run them)
    (d)     JPEG    mozjpeg (the libvips wheel's encoder) at the quality that reaches the same
                    score: the JPEG half of (b)

(a), (b) and (p*) run R times interleaved, and their medians are compared; the AVIF runs
once each (timed against the median of (a)). Every file written is then decoded and scored
against the resized source's pixels (as the pipeline makes them), so the fixed runs get
scores too and the manifest's recorded scores are checked. Reported per line: total bytes
relative to (d) and to (a)'s same format, scores (min, 5th percentile, median, max), how
many variants are in [target, target + 3] and below target - 2, and wall time relative to
(a). Then the Pareto of time against the share in band, both formats together.

Usage:
    .venv/bin/python bench/quality.py                    # 3 rounds, WebP and JPEG
    .venv/bin/python bench/quality.py --runs 1 --avif    # also AVIF
    .venv/bin/python bench/quality.py --widths 640,1280  # the earlier table's widths

The Markdown tables are printed and, with the raw numbers, written to
bench/results/quality.json.
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
WIDTHS = "320,640,1280,1920"
MIN_WIDTH = 640
TARGET, TOLERANCE = 75.0, 3.0
PREDICTED = (1280, 640, 320)  # the --quality-check-width of the (p) contenders


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
        *(Contender(f"p{w}", f"auto, checked up to {w}", "webp,jpeg",
                    [*auto, "--quality-check-width", str(w)]) for w in PREDICTED),
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


def run(contender: Contender, batch: list[Path], scratch: Path, workers: int,
        widths: str) -> None:
    out = Path(tempfile.mkdtemp(prefix=f"quality-{contender.key}-", dir=scratch))
    command = [str(IMGWARM), "optimize", "--json", "--origin-root", str(out / "origin"),
               "--manifest-root", str(out / "manifest"), "--widths", widths,
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
                    "predicted": variant.get("predicted", False), "score": found})
    return rows, check


def _in_band(score: float) -> bool:
    return TARGET <= score <= TARGET + TOLERANCE


def _percentile(ordered: list[float], share: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[max(0, min(len(ordered) - 1, round(share * (len(ordered) - 1))))]


def _distribution(found: list[dict[str, Any]]) -> dict[str, Any]:
    scores = sorted(r["score"] for r in found)
    return {"variants": len(found), "bytes": sum(r["bytes"] for r in found),
            "score_min": scores[0], "score_p5": _percentile(scores, 0.05),
            "score_median": statistics.median(scores), "score_max": scores[-1],
            "in_band": sum(map(_in_band, scores)),
            "below": sum(s < TARGET - 2 for s in scores)}


def summary(entries: list[Contender],
            rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A line a contender and format."""
    base_time = statistics.median(entries[0].times)
    jpeg_bytes = sum(r["bytes"] for r in rows["b"] if r["format"] == "jpeg")
    lines = []
    for entry in entries:
        for fmt in dict.fromkeys(r["format"] for r in rows[entry.key]):
            mine = [r for r in rows[entry.key] if r["format"] == fmt]
            fixed = sum(r["bytes"] for r in rows["a"] if r["format"] == fmt) or None
            line = _distribution(mine)
            lines.append({
                **line, "contender": entry.key, "label": entry.label, "format": fmt,
                "bytes_vs_d": line["bytes"] / jpeg_bytes,
                "bytes_vs_a": None if fixed is None else line["bytes"] / fixed,
                "predicted": sum(r["predicted"] for r in mine),
                "predicted_in_band": sum(_in_band(r["score"]) for r in mine if r["predicted"]),
                "qualities": sorted(r["quality"] for r in mine),
                "time_vs_a": statistics.median(entry.times) / base_time,
                "out_of_band": [r for r in mine if entry.key != "a" and not _in_band(r["score"])],
            })
    return lines


def pareto(entries: list[Contender],
           rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A point a WebP + JPEG contender: time against (a), share of all its variants in band,
    and whether another contender is both faster and as often in band (then it is not on the
    front)."""
    base_time = statistics.median(entries[0].times)
    points = []
    for entry in entries:
        mine = rows[entry.key]
        if {r["format"] for r in mine} != {"webp", "jpeg"}:
            continue
        found = _distribution(mine)
        points.append({"contender": entry.key, "label": entry.label,
                       "time_vs_a": statistics.median(entry.times) / base_time,
                       "share_in_band": found["in_band"] / found["variants"],
                       "below": found["below"], "variants": found["variants"],
                       "checked": sum(not r["predicted"] for r in mine)
                       if entry.key != "a" else 0})
    for point in points:
        point["front"] = not any(
            other is not point and other["time_vs_a"] <= point["time_vs_a"]
            and other["share_in_band"] >= point["share_in_band"]
            and (other["time_vs_a"], other["share_in_band"]) !=
            (point["time_vs_a"], point["share_in_band"]) for other in points)
    return points


NAMES = {"a": "(a) fixed", "b": "(b) auto, every variant checked",
         **{f"p{w}": f"(p{w}) auto, checked up to {w} px" for w in PREDICTED},
         "c2": "(c) auto AVIF, effort 2", "c4": "(c) auto AVIF, effort 4"}
FORMATS = {"webp": "WebP", "jpeg": "JPEG", "avif": "AVIF"}


def table(lines: list[dict[str, Any]]) -> str:
    out = ["| contender | format | bytes vs (d) | bytes vs (a) | score min / p5 / median / max "
           "| in [75, 78] | below 73 | predicted (in band) | time vs (a) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for line in lines:
        fixed = "-" if line["bytes_vs_a"] is None else f"{line['bytes_vs_a']:.2f}"
        predicted = "-" if not line["predicted"] else \
            f"{line['predicted']} ({line['predicted_in_band']})"
        out.append(f"| {NAMES[line['contender']]} | {FORMATS[line['format']]} | "
                   f"{line['bytes_vs_d']:.2f} | {fixed} | {line['score_min']:.1f} / "
                   f"{line['score_p5']:.1f} / {line['score_median']:.1f} / "
                   f"{line['score_max']:.1f} | {line['in_band']} of {line['variants']} | "
                   f"{line['below']} | {predicted} | {line['time_vs_a']:.2f} |")
    return "\n".join(out)


def pareto_table(points: list[dict[str, Any]]) -> str:
    out = ["| contender | time vs (a) | variants in band | below 73 | checked | on the front |",
           "|---|---:|---:|---:|---:|---|"]
    for point in sorted(points, key=lambda p: p["time_vs_a"]):
        out.append(f"| {NAMES[point['contender']]} | {point['time_vs_a']:.2f} | "
                   f"{100 * point['share_in_band']:.0f}% | {point['below']} | "
                   f"{point['checked']} of {point['variants']} | "
                   f"{'yes' if point['front'] else 'no'} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--runs", type=int, default=3, help="rounds of (a) and (b)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--avif", action="store_true", help="also run (c), once each")
    parser.add_argument("--widths", default=WIDTHS, help=f"default {WIDTHS}")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    if args.runs < 1 or args.workers < 1:
        parser.error("--runs and --workers must be at least 1")
    batch = sources(args.corpus)
    if not batch:
        parser.error(f"no photos in {args.corpus}")
    entries = [e for e in contenders() if args.avif or not e.key.startswith("c")]
    rounds = [e for e in entries if not e.key.startswith("c")]
    scratch = Path(tempfile.mkdtemp(prefix="bench-quality-", dir=args.tmp))
    try:
        for _ in range(args.runs):
            for entry in rounds:
                run(entry, batch, scratch, args.workers, args.widths)
                print(f"{entry.label}: {entry.times[-1]:.2f} s", file=sys.stderr)
        for entry in entries[len(rounds):]:
            run(entry, batch, scratch, args.workers, args.widths)
            print(f"{entry.label}: {entry.times[-1]:.2f} s", file=sys.stderr)
        rows, check = score_all(entries, batch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    lines = summary(entries, rows)
    points = pareto(entries, rows)
    print(f"{len(batch)} sources ({', '.join(p.name for p in batch)}), widths "
          f"{args.widths}\n")
    print(table(lines))
    print()
    print(pareto_table(points))
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
        "sources": [p.name for p in batch], "widths": args.widths, "runs": args.runs,
        "times": {e.key: e.times for e in entries}, "check_seconds": check,
        "check_floor": floor, "summary": lines, "pareto": points, "variants": rows,
    }, indent=1, default=str))


if __name__ == "__main__":
    main()
