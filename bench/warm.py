"""Benchmark ``imgwarm warm``: the first copy against rsync, re-runs, scale, log parsing.

    copy   the first warm of FILES small variant files (5-50 KB, three widths a source) from a
           local origin into both tiers (NVMe on the disk, RAM on a real tmpfs) against
           ``rsync -a`` of the same origin tree into an empty folder, interleaved, each run
           from cold caches (sync; drop_caches, when root). Both are timed as the commands a
           user runs (``imgwarm warm --json``, ``rsync -a``); imgwarm's time includes the one
           sync it makes so the NVMe tier is on disk before the index says so, and rsync is
           also reported followed by ``sync``. Then a re-run with nothing changed and one
           with 1% of the sources new, as ratios of the first run.
    scale  a re-run with nothing changed on an index of N placed files (10k, 100k, 1M: rows
           made directly, a sparse tree of 1% of the files on disk), timed as a command and as
           the library call (``imgwarm.warm``).
    logs   a generated combined-format access log of LINES lines to variant paths, plain and
           gzipped, parsed, scored into an index of its variants and ranked for the RAM tier;
           lines/s and peak memory of the process (in a fresh child each), with the number of
           distinct paths and of lines varied to show what memory follows. The log is in the
           page cache, as one that nginx has just written is.

Usage (root, for the tmpfs and drop_caches; a quiet machine: no tests, no other sessions):
    .venv/bin/python bench/warm.py                         # all parts
    .venv/bin/python bench/warm.py --parts copy --runs 3 --files 20000
    .venv/bin/python bench/warm.py --parts scale --scale 10000,100000,1000000

The Markdown table is printed and, with the raw numbers, written to bench/results/warm.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from common import (  # bench/common.py: what the cache benchmarks share
    HERE,
    IMGWARM,
    PYTHON,
    env_for,
    index_references,
    mount,
    quiet_caches,
    run_parts,
    settings_for,
    timed,
    unmount,
)

from imgwarm.cache.warm import warm
from imgwarm.config import Settings
from imgwarm.store import Stores
from tests.support.sites import Site, synthetic


def _clear_tiers(settings: Settings) -> None:
    cache = settings.cache
    shutil.rmtree(cache.nvme_root, ignore_errors=True)
    shutil.rmtree(cache.cache_state, ignore_errors=True)
    shutil.rmtree(cache.ram_root, ignore_errors=True)


def bench_copy(work: Path, files: int, runs: int) -> dict[str, Any]:
    ram = work / "ram"
    mount(ram, "1g")
    try:
        settings = settings_for(work, ram)
        site = Site(settings, work, work / "sources")
        synthetic(site, files // 3, 3, seed=0)
        env = env_for(settings)
        warm_cmd = [str(IMGWARM), "warm", "--json"]
        nvme_only = {**env, "IMGWARM_RAM_BUDGET": "0"}  # the same work as rsync: one tree
        target = work / "rsync-copy"
        times: dict[str, list[float]] = {"imgwarm": [], "imgwarm nvme only": [], "rsync": [],
                                         "rsync+sync": []}
        report: dict[str, Any] = {}
        for run in range(runs):
            order = ["imgwarm", "rsync", "imgwarm nvme only"]
            for what in order[run % 3:] + order[:run % 3]:
                shutil.rmtree(target, ignore_errors=True)
                if what.startswith("imgwarm"):
                    _clear_tiers(settings)
                quiet_caches()
                if what == "imgwarm nvme only":
                    times[what].append(timed(warm_cmd, nvme_only)[0])
                elif what == "imgwarm":
                    took, out = timed(warm_cmd, env)
                    report = json.loads(out)
                    times["imgwarm"].append(took)
                else:
                    started = time.perf_counter()
                    timed(["rsync", "-a", f"{settings.store.origin_root}/", str(target)])
                    times["rsync"].append(time.perf_counter() - started)
                    subprocess.run(["sync"], check=True)
                    times["rsync+sync"].append(time.perf_counter() - started)
        # the tiers now hold the last imgwarm run's placement: re-runs from here
        first = statistics.median(times["imgwarm"])
        quiet_caches()
        again, _ = timed(warm_cmd, env)
        # as a cron job finds it: Python's own files read minutes before, still in the cache
        again_hot = statistics.median(timed(warm_cmd, env)[0] for _ in range(3))
        quiet_caches()  # the same run as `warm --every` makes it: in a process already going
        started = time.perf_counter()
        warm(settings)
        again_library = time.perf_counter() - started
        synthetic(site, max(1, files // 3 // 100), 3, seed=1)
        quiet_caches()
        new, out = timed(warm_cmd, env)
        after = json.loads(out)
        synthetic(site, max(1, files // 3 // 100), 3, seed=2)  # another 1%, in a process going
        quiet_caches()
        started = time.perf_counter()
        warm(settings)
        new_library = time.perf_counter() - started
        shutil.rmtree(target, ignore_errors=True)
        return {
            "files": report["nvme"]["copied"], "ram_files": report["ram"]["copied"],
            "bytes": report["nvme"]["copied_bytes"],
            "seconds": {k: statistics.median(v) for k, v in times.items()}, "raw": times,
            "rsync_over_imgwarm": statistics.median(times["rsync"]) / first,
            "rsync_sync_over_imgwarm": statistics.median(times["rsync+sync"]) / first,
            "rsync_over_imgwarm_nvme_only": statistics.median(times["rsync"])
            / statistics.median(times["imgwarm nvme only"]),
            "rerun_unchanged": again / first, "rerun_1pct_new": new / first,
            "rerun_unchanged_hot": again_hot / first,
            "rerun_unchanged_library": again_library / first,
            "rerun_1pct_new_library": new_library / first,
            "rerun_1pct_copied": after["nvme"]["copied"] + after["ram"]["copied"],
        }
    finally:
        unmount(ram)


def _scale_state(work: Path, ram: Path, count: int) -> Settings:
    """An index of ``count`` placed variants, as a long-running cache server has: made as
    rows (what placing them would leave), with 1% of the files on disk (a sparse tree)."""
    from imgwarm.cache.index import Index
    from imgwarm.cache.rank import density
    from imgwarm.cache.tiers import Tiers
    from imgwarm.store.layout import Layout

    settings = settings_for(work, ram)
    stores = Stores.for_settings(settings.store)
    journal = stores.manifests.changes
    assert journal is not None
    tiers = Tiers.open(settings.cache.ram_root, settings.cache.nvme_root,
                       max_entries=settings.store.max_dir_entries, allow_non_tmpfs=False)
    index = Index(settings.cache.cache_state / "index.sqlite")
    layout = Layout(levels=settings.store.shard_levels,
                    max_entries=settings.store.max_dir_entries)
    rnd = random.Random(7)
    rows, refs = [], []
    for i in range(count):
        digest = rnd.randbytes(32).hex()
        width = (320, 640, 1280)[i % 3]
        path = str(layout.path_for(f"s{i // 3}-{width}.{digest[:16]}.webp", digest))
        size = rnd.randrange(5000, 50000)
        score = rnd.paretovariate(1.0) if rnd.random() < 0.5 else 0.0
        rows.append((path, "webp", width, size, 1, score, 0.0, density(score, 0.0, size),
                     "placed"))
        refs.append((f"up/{i // 3}.jpg", path))
        if i % 100 == 0:
            target = settings.cache.nvme_root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as handle:
                handle.truncate(size)
    index.db.executemany("INSERT INTO variants (path, format, width, bytes, refs, score, "
                         "prior, density, nvme) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    index_references(index.db, refs)
    for tier in tiers:
        index.remember(f"tier:{tier.name}", tier.new_identity())
    index.remember("changes", journal.now())
    index.close(keep=True)
    return settings


def bench_scale(work: Path, sizes: list[int], runs: int) -> dict[str, Any]:
    from imgwarm.cache.warm import warm

    found: dict[str, Any] = {}
    for count in sizes:
        base = work / f"scale-{count}"
        ram = base / "ram"
        mount(ram, "64m")
        try:
            settings = _scale_state(base, ram, count)
            warm(settings)  # settles RAM's placement once, as the server's runs would have
            command, library = [], []
            for _ in range(runs):
                quiet_caches()
                took, out = timed([str(IMGWARM), "warm", "--json"], env_for(settings))
                report = json.loads(out)
                assert report["nvme"]["copied"] == 0 and report["ram"]["copied"] == 0, report
                command.append(took)
                quiet_caches()
                started = time.perf_counter()
                warm(settings)
                library.append(time.perf_counter() - started)
            found[str(count)] = {"command": statistics.median(command),
                                 "library": statistics.median(library),
                                 "held": report["nvme"]["held"]}
        finally:
            unmount(ram)
            shutil.rmtree(base, ignore_errors=True)
    return found


_LOG_CHILD = r"""
import json, sys, time
from pathlib import Path
from imgwarm.cache.index import Index
from imgwarm.cache.logformat import COMBINED, LogFormat
from imgwarm.cache.logs import log_files, read_logs
from imgwarm.cache.rank import Decay, choose
from imgwarm.cache.placeable import url_key
log, state, now = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
index = Index(state)
started = time.perf_counter()
decay = Decay(now - 86400, 86400.0)
hits = read_logs(log_files([str(log)]), LogFormat(COMBINED), {}, decay, now)
parsed = time.perf_counter() - started
weights = {}
for target, weight in hits.by_path.items():
    key = url_key(target, "/")
    if key is not None:
        weights[key] = weights.get(key, 0.0) + weight
index.add_scores(weights)
chosen = sum(1 for _ in choose(index.ranked(640), 256 << 20))
took = time.perf_counter() - started
# VmHWM: this process's own peak (ru_maxrss keeps the parent's across fork and exec)
peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"seconds": took, "parse_seconds": parsed, "lines": hits.lines,
                  "counted": hits.counted,
                  "malformed": hits.malformed, "chosen": chosen, "peak": peak,
                  "paths": len(hits.by_path)}))
index.close(keep=False)
"""


def _write_log(path: Path, lines: int, paths: list[str], now: float) -> None:
    rnd = random.Random(3)
    weights = [1.0 / (rank + 1) for rank in range(len(paths))]  # Zipf, alpha 1
    chosen = rnd.choices(paths, weights=weights, k=lines)
    with path.open("w") as out:
        for i, target in enumerate(chosen):
            when = now - 86400 + 86400 * i / lines
            stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(when))
            status = 200 if i % 50 else 404
            if i % 1000 == 999:
                out.write("\x00\xff garbage line " + "x" * 300 + "\n")
                continue
            out.write(f'198.51.100.{i % 250} - - [{stamp}] "GET /{target}?w=1 HTTP/1.1" '
                      f'{status} {1000 + i % 40000} "https://example.com/list/{i % 977}" '
                      f'"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36"\n')


def bench_logs(work: Path, lines: int) -> dict[str, Any]:
    from imgwarm.cache.index import Index
    from imgwarm.cache.rank import density

    found: dict[str, Any] = {}
    now = time.time()
    for distinct, count in ((10_000, lines), (100_000, lines), (10_000, 2 * lines)):
        base = work / f"logs-{distinct}-{count}"
        base.mkdir(parents=True)
        rnd = random.Random(distinct)
        paths = [f"{rnd.randbytes(2).hex()[:2]}/{rnd.randbytes(2).hex()[:2]}/"
                 f"p{i}.{rnd.randbytes(8).hex()}.webp" for i in range(distinct)]
        index = Index(base / "index.sqlite")
        index.db.executemany(
            "INSERT INTO variants (path, format, width, bytes, refs, density) "
            "VALUES (?, 'webp', 320, ?, 1, ?)",
            [(p, 20000, density(0.0, 0.0, 20000)) for p in paths])
        index.close(keep=True)
        plain = base / "access.log"
        _write_log(plain, count, paths, now)
        zipped = base / "access.log.1.gz"
        with plain.open("rb") as source, gzip.open(zipped, "wb", compresslevel=6) as target:
            shutil.copyfileobj(source, target)
        for name, log in (("plain", plain), ("gzip", zipped)):
            log.read_bytes()  # in the page cache, as a log nginx has just written is
            state = base / f"index-{name}.sqlite"
            shutil.copy(base / "index.sqlite", state)
            _, out = timed([str(PYTHON), "-c", _LOG_CHILD, str(log), str(state), str(now)])
            result = json.loads(out)
            result["lines_per_second"] = result["lines"] / result["seconds"]
            result["parse_lines_per_second"] = result["lines"] / result["parse_seconds"]
            found[f"{name} {distinct} paths {count} lines"] = result
        shutil.rmtree(base)
    return found


def _table(results: dict[str, Any]) -> str:
    rows = ["| measure | result |", "|---|---|"]
    copy = results.get("copy")
    if copy:
        rows += [
            f"| first warm of {copy['files']:,} files ({copy['bytes'] / 2**20:,.0f} MiB; "
            f"{copy['ram_files']:,} also to RAM): rsync -a time / imgwarm time | "
            f"{copy['rsync_over_imgwarm']:.2f} |",
            f"| same, rsync -a then sync / imgwarm | {copy['rsync_sync_over_imgwarm']:.2f} |",
            f"| same work as rsync (NVMe only, RAM budget 0): rsync -a time / imgwarm time | "
            f"{copy['rsync_over_imgwarm_nvme_only']:.2f} |",
            f"| re-run, nothing changed / first warm: command (cold caches; as a cron job "
            f"finds them); library call | {copy['rerun_unchanged']:.3f} "
            f"({copy['rerun_unchanged_hot']:.3f}); {copy['rerun_unchanged_library']:.4f} |",
            f"| re-run, 1% of sources new / first warm: command; library call | "
            f"{copy['rerun_1pct_new']:.3f}; {copy['rerun_1pct_new_library']:.3f} |",
        ]
    for count, scale in results.get("scale", {}).items():
        rows.append(f"| re-run, nothing changed, {int(count):,} placed files: command / "
                    f"library call | {scale['command']:.2f} s / {scale['library']:.3f} s |")
    for name, log in results.get("logs", {}).items():
        rows.append(f"| log {name}: lines/s parsed, and parsed + scored + ranked; peak "
                    f"memory | {log['parse_lines_per_second']:,.0f}; "
                    f"{log['lines_per_second']:,.0f}; {log['peak'] / 2**20:,.0f} MiB |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="copy,scale,logs")
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", default="10000,100000,1000000")
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "warm.json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/warm.py mounts tmpfs and drops caches: run it as root")
    run_parts("warm", args.parts, {
        "copy": lambda work: bench_copy(work / "copy", args.files, args.runs),
        "scale": lambda work: bench_scale(work, [int(n) for n in args.scale.split(",")],
                                          args.runs),
        "logs": lambda work: bench_logs(work, args.lines),
    }, _table, args.output)

if __name__ == "__main__":
    main()
