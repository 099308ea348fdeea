"""Fuzz imgwarm optimize at scale, and measure its peak memory on the worst inputs we can build.

    fuzz      thousands of mutated JPEGs (tests/support/fuzzing.py: the same mutations and
              invariants as the test, more cases), on the full-size and shrink-on-load paths;
              prints cases, accepted, refused and findings, per mutation.
    --formats thousands of mutated sources of every other format (PNG, WebP, AVIF, HEIC, TIFF,
              GIF: tests/support/fuzz_formats.py) and hundreds of mutated Ultra HDR JPEGs
              (tests/support/fuzz_gainmap.py), one run a format under max_memory (256M unless
              --max-memory), its processes' memory sampled; prints per format and mutation:
              cases, accepted, refused, accepted though the strict decoder refuses
              (compared), findings, internal errors; the classes of findings with an example
              each; each run's peak (all its processes' anonymous memory) against max_memory.
    --memory  peak RSS (the kernel's count, for the whole imgwarm process) for hostile and
              very large inputs, next to imgwarm's own estimate and the max_memory budget:
              EXIF count and overlap bombs, progressive CMYK 10000x10000 alone and two at once,
              progressive 4:4:4, baseline 100 MP, an interlaced PNG, a 1000x60000 strip.

Usage:
    .venv/bin/python bench/fuzz.py                    # 3000 cases on each path
    .venv/bin/python bench/fuzz.py --cases 10000 --seed 11
    .venv/bin/python bench/fuzz.py --memory
    .venv/bin/python bench/fuzz.py --formats          # 3000 other sources, 220 gain maps
    .venv/bin/python bench/fuzz.py --formats --format-cases 600 --gainmap-cases 44  # a fifth
    .venv/bin/python bench/fuzz.py --formats --only gif,tiff --format-cases 1000 --gainmap-cases 0

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

from tests.support import fuzz_gainmap, hostile  # noqa: E402
from tests.support.corpus import corpus_dir  # noqa: E402
from tests.support.fuzz_formats import FORMATS, OTHERS  # noqa: E402
from tests.support.fuzzing import (  # noqa: E402
    MUTATIONS,
    Case,
    Report,
    check,
    corpus_seeds,
    format_cases,
    make_cases,
    run_imgwarm,
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


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].isalpha() else int(text)


def _idle(max_memory: str) -> int:
    """The peak of a run that makes one small PNG: the workers alone, nearly idle."""
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "in"
        folder.mkdir()
        (folder / "small.png").write_bytes(bytes(photo(64, 48).pngsave_buffer()))
        _, peak = run_imgwarm(Path(work), folder, settings={"max_memory": max_memory},
                              memory=True)
    return peak


def _declared(data: bytes) -> int:
    """The pixels a file's header declares (0 when libvips cannot read its header)."""
    import pyvips

    try:
        image = pyvips.Image.new_from_buffer(data, "")
    except Exception:  # pyvips.Error, or what a hostile header makes pyvips raise
        return 0
    return int(image.width * image.height)


def _largest_alone(cases: list[Case], max_memory: str, count: int = 3) -> list[dict[str, Any]]:
    """The cases declaring the most pixels (within the default max_pixels), each run alone:
    which input took a run's peak."""
    sized = sorted(((_declared(c.data), c) for c in cases), key=lambda p: (p[0], p[1].name))
    rows = []
    for pixels, case in [p for p in sized if 0 < p[0] <= 100_000_000][-count:]:
        with tempfile.TemporaryDirectory() as work:
            folder = Path(work) / "in"
            folder.mkdir()
            (folder / case.file).write_bytes(case.data)
            done, peak = run_imgwarm(Path(work), folder, settings={"max_memory": max_memory},
                                     memory=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        found = json.loads(lines[0]) if lines else {}
        rows.append({"case": case.name, "bytes": len(case.data), "declared_pixels": pixels,
                     "peak_mib": round(peak / MIB), "ok": found.get("ok"),
                     "error": (found.get("error") or "")[-160:]})
    return rows


def formats(per_format: int, gainmap_cases: int, seed: int, max_memory: str,
            only: tuple[str, ...] = OTHERS) -> dict[str, Any]:
    """Every other source format (or ``only`` those), then gain maps, each in one run under
    ``max_memory``."""
    bound = _size(max_memory)
    idle = _idle(max_memory)
    reports: dict[str, Report] = {}
    kinds: dict[str, list[str]] = {}
    largest: dict[str, list[dict[str, Any]]] = {}
    for name in only if per_format else ():
        fmt = FORMATS[name]
        cases = format_cases(name, per_format, seed=seed)
        with tempfile.TemporaryDirectory() as work:
            reports[name] = check(Path(work), fmt.seeds(), cases,
                                  settings={"max_memory": max_memory}, memory=True)
        kinds[name] = sorted(fmt.mutations)
        largest[name] = _largest_alone(cases, max_memory)
        print(f"{name}: {len(cases)} cases, {reports[name].seconds:.0f} s", file=sys.stderr)
    if gainmap_cases:
        gain_seeds = fuzz_gainmap.seeds()
        gain_cases = fuzz_gainmap.make_cases(gain_seeds, gainmap_cases, seed=seed,
                                             heavy_every=3)
        with tempfile.TemporaryDirectory() as work:
            reports["gain map"] = fuzz_gainmap.check(Path(work), gain_seeds, gain_cases,
                                                     settings={"max_memory": max_memory},
                                                     memory=True)
        kinds["gain map"] = sorted(fuzz_gainmap.MUTATIONS)
    total = sum(r.cases for n, r in reports.items() if n != "gain map")
    print(f"{total} mutated non-JPEG sources ({per_format} a format) and {gainmap_cases} "
          f"mutated Ultra HDR JPEGs; max_memory {max_memory}; a run of one small PNG peaks at "
          f"{idle / MIB:.0f} MiB (its workers, idle)\n")
    print("| format | cases | accepted | refused | accepted though strict refuses (compared) "
          "| findings | internal errors | peak MiB (all processes) | above the idle run MiB "
          "| over max_memory | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for name, r in reports.items():
        # the bound is on all of it: idle workers count (issue 38), the margin says how far
        over = "**yes**" if r.peak_memory > bound else "no"
        print(f"| {name} | {r.cases} | {r.accepted} | {r.refused} | "
              f"{r.strict_refused_accepted} | {len(r.findings)} | {r.internal_errors} | "
              f"{r.peak_memory / MIB:.0f} | {(r.peak_memory - idle) / MIB:.0f} | {over} | "
              f"{r.seconds:.0f} |")
    print("\n| format | mutation | cases | accepted | refused | compared | findings | "
          "internal errors |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, r in reports.items():
        for kind in kinds[name]:
            accepted, refused = r.accepted_by_kind[kind], r.refused_by_kind[kind]
            print(f"| {name} | {kind} | {accepted + refused} | {accepted} | {refused} | "
                  f"{r.compared_by_kind[kind]} | {r.findings_by_kind[kind]} | "
                  f"{r.errors_by_kind[kind]} |")
    print("\n| format | class of finding | count | example |\n|---|---|---:|---|")
    for name, r in reports.items():
        for cls, count in sorted(r.classes.items()):
            example = r.examples[cls].replace("|", "\\|").replace("\n", " ")[:200]
            print(f"| {name} | {cls} | {count} | `{example}` |")
    gain = reports.get("gain map")
    if isinstance(gain, fuzz_gainmap.GainReport):
        print(f"\nGain maps: {gain.hdr} accepted as HDR, {gain.made_sdr} made SDR "
              f"({gain.made_sdr_warned} with a warning), {gain.refused} refused.")
    if largest:
        print("\nThe cases declaring the most pixels, each run alone (peak: all processes):\n")
        print("| format | case | bytes | declared MP | peak MiB | over max_memory | outcome |")
        print("|---|---|---:|---:|---:|---|---|")
    for name, rows in largest.items():
        for row in rows:
            over = "**yes**" if row["peak_mib"] * MIB > bound else "no"
            outcome = "made" if row["ok"] else row["error"].split(": ", 1)[-1][:70]
            print(f"| {name} | {row['case']} | {row['bytes']} | "
                  f"{row['declared_pixels'] / 1e6:.1f} | {row['peak_mib']} | {over} | "
                  f"{outcome.replace('|', '/')} |")
    runs_over = sum(r.peak_memory > bound for r in reports.values())
    print(f"Runs over max_memory: {runs_over} of {len(reports)}.")
    return {"max_memory": max_memory, "idle_peak_mib": round(idle / MIB),
            "runs_over_max_memory": runs_over, "largest_alone": largest,
            "reports": {n: r.as_dict() | {"finding_texts": r.findings[:50]}
                        for n, r in reports.items()}}


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
    parser.add_argument("--formats", action="store_true",
                        help="fuzz every other source format and gain maps instead")
    parser.add_argument("--format-cases", type=int, default=3000,
                        help="with --formats: mutated non-JPEG sources, shared by the formats")
    parser.add_argument("--gainmap-cases", type=int, default=220,
                        help="with --formats: mutated Ultra HDR JPEGs")
    parser.add_argument("--only", default=",".join(OTHERS),
                        help="with --formats: the formats to fuzz (comma-separated)")
    parser.add_argument("--max-memory", default="256M",
                        help="with --formats: the max_memory setting of the runs")
    parser.add_argument("--inputs", type=Path, default=HERE / "results" / "memory-inputs",
                        help="where the large inputs are written (kept for the next run)")
    args = parser.parse_args()
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    found = OUTPUT.read_text() if OUTPUT.exists() else "{}"
    results: dict[str, Any] = json.loads(found)
    if args.memory:
        results["memory"] = memory(args.inputs)
    elif args.formats:
        only = tuple(n for n in args.only.split(",") if n)
        unknown = set(only) - set(OTHERS)
        if unknown:
            parser.error(f"--only: {sorted(unknown)} not among {', '.join(OTHERS)}")
        per_format = -(-args.format_cases // len(only)) if only else 0
        results["formats"] = formats(per_format, args.gainmap_cases, args.seed, args.max_memory,
                                     only)
    else:
        results["fuzz"] = fuzz(args.cases, args.seed)
    OUTPUT.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
