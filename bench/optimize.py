"""Benchmark `imgwarm optimize` against the floor (plain pyvips), Pillow and cwebp.

Every contender runs as a subprocess on the same staged batch of corpus photos, with the same
widths (imgwarm's defaults: WebP at every width, the JPEG at the fallback widths) and
qualities and the same parallelism (N = one per CPU), R times, interleaved (a, b, c, d, a, b,
c, d, ...) so that machine noise spreads over all of them; medians are reported. Peak memory
is that of the whole process tree (the subprocess and its children), sampled every 10 ms.

    (a) imgwarm   `imgwarm optimize --json ...` (the real CLI), fresh output folders each run
    (b) floor     plain pyvips: thumbnail (shrink-on-load, autorotate) -> copy_memory ->
                  resize per width (lanczos3) -> webpsave_buffer + jpegsave_buffer -> files;
                  a ThreadPoolExecutor of N threads, concurrency 1, no operation cache
    (c) pillow    Image.open, draft (JPEG shrink-on-load), exif_transpose, RGB, resize
                  (LANCZOS) per width, WebP and progressive optimized JPEG; a process pool of N
    (d) cwebp     `cwebp -q 80 -m 4 -resize W H SRC -o OUT` per source and width, N at a time
                  (xargs -P N): the WebP half of the work only, and no CMYK sources
    (e) baseline  (a) from another checkout (--baseline DIR), to compare two versions

Usage:
    .venv/bin/python bench/optimize.py                 # defaults: corpus photos x2, 3 runs
    .venv/bin/python bench/optimize.py --runs 5 --repeat 4
    .venv/bin/python bench/optimize.py --files a.jpg b.jpg --repeat 20
    .venv/bin/python bench/optimize.py --only ae --baseline ../old-checkout --runs 7

The Markdown table is printed and, with the raw numbers, written to bench/results/optimize.json.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_CORPUS = ROOT / "tests" / "corpus"
DEFAULT_OUTPUT = HERE / "results" / "optimize.json"

# The corpus files that are bad on purpose (rejected by imgwarm), and are not benchmarked.
BAD_FILES = frozenset({  # the same kinds the tests refuse
    "truncated.jpg", "corrupt-header.jpg", "notjpeg.jpg", "cogs_png_renamed.jpg",
    "lottapixel.jpg", "corrupted.jpg", "monkey12.jpg",
})
MIN_IMAGES = 40  # the default --repeat makes at least this many images

# imgwarm's defaults, pinned on its command line (and environment) so all contenders agree.
WIDTHS = (320, 680, 860, 1080, 1290, 1920)
FALLBACK_WIDTHS = (320, 640, 1920)  # the JPEG: at these (each the next made up)
WEBP_QUALITY, WEBP_EFFORT = 80, 4
JPEG_QUALITY = 82
MAX_COORD = 10_000_000  # thumbnail's height bound: the width alone decides the size

SAMPLE_INTERVAL = 0.010  # seconds between RSS samples
PSS_EVERY = 10  # PSS (smaps_rollup walks page tables: ms per call) on every 10th sample
MB = 1024 * 1024
CPUS = os.cpu_count() or 1

CONTENDERS: dict[str, str] = {
    "a": "imgwarm optimize",
    "b": "pyvips floor",
    "c": "Pillow",
    "d": "cwebp (WebP only)",
    "e": "imgwarm baseline",  # the same CLI from another checkout (--baseline DIR)
}


# --- what to make: the same plan as imgwarm.pipeline.variants ----------------------------------
# Copied, not imported: importing imgwarm loads pydantic, Pillow and the rest, and the floor's
# and Pillow's processes must carry none of that into the time and memory measured.


def plan_widths(source_width: int, widths: Sequence[int] = WIDTHS) -> list[int]:
    """Every width below the source's, plus the source width capped at the largest."""
    planned = {w for w in widths if w < source_width}
    planned.add(min(source_width, max(widths)))
    return sorted(planned)


def fallback_at(made: list[int], wanted: Sequence[int] = FALLBACK_WIDTHS) -> set[int]:
    """The widths among ``made`` the JPEG is made at: for each wanted one the narrowest made at
    least as wide, and the widest."""
    return {made[-1], *(next(w for w in made if w >= want) for want in wanted
                        if want <= made[-1])}


def height_for(width: int, source_width: int, source_height: int) -> int:
    return max(1, round(source_height * width / source_width))


# --- (b) the floor: plain pyvips, run as `optimize.py --worker floor` ---------------------------


def _floor_one(src: Path, out: Path, copy_memory: bool = True) -> tuple[int, int]:
    """``copy_memory`` resamples each width once into memory, as imgwarm does; without it
    (--floor-lazy) each of the two encoders computes the resized variant again."""
    import pyvips

    header = pyvips.Image.new_from_file(str(src))  # the header only: plan the widths
    orientation = header.get("orientation") if header.get_typeof("orientation") else 1
    transposed = 5 <= orientation <= 8
    full_w, full_h = (header.height, header.width) if transposed else (header.width, header.height)
    widths = plan_widths(full_w)
    master = pyvips.Image.thumbnail(
        str(src), widths[-1], height=MAX_COORD, size="down"
    ).copy_memory()
    webp_bytes = jpeg_bytes = 0
    fallback = fallback_at(widths)
    for width in widths:
        height = height_for(width, full_w, full_h)
        image = master if master.width == width else master.resize(
            width / master.width, vscale=height / master.height, kernel="lanczos3"
        )
        if copy_memory and image is not master:
            image = image.copy_memory()
        webp = image.webpsave_buffer(Q=WEBP_QUALITY, effort=WEBP_EFFORT, keep="none")
        (out / f"{src.stem}-{width}.webp").write_bytes(webp)
        webp_bytes += len(webp)
        if width in fallback:
            jpeg = image.jpegsave_buffer(
                Q=JPEG_QUALITY, interlace=True, optimize_coding=True, keep="none"
            )
            (out / f"{src.stem}-{width}.jpg").write_bytes(jpeg)
            jpeg_bytes += len(jpeg)
    return webp_bytes, jpeg_bytes


def _floor_setup(workers: int) -> None:
    import pyvips

    pyvips.cache_set_max(0)
    if workers > 1:  # as imgwarm does: one libvips thread per worker thread
        pyvips.concurrency_set(1)


# --- (c) Pillow, run as `optimize.py --worker pillow` -------------------------------------------


def _pillow_one(src: Path, out: Path) -> tuple[int, int]:
    from PIL import Image, ImageOps

    with Image.open(src) as opened:
        orientation = opened.getexif().get(0x0112, 1)
        transposed = orientation in (5, 6, 7, 8)
        stored_w, stored_h = opened.size
        full_w, full_h = (stored_h, stored_w) if transposed else (stored_w, stored_h)
        widths = plan_widths(full_w)
        largest = (widths[-1], height_for(widths[-1], full_w, full_h))
        if opened.format == "JPEG":  # DCT-domain shrink to no less than the largest variant
            opened.draft("RGB", (largest[1], largest[0]) if transposed else largest)
        image = ImageOps.exif_transpose(opened)
    if image.mode != "RGB":
        image = image.convert("RGB")
    image.info.clear()  # keep no metadata (no EXIF, no ICC), as the others
    lanczos = Image.Resampling.LANCZOS
    master = image if image.size == largest else image.resize(largest, lanczos)
    webp_bytes = jpeg_bytes = 0
    fallback = fallback_at(widths)
    for width in widths:
        size = (width, height_for(width, full_w, full_h))
        variant = master if master.size == size else master.resize(size, lanczos)
        webp = io.BytesIO()
        variant.save(webp, "WEBP", quality=WEBP_QUALITY, method=WEBP_EFFORT)
        (out / f"{src.stem}-{width}.webp").write_bytes(webp.getvalue())
        webp_bytes += webp.tell()
        if width in fallback:
            jpeg = io.BytesIO()
            variant.save(jpeg, "JPEG", quality=JPEG_QUALITY, progressive=True, optimize=True)
            (out / f"{src.stem}-{width}.jpg").write_bytes(jpeg.getvalue())
            jpeg_bytes += jpeg.tell()
    return webp_bytes, jpeg_bytes


def _guarded(
    work: Callable[[Path, Path], tuple[int, int]], src: Path, out: Path
) -> tuple[str, str | None]:
    try:
        work(src, out)
    except Exception as error:  # report every failure, keep the batch going
        return str(src), f"{type(error).__name__}: {error}"
    return str(src), None


def worker_main(kind: str, out: Path, sources: list[Path], workers: int, pool: str,
                floor_copy_memory: bool) -> int:
    """One contender's batch, in this process (and its pool): exit 1 if any source failed."""
    out.mkdir(parents=True, exist_ok=True)
    work: Callable[[Path, Path], tuple[int, int]] = (
        functools.partial(_floor_one, copy_memory=floor_copy_memory) if kind == "floor"
        else _pillow_one
    )
    executor: Executor
    if kind == "floor":
        _floor_setup(workers)
        executor = ThreadPoolExecutor(max_workers=workers)
    elif pool == "process":
        executor = ProcessPoolExecutor(max_workers=workers)
    else:
        executor = ThreadPoolExecutor(max_workers=workers)
    failed = 0
    with executor:
        for src, error in executor.map(_guarded, [work] * len(sources), sources,
                                       [out] * len(sources)):
            if error is not None:
                failed += 1
                print(f"{src}: {error}", file=sys.stderr)
    return 1 if failed else 0


# --- measuring a process tree -------------------------------------------------------------------


def _children_via_proc(pid: int) -> list[int]:
    found: list[int] = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as handle:
            found.extend(int(child) for child in handle.read().split())
    return found


def _psutil() -> Any:
    """psutil, imported only by the measuring process (the workers stay plain)."""
    import psutil  # type: ignore[import-untyped]

    return psutil


HAVE_PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


class TreeSampler(threading.Thread):
    """Samples the summed RSS (and, less often, PSS) of a process and all its descendants.

    Descendants are found through /proc/PID/task/TID/children (microseconds) rather than
    psutil's children(), which scans every process on the machine (milliseconds)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_rss = 0
        self.peak_pss = 0
        self.samples = 0
        self._stop_event = threading.Event()
        self._procs: dict[int, Any] = {}

    def _tree(self) -> list[int]:
        psutil = _psutil()
        if not HAVE_PROC_CHILDREN:
            try:
                root = psutil.Process(self.pid)
                return [self.pid, *(p.pid for p in root.children(recursive=True))]
            except psutil.Error:
                return []
        pids, index = [self.pid], 0
        while index < len(pids):
            with contextlib.suppress(OSError):  # gone since its parent listed it
                pids.extend(_children_via_proc(pids[index]))
            index += 1
        return pids

    def _sample(self, with_pss: bool) -> None:
        psutil = _psutil()
        rss = pss = 0
        for pid in self._tree():
            try:
                proc = self._procs.get(pid) or self._procs.setdefault(pid, psutil.Process(pid))
                if with_pss:
                    full = proc.memory_full_info()
                    rss += full.rss
                    pss += full.pss
                else:
                    rss += proc.memory_info().rss
            except psutil.Error:
                continue
        self.peak_rss = max(self.peak_rss, rss)
        if with_pss:
            self.peak_pss = max(self.peak_pss, pss)
        self.samples += 1

    def run(self) -> None:
        while not self._stop_event.is_set():
            self._sample(with_pss=self.samples % PSS_EVERY == 0)
            self._stop_event.wait(SAMPLE_INTERVAL)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def machine_busy_s() -> float:
    """CPU seconds that all CPUs have spent busy since boot (/proc/stat; 0 if unavailable)."""
    try:
        with open("/proc/stat") as handle:
            values = [int(v) for v in handle.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0.0
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    contender: str
    index: int
    wall_s: float
    cpu_s: float  # user + system of the whole tree
    other_cpu_s: float  # CPU time used meanwhile by everything else on the machine
    peak_rss: int
    peak_pss: int
    samples: int
    returncode: int
    images_ok: int
    webp_files: int = 0
    webp_bytes: int = 0
    jpeg_files: int = 0
    jpeg_bytes: int = 0


def measure(cmd: list[str], *, cwd: Path, env: dict[str, str], stdout: Path,
            stderr: Path) -> tuple[float, float, float, TreeSampler, int]:
    """Run ``cmd`` to completion: wall seconds, CPU seconds of the tree, CPU seconds of
    everything else on the machine meanwhile (noise), the sampler, the exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy_before = machine_busy_s()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        returncode = proc.wait()
        wall = time.perf_counter() - start
        sampler.stop()
    busy = machine_busy_s() - busy_before
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, max(0.0, busy - cpu), sampler, returncode


def count_outputs(folder: Path) -> tuple[int, int, int, int]:
    """WebP files, WebP bytes, JPEG files, JPEG bytes under a folder (temp files excluded)."""
    counts = {".webp": [0, 0], ".jpg": [0, 0]}
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            suffix = os.path.splitext(name)[1]
            if suffix in counts and not name.startswith("."):
                counts[suffix][0] += 1
                counts[suffix][1] += os.path.getsize(os.path.join(parent, name))
    return counts[".webp"][0], counts[".webp"][1], counts[".jpg"][0], counts[".jpg"][1]


# --- the batch ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    path: Path  # the staged copy
    width: int  # displayed
    height: int
    transposed: bool
    cmyk: bool
    gain_map: bool = False  # an Ultra HDR JPEG: imgwarm keeps its JPEG at every width

    @property
    def widths(self) -> list[int]:
        return plan_widths(self.width)


def default_files(corpus: Path) -> list[Path]:
    """The good corpus JPEG photos: *.jpg that start with the JPEG SOI, minus the bad ones."""
    files = []
    for path in sorted(corpus.glob("*.jpg")):
        if path.name in BAD_FILES:
            continue
        with path.open("rb") as handle:
            if handle.read(2) == b"\xff\xd8":
                files.append(path)
    return files


def stage(files: list[Path], repeat: int, folder: Path) -> list[Source]:
    """Copy each file ``repeat`` times under distinct names (so that no contender can skip a
    copy as already done), and read each header once."""
    import pyvips

    folder.mkdir(parents=True)
    staged: list[Source] = []
    for k in range(1, repeat + 1):
        for number, path in enumerate(files, 1):
            target = folder / f"r{k}-{number}-{path.name}"
            shutil.copyfile(path, target)
            header = pyvips.Image.new_from_file(str(target))
            orientation = header.get("orientation") if header.get_typeof("orientation") else 1
            transposed = 5 <= orientation <= 8
            width, height = header.width, header.height
            if transposed:
                width, height = height, width
            staged.append(Source(target, width, height, transposed,
                                 header.interpretation == "cmyk",
                                 gain_map=b"hdrgm:" in target.read_bytes()[:1 << 16]))
    return staged


# --- the contenders' command lines --------------------------------------------------------------


@dataclass
class Plan:
    sources: list[Source]
    workers: int
    work: Path  # scratch root
    pillow_pool: str
    floor_copy_memory: bool
    cwebp: str
    imgwarm: str
    cwebp_sources: list[Source] = field(default_factory=list)
    baseline: Path | None = None  # a checkout of an earlier imgwarm, for contender (e)

    def images(self, contender: str) -> int:
        return len(self.cwebp_sources if contender == "d" else self.sources)

    def expected(self, contender: str) -> tuple[int, int]:
        """The number of WebP and JPEG files a complete run makes (the JPEG at the fallback
        widths, and at every width of an Ultra HDR source in imgwarm, whose HDR screens take
        the JPEG; an (e) older than fallback_widths makes it at every width: see check)."""
        if contender == "d":
            return sum(len(s.widths) for s in self.cwebp_sources), 0
        return (sum(len(s.widths) for s in self.sources),
                sum(len(s.widths if s.gain_map and contender == "a" else fallback_at(s.widths))
                    for s in self.sources))


def _clean_env() -> dict[str, str]:
    """The environment without IMGWARM_* (so no local setting skews the comparison)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env.pop("VIPS_CONCURRENCY", None)
    return env


def command(plan: Plan, contender: str, out: Path) -> tuple[list[str], dict[str, str]]:
    env = _clean_env()
    paths = [str(s.path) for s in plan.sources]
    if contender in ("a", "e"):
        if contender == "e":  # its package first on the path: same interpreter and wheels
            env["PYTHONPATH"] = str(plan.baseline)
        env["IMGWARM_WEBP_EFFORT"] = str(WEBP_EFFORT)  # not a CLI option; pin it anyway
        # (in the environment: a baseline older than the setting ignores it, and makes the
        # JPEG at every width)
        env["IMGWARM_FALLBACK_WIDTHS"] = ",".join(map(str, FALLBACK_WIDTHS))
        return [
            plan.imgwarm, "optimize", "--json",
            "--origin-root", str(out / "origin"), "--manifest-root", str(out / "manifest"),
            "--widths", ",".join(map(str, WIDTHS)), "--formats", "webp,jpeg",
            "--webp-quality", str(WEBP_QUALITY), "--jpeg-quality", str(JPEG_QUALITY),
            "--workers", str(plan.workers), *paths,
        ], env
    if contender in ("b", "c"):
        return [
            sys.executable, str(Path(__file__).resolve()),
            "--worker", "floor" if contender == "b" else "pillow", "--out", str(out),
            "--workers", str(plan.workers), "--pillow-pool", plan.pillow_pool,
            *([] if plan.floor_copy_memory else ["--floor-lazy"]), *paths,
        ], env
    # (d): one cwebp per source and width, N at a time. The arguments go through a
    # NUL-separated file: 11 per cwebp call.
    out.mkdir(parents=True)
    args: list[str] = []
    for source in plan.cwebp_sources:
        for width in source.widths:
            # cwebp ignores EXIF Orientation: size a transposed source by its stored height,
            # so that it makes as many pixels as the others (the result is not upright).
            size = ["0", str(width)] if source.transposed else [str(width), "0"]
            target = out / f"{source.path.stem}-{width}.webp"
            args += ["-quiet", "-q", str(WEBP_QUALITY), "-m", str(WEBP_EFFORT), "-resize",
                     *size, str(source.path), "-o", str(target)]
    arg_file = out.parent / f"{out.name}.args"
    arg_file.write_bytes(b"\0".join(a.encode() for a in args) + b"\0")
    return ["xargs", "-0", "-n", "11", "-P", str(plan.workers), "-a", str(arg_file),
            plan.cwebp], env


def run_one(plan: Plan, contender: str, index: int) -> Run:
    folder = plan.work / f"run{index}-{contender}"
    folder.mkdir()
    out = folder / "out"
    cmd, env = command(plan, contender, out)
    stdout, stderr = folder / "stdout", folder / "stderr"
    wall, cpu, other, sampler, returncode = measure(cmd, cwd=folder, env=env, stdout=stdout,
                                             stderr=stderr)
    if contender in ("a", "e"):
        lines = [json.loads(line) for line in stdout.read_text().splitlines() if line.strip()]
        ok = sum(1 for line in lines if line.get("ok"))
    else:
        ok = plan.images(contender) if returncode == 0 else -1
    webp_files, webp_bytes, jpeg_files, jpeg_bytes = count_outputs(out)
    run = Run(CONTENDERS[contender], index, wall, cpu, other, sampler.peak_rss, sampler.peak_pss,
              sampler.samples, returncode, ok, webp_files, webp_bytes, jpeg_files, jpeg_bytes)
    problems = []
    if returncode != 0:
        problems.append(f"exit status {returncode}")
    if ok != plan.images(contender):
        problems.append(f"{ok} of {plan.images(contender)} images ok")
    every = (plan.expected(contender)[0],) * (contender == "e")  # an older baseline's JPEGs
    if webp_files != plan.expected(contender)[0] or \
            jpeg_files not in (plan.expected(contender)[1], *every):
        problems.append(f"{webp_files} WebP + {jpeg_files} JPEG files, expected "
                        "{} + {}".format(*plan.expected(contender)))
    if problems:
        message = stderr.read_text(errors="replace").strip().splitlines()[-5:]
        print(f"  !! {CONTENDERS[contender]} run {index}: {'; '.join(problems)}",
              *(f"     {line}" for line in message), sep="\n", file=sys.stderr)
    shutil.rmtree(folder)
    os.sync()  # flush this run's writes now, not during the next contender's run
    return run


# --- the report ---------------------------------------------------------------------------------


@dataclass
class Summary:
    contender: str
    label: str
    images: int
    runs: int
    wall_s: float  # medians over runs
    wall_min_s: float
    wall_max_s: float
    cpu_s: float
    background_pct: float  # median share of the CPUs used by other processes during the runs
    images_per_s: float
    peak_rss: int
    peak_pss: int
    webp_files: int
    webp_bytes: int
    jpeg_files: int
    jpeg_bytes: int


def summarize(contender: str, runs: list[Run], images: int) -> Summary:
    def med(values: Iterable[float]) -> float:
        return float(statistics.median(values))

    wall = med(r.wall_s for r in runs)
    last = runs[-1]
    return Summary(
        contender, CONTENDERS[contender], images, len(runs), wall,
        min(r.wall_s for r in runs), max(r.wall_s for r in runs), med(r.cpu_s for r in runs),
        med(100 * r.other_cpu_s / (r.wall_s * CPUS) for r in runs), images / wall,
        int(med(r.peak_rss for r in runs)), int(med(r.peak_pss for r in runs)),
        last.webp_files, last.webp_bytes, last.jpeg_files, last.jpeg_bytes,
    )


@dataclass
class Ratio:
    name: str
    value: float
    target: str
    met: bool | None  # None: no target


def ratios(summaries: dict[str, Summary], runs: dict[str, list[Run]]) -> list[Ratio]:
    """The targets (ratios of medians), and a few ratios for information."""
    found: list[Ratio] = []
    a = summaries.get("a")
    if a is None:
        return found
    if "b" in summaries:
        value = a.wall_s / summaries["b"].wall_s
        found.append(Ratio("a/b wall time (imgwarm / pyvips floor)", value, "<= 1.10",
                           value <= 1.10))
        # a and b of the same round ran back to back, under the same background load.
        paired = statistics.median(x.wall_s / y.wall_s for x, y in zip(runs["a"], runs["b"],
                                                                       strict=True))
        found.append(Ratio("a/b wall time, median of the per-round ratios", paired, "(info)",
                           None))
    if "c" in summaries:
        value = a.wall_s / summaries["c"].wall_s
        found.append(Ratio("a/c wall time (imgwarm / Pillow)", value, "<= 1.00", value <= 1.00))
    if "b" in summaries:
        value = a.peak_rss / summaries["b"].peak_rss
        found.append(Ratio("a/b peak RSS (imgwarm / pyvips floor)", value, "<= 1.25",
                           value <= 1.25))
        if a.peak_pss and summaries["b"].peak_pss:
            value = a.peak_pss / summaries["b"].peak_pss
            found.append(Ratio("a/b peak PSS", value, "(info)", None))
        value = a.cpu_s / summaries["b"].cpu_s
        found.append(Ratio("a/b CPU time", value, "(info)", None))
    return found


def markdown(summaries: dict[str, Summary], found: list[Ratio], context: dict[str, Any]) -> str:
    lines = [
        f"{context['images']} images ({context['distinct']} photos x {context['repeat']}, "
        f"{context['source_bytes'] / MB:.1f} MB), widths {','.join(map(str, WIDTHS))} "
        f"(JPEG at {','.join(map(str, FALLBACK_WIDTHS))}), "
        f"WebP q{WEBP_QUALITY} effort {WEBP_EFFORT} + progressive JPEG q{JPEG_QUALITY}; "
        f"{context['workers']} workers on {context['cpus']} CPUs; median of {context['runs']} "
        "interleaved runs; memory = whole process tree, sampled every "
        f"{SAMPLE_INTERVAL * 1000:.0f} ms (PSS every {SAMPLE_INTERVAL * PSS_EVERY * 1000:.0f} ms).",
        "",
        "| contender | images | images/s | wall s (min-max) | CPU s | peak RSS MB | peak PSS MB "
        "| WebP files / MB | JPEG files / MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, s in summaries.items():
        jpeg = f"{s.jpeg_files} / {s.jpeg_bytes / MB:.2f}" if s.jpeg_files else "-"
        lines.append(
            f"| ({key}) {s.label} | {s.images} | {s.images_per_s:.1f} | {s.wall_s:.2f} "
            f"({s.wall_min_s:.2f}-{s.wall_max_s:.2f}) | {s.cpu_s:.1f} | {s.peak_rss / MB:.0f} | "
            f"{s.peak_pss / MB:.0f} | {s.webp_files} / {s.webp_bytes / MB:.2f} | {jpeg} |"
        )
    if found:
        lines += ["", "| ratio | value | target | met |", "|---|---:|---|---|"]
        for r in found:
            met = "-" if r.met is None else ("yes" if r.met else "**no**")
            lines.append(f"| {r.name} | {r.value:.2f} | {r.target} | {met} |")
    background = max(s.background_pct for s in summaries.values())
    floor = ("resamples each width once, into memory" if context["floor_copy_memory"]
             else "resamples each width once per encoder (lazily, --floor-lazy)")
    notes = [f"(b) The floor {floor}.",
             f"(c) Pillow uses a {context['pillow_pool']} pool of {context['workers']}.",
             f"Other processes used up to {background:.0f}% of the CPUs during the runs "
             "(median per contender)."]
    if "d" in summaries and context["cmyk_skipped"]:
        notes.append(f"(d) cwebp skips the {context['cmyk_skipped']} CMYK images (its libjpeg "
                     "input cannot convert CMYK) and does not apply EXIF Orientation.")
    lines += ["", " ".join(notes)]
    return "\n".join(lines)


def versions(cwebp: str) -> dict[str, str]:
    import PIL
    import pyvips

    found = {
        "python": platform.python_version(),
        "libvips": f"{pyvips.version(0)}.{pyvips.version(1)}.{pyvips.version(2)}",
        "pyvips": pyvips.__version__,
        "pillow": PIL.__version__,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
    }
    try:
        found["cwebp"] = subprocess.run([cwebp, "-version"], capture_output=True, text=True,
                                        check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        found["cwebp"] = "unavailable"
    return found


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="imgwarm optimize vs plain pyvips, Pillow and cwebp on corpus photos.",
    )
    parser.add_argument("--files", nargs="+", type=Path, metavar="FILE",
                        help="photos to use instead of the good corpus JPEGs")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="corpus folder, when --files is not given (default: %(default)s)")
    parser.add_argument("--repeat", type=int, metavar="K",
                        help=f"copies of each file (default: enough for {MIN_IMAGES} images)")
    parser.add_argument("--runs", type=int, default=3, metavar="R",
                        help="runs per contender, interleaved; the median is reported "
                        "(default: %(default)s)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, metavar="N",
                        help="parallelism of every contender "
                        "(default: %(default)s, one per CPU as imgwarm)")
    parser.add_argument("--only", default="abcd", metavar="LETTERS",
                        help="contenders to run: a=imgwarm, b=pyvips floor, c=Pillow, d=cwebp "
                        "(default: %(default)s)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also run (e): imgwarm from the checkout DIR (e.g. a `git worktree` "
                        "of the last release), with this interpreter and its wheels, to compare "
                        "two versions in one run (a/e)")
    parser.add_argument("--pillow-pool", choices=("process", "thread"), default="process",
                        help="how Pillow runs N at a time (default: %(default)s)")
    parser.add_argument("--floor-lazy", dest="floor_copy_memory", action="store_false",
                        help="let the floor resample each width once per encoder instead of "
                        "once into memory (as imgwarm does, and by default)")
    parser.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()),
                        help="scratch folder for staged sources and outputs (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help="JSON results file (default: %(default)s)")
    parser.add_argument("--cwebp", default=shutil.which("cwebp") or "/usr/bin/cwebp",
                        help="the cwebp binary (default: %(default)s)")
    # Internal: the floor and Pillow contenders run as `optimize.py --worker KIND`.
    parser.add_argument("--worker", choices=("floor", "pillow"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("sources", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.workers < 1 or (args.repeat is not None and args.repeat < 1):
        parser.error("--runs, --workers and --repeat must be at least 1")
    if not set(args.only) <= set(CONTENDERS) or not args.only:
        parser.error("--only takes letters among a, b, c, d")
    return args


def find_imgwarm() -> str:
    beside = Path(sys.executable).parent / "imgwarm"
    if beside.exists():
        return str(beside)
    found = shutil.which("imgwarm")
    if found is None:
        sys.exit("imgwarm is not installed (pip install -e . in the venv running this script)")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker, args.out, args.sources, args.workers, args.pillow_pool,
                           args.floor_copy_memory)

    files = args.files or default_files(args.corpus)
    if not files:
        sys.exit(f"no photos found (corpus: {args.corpus})")
    repeat = args.repeat or max(1, math.ceil(MIN_IMAGES / len(files)))
    contenders = [c for c in CONTENDERS if c in args.only]
    if args.baseline is None and "e" in contenders:
        contenders.remove("e")
    elif args.baseline is not None and "e" not in contenders:
        contenders.append("e")
    if "d" in contenders and not shutil.which(args.cwebp):
        print(f"cwebp not found ({args.cwebp}): skipping (d)", file=sys.stderr)
        contenders.remove("d")

    work = Path(tempfile.mkdtemp(prefix="imgwarm-bench-", dir=args.tmp))
    try:
        sources = stage(files, repeat, work / "sources")
        plan = Plan(sources, args.workers, work, args.pillow_pool, args.floor_copy_memory,
                    args.cwebp, find_imgwarm(), [s for s in sources if not s.cmyk],
                    args.baseline)
        context: dict[str, Any] = {
            "images": len(sources), "distinct": len(files), "repeat": repeat,
            "source_bytes": sum(s.path.stat().st_size for s in sources),
            "workers": args.workers, "cpus": os.cpu_count(), "runs": args.runs,
            "pillow_pool": args.pillow_pool, "floor_copy_memory": args.floor_copy_memory,
            "cmyk_skipped": len(sources) - len(plan.cwebp_sources),
        }
        print(f"{len(sources)} images ({len(files)} files x {repeat}), {args.workers} workers, "
              f"{args.runs} runs of {', '.join(CONTENDERS[c] for c in contenders)}",
              file=sys.stderr)
        os.sync()
        runs: dict[str, list[Run]] = {c: [] for c in contenders}
        for index in range(1, args.runs + 1):
            for contender in contenders:
                run = run_one(plan, contender, index)
                runs[contender].append(run)
                print(f"  run {index} {run.contender:<18} {run.wall_s:6.2f} s  "
                      f"cpu {run.cpu_s:6.1f} s  peak RSS {run.peak_rss / MB:6.0f} MB  "
                      f"PSS {run.peak_pss / MB:6.0f} MB  others' cpu {run.other_cpu_s:5.1f} s",
                      file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    summaries = {c: summarize(c, runs[c], plan.images(c)) for c in contenders}
    found = ratios(summaries, runs)
    table = markdown(summaries, found, context)
    print(table)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "config": {**context, "files": [str(f) for f in files], "widths": list(WIDTHS),
                   "fallback_widths": list(FALLBACK_WIDTHS),
                   "webp_quality": WEBP_QUALITY, "webp_effort": WEBP_EFFORT,
                   "jpeg_quality": JPEG_QUALITY, "sample_interval_s": SAMPLE_INTERVAL,
                   "pss_every": PSS_EVERY, "versions": versions(args.cwebp),
                   "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "summaries": {c: asdict(s) for c, s in summaries.items()},
        "ratios": [asdict(r) for r in found],
        "runs": {c: [asdict(r) for r in rs] for c, rs in runs.items()},
        "markdown": table,
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten: {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
