"""Fuzz imgwarm optimize at scale, and measure its peak memory on the worst inputs we can build.

    fuzz      thousands of mutated JPEGs (tests/fuzzing.py: the same mutations and invariants
              as the test, more cases), on the full-size and shrink-on-load paths; prints
              cases, accepted, refused and findings, per mutation.
    --memory  peak RSS (the kernel's count, for the whole imgwarm process) for hostile and
              very large inputs, next to imgwarm's own estimate and the max_memory budget:
              EXIF count and overlap bombs, progressive CMYK 10000x10000 alone and two at once,
              progressive 4:4:4, baseline 100 MP, an interlaced PNG, a 1000x60000 strip.

Usage:
    .venv/bin/python bench/fuzz.py                    # 3000 cases on each path
    .venv/bin/python bench/fuzz.py --cases 10000 --seed 11
    .venv/bin/python bench/fuzz.py --memory

Results are printed as Markdown and written to bench/results/fuzz.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.support import hostile  # noqa: E402
from tests.support.corpus import corpus_dir  # noqa: E402
from tests.support.fuzzing import (  # noqa: E402
    MUTATIONS,
    check,
    corpus_seeds,
    make_cases,
    synthetic_seeds,
)
from tests.support.images import photo  # noqa: E402
from tests.support.measure import peak_rss  # noqa: E402

MIB = 1 << 20
OUTPUT = HERE / "results" / "fuzz.json"


def fuzz(count: int, seed: int) -> dict[str, Any]:
    seeds = synthetic_seeds() | corpus_seeds(corpus_dir())
    cases = make_cases(seeds, count, seed=seed)
    results: dict[str, Any] = {"seeds": len(seeds), "cases": count}
    print(f"{count} cases from {len(seeds)} seeds, {len(MUTATIONS)} mutations\n")
    print("| path | cases | accepted | refused | accepted though strict decoders refuse "
          "(compared with the seed) | findings | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, widths in (("full size", None), ("shrink-on-load (widths 64,120)", "64,120")):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            report = check(Path(work), seeds, cases, widths)
        took = time.perf_counter() - started
        results[label] = report.as_dict() | {"seconds": round(took, 1),
                                             "finding_texts": report.findings[:50]}
        print(f"| {label} | {report.cases} | {report.accepted} | {report.refused} | "
              f"{report.strict_refused_accepted} | {len(report.findings)} | {took:.0f} |")
        for finding in report.findings[:20]:
            print(f"    finding: {finding}")
    first = results["full size"]
    print("\n| mutation | accepted | refused |\n|---|---:|---:|")
    for kind in sorted(MUTATIONS):
        print(f"| {kind} | {first['accepted_by_kind'].get(kind, 0)} | "
              f"{first['refused_by_kind'].get(kind, 0)} |")
    return results


def _inputs(folder: Path) -> list[tuple[str, list[Path]]]:
    """The worst inputs, written once into ``folder``."""

    def write(name: str, make: Any) -> Path:
        path = folder / name
        if not path.exists():
            path.write_bytes(make())
        return path

    def pattern(width: int, height: int) -> Any:
        import pyvips

        x = pyvips.Image.xyz(width, height)
        bands = (x[0] % 251).bandjoin([x[1] % 241, (x[0] + x[1]) % 239])
        return bands.cast("uchar").copy(interpretation="srgb")

    cmyk = write("cmyk-progressive-10k.jpg", lambda: hostile.progressive_cmyk(10000, 10000))
    cmyk2 = folder / "cmyk-progressive-10k-b.jpg"
    if not cmyk2.exists():
        cmyk2.write_bytes(cmyk.read_bytes())
    return [
        ("EXIF BYTE count 2^27 (1 KB file)", [write("exif-count.jpg", hostile.exif_count_bomb)]),
        ("EXIF overlapping entries (62 KB block)",
         [write("exif-overlap.jpg", hostile.exif_overlap_bomb)]),
        ("progressive CMYK 10000x10000", [cmyk]),
        ("two progressive CMYK 10000x10000 at once", [cmyk, cmyk2]),
        ("progressive 4:4:4 RGB 10000x10000", [write("rgb444-progressive-10k.jpg", lambda: bytes(
            pattern(10000, 10000).jpegsave_buffer(Q=70, interlace=True, subsample_mode="off",
                                                  keep="none")))]),
        ("baseline RGB 10000x10000", [write("baseline-10k.jpg", lambda: bytes(
            pattern(10000, 10000).jpegsave_buffer(Q=70, keep="none")))]),
        ("interlaced PNG 4000x4000", [write("interlaced-4k.png", lambda: bytes(
            pattern(4000, 4000).pngsave_buffer(interlace=True, compression=9)))]),
        ("strip 1000x60000 (made 273 wide)", [write("strip-1kx60k.jpg", lambda: bytes(
            pattern(1000, 60000).jpegsave_buffer(Q=70, keep="none")))]),
        ("small photo (idle reference)", [write("small.jpg", lambda: bytes(
            photo(640, 480).jpegsave_buffer(keep="none")))]),
    ]


def estimate(path: Path) -> int | None:
    from imgwarm.config import load_settings
    from imgwarm.pipeline.make import plan
    from imgwarm.pipeline.probe import probe

    settings = load_settings()
    info = probe(path.read_bytes(), str(path), settings.image)
    return plan(str(path), info, settings.image).cost


def memory(folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    rows: dict[str, Any] = {}
    print("Peak RSS of one `imgwarm optimize --workers 2` process; max_memory = 1024 MiB "
          "(the default)\n")
    print("| input | exit | peak RSS MiB | above the idle run MiB | imgwarm's estimate MiB |")
    print("|---|---:|---:|---:|---:|")
    inputs = _inputs(folder)
    idle = None
    for label, files in reversed(inputs):  # the idle reference first
        with tempfile.TemporaryDirectory() as out:
            code, peak = peak_rss(["optimize", "--workers", "2", "--origin-root",
                                   f"{out}/o", "--manifest-root", f"{out}/m",
                                   *map(str, files)], Path(out))
        idle = peak if idle is None else idle
        guesses = [estimate(f) for f in files]
        guess = "+".join(f"{g / MIB:.0f}" for g in guesses if g is not None)
        rows[label] = {"exit": code, "peak_mib": round(peak / MIB), "estimate_mib": guess,
                       "above_idle_mib": round((peak - idle) / MIB)}
    for label, _ in inputs:
        row = rows[label]
        print(f"| {label} | {row['exit']} | {row['peak_mib']} | {row['above_idle_mib']} | "
              f"{row['estimate_mib']} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=3000, help="cases per path")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the mutations")
    parser.add_argument("--memory", action="store_true", help="measure peak RSS instead")
    parser.add_argument("--inputs", type=Path, default=HERE / "results" / "memory-inputs",
                        help="where the large inputs are written (kept for the next run)")
    args = parser.parse_args()
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    found = OUTPUT.read_text() if OUTPUT.exists() else "{}"
    results: dict[str, Any] = json.loads(found)
    if args.memory:
        results["memory"] = memory(args.inputs)
    else:
        results["fuzz"] = fuzz(args.cases, args.seed)
    OUTPUT.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
