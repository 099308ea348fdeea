"""How well the quality a width needs can be predicted from the narrower widths (issue 26).

For each photo of the corpus (the same as bench/quality.py's), each format (WebP, JPEG) and
each default width (320, 640, 1280, 1920, below the photo's own), the lowest quality whose
SSIMULACRA2 score reaches the target is found by a full scan around the search's answer (the
truth), and the score of every quality tried is kept. Then predictors, each given only what
it would know at that point, are judged: what share of the predicted variants lands in
[target, target + tolerance], how many below target - 2, and what they would cost (encodes
and scores, weighted by pixels, against one encode a variant).

    same      the previous width's quality (the hint the search starts from today), unchecked
    trend     the previous width's, moved by the change between the two widths before it
    tiles     the search run on a proxy: an even sample of the variant's tiles (a quarter of
              its area, as a mosaic), its answer used for the whole variant, unchecked
              (the four most detailed tiles were tried first: 7 of 56 wide variants in band,
              the quality they asked 4-7 below the truth's for most)
    checked   the search as today (every variant checked): the reference point

Usage:
    .venv/bin/python bench/quality_predict.py            # all photos
    .venv/bin/python bench/quality_predict.py --limit 6  # the first six

Results are printed as Markdown and written to bench/results/quality_predict.json.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

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
from imgwarm.quality.search import lowest_quality  # noqa: E402
from imgwarm.quality.ssimulacra2 import Reference  # noqa: E402

TARGET, TOLERANCE = 75.0, 3.0


def decoded(data: bytes) -> numpy.ndarray:
    with Image.open(io.BytesIO(data)) as picture:
        return numpy.asarray(picture.convert("RGB"))


class Curve:
    """Scores of one variant by quality, computed on demand and kept."""

    def __init__(self, frame: Frame, fmt: str, settings: Any, reference: Reference) -> None:
        self.frame, self.fmt, self.settings, self.reference = frame, fmt, settings, reference
        self.scores: dict[int, float] = {}
        self.seconds = 0.0  # encoding and scoring, for the cost of a check

    def score(self, quality: int) -> float:
        quality = min(max(quality, 1), 100)
        if quality not in self.scores:
            started = time.perf_counter()
            data = encode(self.frame, self.fmt, self.settings.image, None, quality)  # type: ignore[arg-type]
            self.scores[quality] = self.reference.score(decoded(data))
            self.seconds += time.perf_counter() - started
        return self.scores[quality]

    def lowest(self, hint: int | None) -> int:
        """The truth: the lowest quality reaching the target (the search, then a step down
        while the one below still reaches it, for its rare non-monotone steps)."""
        chosen = lowest_quality(
            lambda q: encode(self.frame, self.fmt, self.settings.image, None, q),  # type: ignore[arg-type]
            decoded, self.reference, target=TARGET, tolerance=TOLERANCE, hint=hint)
        self.scores.setdefault(chosen.quality, chosen.score)
        quality = chosen.quality
        while quality > 1 and self.score(quality - 1) >= TARGET:
            quality -= 1
        return quality


def proxy(image: Any, grid: int = 8, every: int = 4) -> Any:
    """A sample of the variant: of a ``grid`` x ``grid`` of tiles, one in ``every`` spread
    evenly (a diagonal lattice: every part of the picture, each kind of content in its
    share), joined into one mosaic (a quarter of the area with the defaults)."""
    import pyvips

    tw, th = image.width // grid, image.height // grid
    tiles = [image.crop(c * tw, r * th, tw, th) for r in range(grid) for c in range(grid)
             if (r + c) % every == 0]
    across = max(1, round(len(tiles) ** 0.5))
    return pyvips.Image.arrayjoin(tiles, across=across).copy_memory()


def measure(path: Path, settings: Settings) -> list[dict[str, Any]]:
    info = probe(path.read_bytes(), path.name, settings.image)
    full_w, full_h = info.displayed_width, info.displayed_height
    widths = plan_widths(full_w, full_h, settings.image.widths, 16383)
    master = render_master(info, widths[-1], height_for(widths[-1], full_w, full_h), path.name)
    rows = []
    for fmt in ("webp", "jpeg"):
        truth: list[int] = []
        for width in widths:
            image = fit(master, width, height_for(width, full_w, full_h)).copy_memory()
            curve = Curve(Frame(image), fmt, settings, Reference(image))
            best = curve.lowest(truth[-1] if truth else None)
            truth.append(best)
            started = time.perf_counter()
            mosaic = proxy(image)
            tiles = Curve(Frame(mosaic), fmt, settings, Reference(mosaic)).lowest(
                truth[-2] if len(truth) > 1 else None)
            tiles_seconds = time.perf_counter() - started
            same = truth[-2] if len(truth) > 1 else None
            trend = (truth[-2] + (truth[-2] - truth[-3])) if len(truth) > 2 else same
            rows.append({
                "source": path.name, "format": fmt, "width": width, "pixels": image.width *
                image.height, "truth": best, "score_truth": curve.score(best),
                "same": same, "score_same": None if same is None else curve.score(same),
                "trend": trend, "score_trend": None if trend is None else curve.score(trend),
                "tiles": tiles, "score_tiles": curve.score(tiles), "tiles_seconds": tiles_seconds,
                "check_seconds": curve.seconds / max(1, len(curve.scores)),
            })
    return rows


def judged(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    scored = [r[f"score_{name}"] for r in rows if r[f"score_{name}"] is not None]
    return {"predicted": len(scored),
            "in_band": sum(TARGET <= s <= TARGET + TOLERANCE for s in scored),
            "below_2": sum(s < TARGET - 2 for s in scored),
            "above_band": sum(s > TARGET + TOLERANCE for s in scored),
            "errors": statistics.quantiles([s - TARGET for s in scored], n=20)
            if len(scored) > 1 else []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "quality_predict.json")
    args = parser.parse_args()
    batch = sources(args.corpus)[:args.limit or None]
    settings = Settings()
    rows = []
    for path in batch:
        rows += measure(path, settings)
        print(f"{path.name}: done", file=sys.stderr)
    print(f"{len(batch)} photos, {len(rows)} variants (WebP and JPEG at the default widths)\n")
    print("| predictor | variants | in [75, 78] | below 73 | above 78 |")
    print("|---|---:|---:|---:|---:|")
    report = {}
    for name in ("same", "trend", "tiles"):
        for wide in (False, True):
            chosen = [r for r in rows if r["width"] >= 1280] if wide else rows
            found = judged(chosen, name)
            report[f"{name}{'_wide' if wide else ''}"] = found
            label = f"{name}{' (1280 and wider)' if wide else ''}"
            print(f"| {label} | {found['predicted']} | {found['in_band']} | "
                  f"{found['below_2']} | {found['above_band']} |")
    deltas = [r["truth"] - r["same"] for r in rows if r["same"] is not None]
    print(f"\nquality the next width needs, minus the previous width's: "
          f"{dict(sorted((d, deltas.count(d)) for d in set(deltas)))}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"rows": rows, "report": report}, indent=1))


if __name__ == "__main__":
    main()
