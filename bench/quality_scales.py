"""Can a quality check be cheaper than the whole metric (issue 26)? SSIMULACRA2 scores six
scales; the first, at the variant's own size, is three quarters of its work. Here each
variant's score is estimated without it, and the error against the whole score measured:

    ratio     the first scale's 108 terms estimated from the second scale's, by the ratio of
              each term between the two scales at one calibration quality of the same
              variant (the quality whose score is nearest the target): a full score once, then
              every other quality at a quarter of the cost
    ratio<-w  the same ratios taken from another width of the same photo and format (the
              previous width, or 320 or 640 px): no full score at this width at all
    offset    the five coarser scales alone (the score of the half-size pair) plus the
              difference between that and the whole score at the calibration quality

Every photo of bench/quality.py (WebP q 40..96 and JPEG, the product's encoders), widths 320,
640, 1280 and 1920 below the photo's own, the qualities whose whole score lies within 6 points
of the target. Errors are estimate minus whole score, in points.

Usage:
    .venv/bin/python bench/quality_scales.py [--limit N]

Results are printed as Markdown and written to bench/results/quality_scales.json.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import cv2
import numpy
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from quality import CORPUS, sources  # noqa: E402

from imgwarm.config import Settings  # noqa: E402
from imgwarm.pipeline.encode import Frame, encode  # noqa: E402
from imgwarm.pipeline.make import render_master  # noqa: E402
from imgwarm.pipeline.probe import probe  # noqa: E402
from imgwarm.pipeline.resize import fit  # noqa: E402
from imgwarm.pipeline.variants import height_for, plan_widths  # noqa: E402
from imgwarm.quality import ssimulacra2 as metric  # noqa: E402

TARGET, NEAR = 75.0, 6.0
QUALITIES = range(40, 100, 4)
Terms = list[list[float]]


def terms(reference: metric.Reference, data: bytes) -> Terms:
    """Every scale's terms of a file against the reference (the metric's own steps)."""
    with Image.open(io.BytesIO(data)) as picture:
        second = metric.pixels(numpy.asarray(picture.convert("RGB")))
    levels = metric._levels(cv2.LUT(second, metric._LINEAR))
    return [metric._scale_terms(side, metric._xyb(linear))
            for side, linear in zip(reference._scales, levels, strict=False)]


def ratios(found: Terms) -> list[float]:
    return [a / b if b else 1.0 for a, b in zip(found[0], found[1], strict=True)]


def by_ratio(found: Terms, ratio: list[float]) -> float:
    return metric._final([[b * r for b, r in zip(found[1], ratio, strict=True)], *found[1:]])


def summary(errors: list[float]) -> dict[str, float]:
    size = numpy.abs(errors)
    return {"n": len(errors), "mean": float(numpy.mean(errors)), "mean_abs": float(size.mean()),
            "p95_abs": float(numpy.percentile(size, 95)), "max_abs": float(size.max()),
            "within_1": float((size <= 1).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    settings = Settings().updated(widths="320,640,1280,1920")
    errors: dict[str, list[float]] = {}
    photos = sources(CORPUS)[:args.limit or None]
    for path in photos:
        data = path.read_bytes()
        info = probe(data, path.name, settings.image)
        full_w, full_h = info.displayed_width, info.displayed_height
        widths = plan_widths(full_w, full_h, settings.image.widths, 16383)
        master = render_master(info, widths[-1], height_for(widths[-1], full_w, full_h),
                               path.name)
        for fmt in ("webp", "jpeg"):
            calibrated: dict[int, list[float]] = {}
            for width in widths:
                image = fit(master, width, height_for(width, full_w, full_h)).copy_memory()
                frame = Frame(image)
                reference = metric.Reference(image)
                rows = []
                for quality in QUALITIES:
                    found = terms(reference, encode(frame, fmt, settings.image, None, quality))
                    rows.append((quality, metric._final(found), found))
                at, whole_at, found_at = min(rows, key=lambda r: abs(r[1] - TARGET))
                calibrated[width] = ratios(found_at)
                offset = whole_at - metric._final(found_at[1:])
                others = {"ratio<-previous": max((w for w in calibrated if w < width),
                                                 default=None),
                          "ratio<-320": 320, "ratio<-640": 640}
                for quality, whole, found in rows:
                    if abs(whole - TARGET) > NEAR or quality == at:
                        continue
                    errors.setdefault(f"ratio {fmt}", []).append(
                        by_ratio(found, calibrated[width]) - whole)
                    errors.setdefault(f"offset {fmt}", []).append(
                        metric._final(found[1:]) + offset - whole)
                    for name, source in others.items():
                        if source is not None and source != width and source in calibrated:
                            errors.setdefault(f"{name} {fmt}", []).append(
                                by_ratio(found, calibrated[source]) - whole)
        print(f"{path.name}: done", file=sys.stderr, flush=True)
    results = {name: summary(found) for name, found in errors.items()}
    print(f"Estimated against whole SSIMULACRA2 scores, {len(photos)} photos, widths 320-1920, "
          f"scores within {NEAR:g} of {TARGET:g} (points)\n")
    print("| estimate | format | n | mean error | mean abs | p95 abs | max abs | within 1 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, found in sorted(results.items()):
        kind, fmt = name.rsplit(" ", 1)
        print(f"| {kind} | {fmt} | {found['n']} | {found['mean']:+.2f} | "
              f"{found['mean_abs']:.2f} | {found['p95_abs']:.2f} | {found['max_abs']:.2f} | "
              f"{found['within_1']:.0%} |")
    out = HERE / "results" / "quality_scales.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
