"""Benchmark JPEG XL against the JPEG and WebP imgwarm makes: bytes and encode time at equal
SSIMULACRA2 score, by effort; and the JPEG recompressed losslessly.

On the corpus's camera photos and the Kodak images, each resized as the pipeline resizes
(sRGB, upright) to 640 and 1280 px (or its own width when narrower), through imgwarm's own
encoders (pipeline/encode.py):

    jpeg            the default JPEG (q82, progressive, optimized coding): its score is the
                    level every other contender must reach
    webp            WebP at the lowest quality whose score reaches the JPEG's
    jxl e1..e9      JPEG XL from the pixels, at the lowest quality that reaches it, by effort
    jxl from jpeg   the JPEG above recompressed losslessly (the same pixels: the same score)

Reported: bytes relative to the JPEG's, encode seconds relative to the JPEG's (one thread
each, the search's encodes not counted: the time of one encode at the quality found).

Usage (a quiet machine):
    .venv/bin/python bench/jxl.py [--efforts 3,5,7] [--widths 640,1280]

Written also to bench/results/jxl.json.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy
import pyvips
from common import HERE  # bench/common.py
from PIL import Image

from imgwarm.config import Settings
from imgwarm.pipeline import jxl
from imgwarm.pipeline.encode import Frame, encode
from imgwarm.pipeline.make import render_master
from imgwarm.pipeline.probe import probe
from imgwarm.pipeline.resize import fit
from imgwarm.pipeline.variants import height_for
from imgwarm.quality.search import lowest_quality
from imgwarm.quality.ssimulacra2 import Reference
from tests.support.corpus import corpus_dir

PHOTOS = ["42_IndexError.jpg", "HMD_Nokia_8.3_5G.jpg", "xmp_test.jpg", "33-type_error.jpg",
          "canon_hdr_YES.jpg", "pyvips_sample.jpg", *(f"Landscape_{i}.jpg" for i in (1, 5)),
          "kodim03.png", "kodim07.png"]


def decoded(data: bytes) -> numpy.ndarray:
    import pillow_jxl  # noqa: F401  (registers JPEG XL with Pillow)

    with Image.open(io.BytesIO(data)) as image:
        return numpy.asarray(image.convert("RGB"))


def timed(make: Callable[[], bytes], runs: int = 3) -> tuple[bytes, float]:
    took, data = [], b""
    for _ in range(runs):
        started = time.perf_counter()
        data = make()
        took.append(time.perf_counter() - started)
    return data, statistics.median(took)


def one(frame: Frame, settings: Settings, efforts: list[int]) -> dict[str, Any]:
    image = settings.image
    reference = Reference(frame.image)
    jpeg, t_jpeg = timed(lambda: encode(frame, "jpeg", image, None))
    target = reference.score(decoded(jpeg))
    found: dict[str, Any] = {"jpeg": {"bytes": len(jpeg), "s": t_jpeg, "score": target}}

    def at_target(fmt: str, tuned: Settings) -> dict[str, Any]:
        chosen = lowest_quality(lambda q: encode(frame, fmt, tuned.image, None, q),  # type: ignore[arg-type]
                                decoded, reference, target=target, tolerance=1.0)
        _, took = timed(lambda: encode(frame, fmt, tuned.image, None, chosen.quality))  # type: ignore[arg-type]
        return {"bytes": len(chosen.data), "s": took, "score": chosen.score,
                "quality": chosen.quality}

    found["webp"] = at_target("webp", settings)
    for effort in efforts:
        found[f"jxl e{effort}"] = at_target("jxl", settings.updated(jxl_effort=effort))
    data, took = timed(lambda: jxl.recompress(jpeg))
    found["jxl from jpeg"] = {"bytes": len(data), "s": took, "score": target}
    return found


def frames(widths: list[int]) -> list[tuple[str, int, Frame]]:
    settings = Settings().image
    out = []
    for name in PHOTOS:
        path = corpus_dir() / name
        data = path.read_bytes()
        info = probe(data, name, settings)
        full_w, full_h = info.displayed_width, info.displayed_height
        top = min(max(widths), full_w)
        master = render_master(info, top, height_for(top, full_w, full_h), name)
        for width in sorted({min(w, full_w) for w in widths}):
            image: pyvips.Image = fit(master, width, height_for(width, full_w, full_h))
            out.append((name, width, Frame(image.copy_memory())))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--efforts", default="3,5,7")
    parser.add_argument("--widths", default="640,1280")
    args = parser.parse_args()
    efforts = [int(e) for e in args.efforts.split(",")]
    widths = [int(w) for w in args.widths.split(",")]
    settings = Settings()
    rows = [{"photo": name, "width": width, **one(frame, settings, efforts)}
            for name, width, frame in frames(widths)]
    names = ["webp", *(f"jxl e{e}" for e in efforts), "jxl from jpeg"]
    lines = [f"JPEG XL and WebP against the default JPEG (q82) at its SSIMULACRA2 score, "
             f"{len(rows)} images ({', '.join(map(str, widths))} px); sums over the images",
             "", "| contender | bytes / JPEG | encode time / JPEG | median quality | "
             "median score (JPEG's) |", "|---|---:|---:|---:|---:|"]
    for name in names:
        b = sum(r[name]["bytes"] for r in rows) / sum(r["jpeg"]["bytes"] for r in rows)
        t = sum(r[name]["s"] for r in rows) / sum(r["jpeg"]["s"] for r in rows)
        q = statistics.median(r[name].get("quality", 0) for r in rows)
        s = statistics.median(r[name]["score"] for r in rows)
        j = statistics.median(r["jpeg"]["score"] for r in rows)
        lines.append(f"| {name} | {b:.2f} | {t:.2f} | {q:g} | {s:.1f} ({j:.1f}) |")
    print("\n".join(lines))
    out = HERE / "results" / "jxl.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
