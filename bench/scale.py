"""Benchmark every store-wide command against the store's size: stores of N cheap sources
(10k, 100k, 1M), local, and S3 on moto's server (small N only), each command a child process
of the real CLI, measured by what the kernel says of that child.

The store is written by bench/scalegen.py, exactly as ``imgwarm optimize`` leaves one (two
24x16 variants a source, claims, manifests, journal, format record, references built):
``imgwarm fsck`` finds it clean before anything is measured (the real optimize makes about
200 tiny sources a second: 1M would take 1.4 hours). Then, in order:

    first warm      ``warm`` on an empty cache box (NVMe tier; RAM tier on a folder)
    no-change warm  ``warm`` again, nothing changed: its own CPU time is what the issue
                    asks to stay flat (the baseline: 0.023 s at 10k, 0.210 s at 100k)
    uploads         10 new sources made by the real ``imgwarm optimize`` (S3: the requests
                    per upload)
    warm 10 new     ``warm`` after those uploads
    fsck            ``fsck``: every record, claim and variant listed
    gc --full       ``gc --full --grace 7d``
    gc              ``gc --grace 7d`` (the usual: what was dropped since)

For each: wall seconds, own CPU seconds (user + sys of the child, os.wait4), peak RSS of the
child (ru_maxrss), and on S3 the requests moto answered; the warm index's size on disk a
source; the growth from one size to the next; and the issue's Done-when checks (no-change
warm's own time growing at most 1.3x from the smallest to the largest size; fsck and
gc --full at most 256 MB peak RSS at the largest) as pass/fail.

Usage (a quiet machine for the figures: no tests, no other sessions). 1M sources take about
11M inodes for the store and 7M more for the tiers' copies, more than a 250 GB ext4 disk
holds (16M): put the store on a file system with inodes to spare (a loop-mounted ext4 with
1 KiB blocks and an inode every 1.5 KiB holds it in about 10 GB) and the tiers on tmpfs:
    .venv/bin/python bench/scale.py                              # local 10k, 100k, 1M
    .venv/bin/python bench/scale.py --sizes 1000,10000 --origin s3
    .venv/bin/python bench/scale.py --sizes 10000 --keep /var/tmp/scale --json
    .venv/bin/python bench/scale.py --keep /var/tmp/scale --again bench/results/scale.json
    # 1M in two runs at once: the warms, and the store-wide passes (measured for memory;
    # stopped while the quiet warms are measured)
    .venv/bin/python bench/scale.py --sizes 1000000 --keep STORE --tiers TMPFS \
        --ram-budget 200M --commands "first warm,no-change warm,uploads,warm 10 new" \
        --pause-others --no-check --out warms.json
    .venv/bin/python bench/scale.py --sizes 1000000 --keep STORE --reuse \
        --commands "fsck,gc --full,gc" --out passes.json     # once the store is written
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import HERE, IMGWARM
from scalegen import generate

COMMANDS = ("first warm", "no-change warm", "uploads", "warm 10 new", "fsck", "gc --full", "gc")
UPLOADS = 10
FLAT = 1.3  # no-change warm: largest / smallest own time, at most
RSS_CAP = 256 * 2**20  # fsck and gc --full at the largest size
S3_LIMIT = 10_000  # sources beyond which moto is too slow to be worth it


class Requests:
    """Requests moto's server answers, by method (counted in its request handler: it runs
    in this process)."""

    def __init__(self) -> None:
        from werkzeug.serving import WSGIRequestHandler

        self.counts: Counter[str] = Counter()
        lock = threading.Lock()
        handle = WSGIRequestHandler.run_wsgi
        counts = self.counts

        def counted(handler: WSGIRequestHandler) -> None:
            with lock:
                counts[handler.command] += 1
            handle(handler)

        WSGIRequestHandler.run_wsgi = counted  # type: ignore[method-assign]

    def take(self) -> dict[str, int]:
        found = dict(self.counts)
        self.counts.clear()
        return found


def measure(command: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run ``command``; its wall time, CPU and peak RSS (from wait4: this child's alone), and
    the seconds its own --json report gives (the run, without the interpreter's start)."""
    started = time.perf_counter()
    said = log.with_suffix(".out")
    with open(log, "ab") as err, open(said, "wb") as out:
        child = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise SystemExit(f"{' '.join(command[1:3])} failed ({child.returncode}):\n{tail}")
    found = {"s": round(wall, 3), "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
             "rss_mb": round(usage.ru_maxrss / 1024, 1)}  # ru_maxrss: KiB on Linux
    lines = said.read_text(errors="replace").strip().splitlines()
    with contextlib.suppress(IndexError, ValueError, KeyError, TypeError):
        found["own_s"] = round(float(json.loads(lines[-1])["seconds"]), 4)  # (optimize: none)
    return found


def _photos(folder: Path, count: int, start: int) -> list[Path]:
    """``count`` tiny distinct JPEGs to upload."""
    import pyvips

    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for n in range(start, start + count):
        image = (pyvips.Image.xyz(24, 16)[0] * 7 + n % 50).cast("uchar")
        path = folder / f"new-{n}.jpg"
        image.bandjoin([image, image]).copy(interpretation="srgb").write_to_file(str(path))
        made.append(path)
    return made


def _folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def _load_bucket(base: Path, bucket: str) -> None:
    """The generated store into the bucket, straight into moto's backend (this process runs
    the server): the setup is not measured. The local journal is left out (S3's is one
    object an entry; a first warm lists every record and starts from the journal's end)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    from imgwarm.store.origin import S3_MANIFEST_FOLDER

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for part, prefix in (("origin", ""), ("manifest", S3_MANIFEST_FOLDER)):
        root = base / part
        for found in root.rglob("*"):
            key = found.relative_to(root).as_posix()
            if found.is_file() and not key.startswith("changes/"):
                backend.put_object(bucket, prefix + key, found.read_bytes())


TIERS: Path | None = None  # --tiers: the tiers' roots under DIR/nvme and DIR/ram, not the store's
RAM_BUDGET: str | None = None  # --ram-budget


def _env(base: Path) -> dict[str, str]:
    """A store's commands' environment (local origin: S3 replaces the origin's part)."""
    nvme, ram = ((TIERS / "nvme" / base.name, TIERS / "ram" / base.name) if TIERS
                 else (base / "nvme", base / "ram"))
    budget = {"IMGWARM_RAM_BUDGET": RAM_BUDGET} if RAM_BUDGET else {}
    return {**os.environ, **budget, "IMGWARM_NVME_ROOT": str(nvme),
            "IMGWARM_RAM_ROOT": str(ram), "IMGWARM_RAM_ALLOW_NON_TMPFS": "true",
            "IMGWARM_CACHE_STATE": str(base / "state"), "IMGWARM_FSYNC": "false",
            "IMGWARM_ORIGIN_ROOT": str(base / "origin"),
            "IMGWARM_MANIFEST_ROOT": str(base / "manifest")}


QUIET_RUNS = 3  # --again: the no-change warm's median of this many


def again(row: dict[str, Any], work: Path, pause: bool = False) -> dict[str, Any]:
    """A kept local store of an earlier run, its quiet commands measured again with the code
    as it is now: one warm first (unmeasured: a changed planner may rank once), then the
    no-change warm (median of QUIET_RUNS), 10 new uploads and the warm after them."""
    base = work / f"local-{row['sources']}"
    if not (base / "state").is_dir():
        raise SystemExit(f"--again: no kept store at {base} (run with --keep {work} first)")
    env, log = _env(base), base / "commands.log"
    warm = [str(IMGWARM), "warm", "--json"]
    measure(warm, env, log)
    with others_paused(pause):
        quiet = sorted((measure(warm, env, log) for _ in range(QUIET_RUNS)),
                       key=lambda m: m.get("own_s", m["cpu_s"]))
    uploads = base / "uploads"
    photos = _photos(uploads, UPLOADS, row["sources"] + len(list(uploads.glob("*.jpg"))))
    row = {**row, "again": time.strftime("%Y-%m-%d %H:%M"), "no-change warm":
           quiet[len(quiet) // 2], "uploads": measure(
               [str(IMGWARM), "optimize", *map(str, photos)], env, log),
           "warm 10 new": _paused(pause, warm, env, log)}
    print(json.dumps({"size": row["sources"], "again": {n: row[n] for n in (
        "no-change warm", "uploads", "warm 10 new")}}), file=sys.stderr, flush=True)
    return row


@contextlib.contextmanager
def others_paused(pause: bool) -> Any:
    """With --pause-others: every other imgwarm fsck or gc process (another run's store-wide
    passes, measured for memory) stopped while a quiet command is measured."""
    found = subprocess.run(["pgrep", "-f", "imgwarm (fsck|gc)"], capture_output=True,
                           text=True, check=False).stdout.split() if pause else []
    pids = [int(p) for p in found]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


QUIET = ("no-change warm", "warm 10 new")


def _paused(pause: bool, command: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    with others_paused(pause):
        return measure(command, env, log)


def one_size(size: int, origin: str, work: Path, server: Any, requests: Requests | None,
             processes: int, commands: tuple[str, ...] = COMMANDS, reuse: bool = False,
             pause: bool = False, check: bool = True) -> dict[str, Any]:
    base = work / f"{origin}-{size}"
    reused = reuse and origin == "local" and (base / "origin").is_dir()
    if reused:  # generated by an earlier run (--reuse): never written again nor removed
        if "first warm" in commands and (base / "state").exists():
            raise SystemExit(f"--reuse: {base / 'state'} exists: not a first warm")
        made = {"sources": size, "reused": True}
    else:
        shutil.rmtree(base, ignore_errors=True)
        made = generate(base / "origin", base / "manifest", size, prefix=f"{base}/up/",
                        processes=processes)
    print(json.dumps({"size": size, "generated": made}), file=sys.stderr, flush=True)
    env = _env(base)
    if origin != "local":
        bucket = server.new_bucket()
        _load_bucket(base, bucket)
        env.update(IMGWARM_ORIGIN="s3", IMGWARM_S3_BUCKET=bucket,
                   IMGWARM_S3_ENDPOINT_URL=server.endpoint, IMGWARM_S3_REGION="us-east-1")
    log = base / "commands.log"
    fsck = [str(IMGWARM), "fsck", "--json"]
    checked = subprocess.CompletedProcess([], 0, json.dumps({"records": size}), "") if (
        reused or not check) else subprocess.run(fsck, env=env, capture_output=True,
                                                 text=True, check=False)
    found = json.loads(checked.stdout) if checked.returncode == 0 else {}
    if checked.returncode != 0 or found.get("records") != size or found.get("found"):
        raise SystemExit(f"the generated store of {size} is not clean: {checked.stdout[-800:]}"
                         f"{checked.stderr[-800:]}")
    photos = _photos(base / "uploads", UPLOADS, size)
    if origin == "s3":
        import boto3

        client = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1")
        for photo in photos:
            client.put_object(Bucket=env["IMGWARM_S3_BUCKET"], Key=f"uploads/{photo.name}",
                              Body=photo.read_bytes())
    upload_args = ([str(p) for p in photos] if origin == "local"
                   else [f"uploads/{p.name}" for p in photos])
    runs = {
        "first warm": [str(IMGWARM), "warm", "--json"],
        "no-change warm": [str(IMGWARM), "warm", "--json"],
        "uploads": [str(IMGWARM), "optimize", *upload_args],
        "warm 10 new": [str(IMGWARM), "warm", "--json"],
        "fsck": [str(IMGWARM), "fsck", "--json"],
        "gc --full": [str(IMGWARM), "gc", "--full", "--grace", "7d", "--json"],
        "gc": [str(IMGWARM), "gc", "--grace", "7d", "--json"],
    }
    row: dict[str, Any] = {"origin": origin, "sources": size, "generate": made}
    if requests is not None:
        requests.take()
    for name, command in runs.items():
        if name not in commands:
            continue
        with others_paused(pause and name in QUIET):
            if name == "no-change warm":  # the median of QUIET_RUNS
                row[name] = sorted((measure(command, env, log) for _ in range(QUIET_RUNS)),
                                   key=lambda m: m.get("own_s", m["cpu_s"]))[QUIET_RUNS // 2]
            else:
                row[name] = measure(command, env, log)
        if requests is not None:
            counts = requests.take()
            row[name]["requests"] = sum(counts.values())
            row[name]["by_method"] = counts
        if name == "first warm":
            index = _folder_bytes(base / "state")
            row["index_bytes_per_source"] = round(index / size)
        print(json.dumps({"size": size, name: row[name]}), file=sys.stderr, flush=True)
    if "requests" in row.get("uploads", {}):
        row["requests_per_upload"] = round(row["uploads"]["requests"] / UPLOADS, 1)
    return row


def growth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each command's own CPU time and peak RSS at one size over the size before."""
    out = []
    for before, after in itertools.pairwise(rows):
        if before["origin"] != after["origin"]:
            continue
        ratios = {"origin": after["origin"], "from": before["sources"], "to": after["sources"]}
        for name in COMMANDS:
            if name not in before or name not in after:
                continue
            b, a = before[name], after[name]
            ratios[name] = {"own": round(a.get("own_s", a["cpu_s"]) /
                                         max(b.get("own_s", b["cpu_s"]), 1e-4), 2),
                            "cpu": round(a["cpu_s"] / max(b["cpu_s"], 1e-3), 2),
                            "rss": round(a["rss_mb"] / max(b["rss_mb"], 1e-3), 2)}
        out.append(ratios)
    return out


def checks(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's Done-when on the local rows (meaningful from 10k to 1M)."""
    local = [r for r in rows if r["origin"] == "local"]
    if len(local) < 1:
        return []
    small, large = local[0], local[-1]
    quiet = "no-change warm"
    flat = large[quiet].get("own_s", large[quiet]["cpu_s"]) / max(
        small[quiet].get("own_s", small[quiet]["cpu_s"]), 1e-4)
    found = [{"check": f"no-change warm own time {small['sources']:,} -> {large['sources']:,}"
                       f": x{flat:.2f} (at most {FLAT})", "pass": flat <= FLAT}]
    for name in ("fsck", "gc --full"):
        rss = large[name]["rss_mb"]
        found.append({"check": f"{name} peak RSS at {large['sources']:,}: {rss} MB "
                               f"(at most {RSS_CAP // 2**20} MB)", "pass": rss * 2**20 <= RSS_CAP})
    return found


def estimate(rows: list[dict[str, Any]], target: int = 1_000_000) -> str:
    """The whole run at ``target`` sources: a fixed cost plus one a source, from the two
    largest sizes measured (from one, linear: an overestimate at small sizes, where the
    interpreter's start dominates)."""
    def total(row: dict[str, Any]) -> float:
        return float(row["generate"]["s"] + sum(row[name]["s"] for name in COMMANDS))

    ordered = sorted(rows, key=lambda r: r["sources"])
    if not ordered:
        return ""
    last = ordered[-1]
    if len(ordered) > 1 and ordered[-2]["sources"] < last["sources"]:
        before = ordered[-2]
        slope = (total(last) - total(before)) / (last["sources"] - before["sources"])
        fixed = max(total(last) - slope * last["sources"], 0.0)
    else:
        slope, fixed = total(last) / last["sources"], 0.0
    gen = last["generate"]["s"] / last["sources"] * target
    return (f"estimated whole run at {target:,} sources (from {last['sources']:,}): "
            f"{(fixed + slope * target) / 60:.0f} min, generation about {gen / 60:.0f} min")


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| origin | sources | command | wall s | own s | CPU s | peak RSS MB | requests |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        for name in COMMANDS:
            m = row[name]
            lines.append(f"| {row['origin']} | {row['sources']:,} | {name} | {m['s']} | "
                         f"{m.get('own_s', '-')} | {m['cpu_s']} | {m['rss_mb']} | "
                         f"{m.get('requests', '-')} |")
        lines.append(f"| {row['origin']} | {row['sources']:,} | index on disk a source | "
                     f"{row['index_bytes_per_source']} B | | | | |")
        if "requests_per_upload" in row:
            lines.append(f"| s3 | {row['sources']:,} | requests per upload | "
                         f"{row['requests_per_upload']} | | | | |")
    for row in rows:
        if "again" in row:
            lines.append(f"({row['sources']:,}: no-change warm, uploads and warm 10 new "
                         f"measured again on the kept store, {row['again']})")
    for ratio in growth(rows):
        lines.append("")
        lines.append(f"growth {ratio['origin']} {ratio['from']:,} -> {ratio['to']:,} "
                     f"(own time, CPU, peak RSS): " + ", ".join(
                         f"{name} x{ratio[name]['own']}/x{ratio[name]['cpu']}/x{ratio[name]['rss']}"
                         for name in COMMANDS))
    lines.append("")
    for check in checks(rows):
        lines.append(f"{'PASS' if check['pass'] else 'FAIL'}  {check['check']}")
    lines.append(estimate(rows))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        help="store sizes in sources, comma-separated")
    parser.add_argument("--origin", choices=("local", "s3"), default="local")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep the stores")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--processes", type=int, default=2, help="generator processes")
    parser.add_argument("--again", type=Path, metavar="RESULTS",
                        help="measure the quiet commands again (no-change warm, uploads, warm "
                        "10 new) on the local stores an earlier run kept (--keep), whose "
                        "results JSON this is; the rest of its figures are kept")
    parser.add_argument("--tiers", type=Path, metavar="DIR",
                        help="the tiers under DIR/nvme/<store> and DIR/ram/<store> (e.g. two "
                        "tmpfs mounts: 1M sources' tiers need about 7M inodes)")
    parser.add_argument("--ram-budget", help="the RAM tier's budget (IMGWARM_RAM_BUDGET)")
    parser.add_argument("--commands", default=",".join(COMMANDS),
                        help=f"which to measure (comma-separated): {', '.join(COMMANDS)}")
    parser.add_argument("--reuse", action="store_true", help="keep a store --keep holds "
                        "that an earlier run generated and never warmed, instead of writing it "
                        "again (it was found clean then)")
    parser.add_argument("--pause-others", action="store_true", help="stop other imgwarm "
                        "fsck and gc processes (a second run's passes, measured for memory) "
                        "while the quiet commands are measured")
    parser.add_argument("--no-check", action="store_true", help="measure without first "
                        "checking the generated store with fsck (a run measuring fsck on it "
                        "checks it: its records and that it found nothing)")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale.json")
    args = parser.parse_args()
    global TIERS, RAM_BUDGET
    TIERS, RAM_BUDGET = args.tiers, args.ram_budget
    commands = tuple(c for c in args.commands.split(",") if c)
    if set(commands) - set(COMMANDS):
        parser.error(f"--commands: among {', '.join(COMMANDS)}")
    if args.again is not None:
        if args.keep is None:
            parser.error("--again needs --keep: the folder the earlier run kept its stores in")
        earlier = json.loads(args.again.read_text())["rows"]
        rows = [again(r, args.keep, args.pause_others) if r["origin"] == "local" else r
                for r in earlier]
        _report(rows, args.json, args.out)
        return
    try:
        sizes = sorted({int(n) for n in args.sizes.split(",")})
    except ValueError:
        parser.error(f"--sizes: expected numbers separated by commas, got {args.sizes!r}")
    if not sizes or sizes[0] < 1:
        parser.error("--sizes: each size must be 1 or more")
    if args.origin == "s3" and sizes[-1] > S3_LIMIT:
        parser.error(f"--sizes: at most {S3_LIMIT:,} sources on moto's server")
    work = args.keep or Path(tempfile.mkdtemp(prefix="imgwarm-bench-scale-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    server = requests = None
    rows: list[dict[str, Any]] = []
    try:
        if args.origin == "s3":
            sys.path.insert(0, str(HERE.parent))
            from tests.support.servers import AWS, S3Server

            os.environ.update(AWS)
            requests = Requests()
            server = S3Server()
        for size in sizes:
            rows.append(one_size(size, args.origin, work, server, requests, args.processes,
                                 commands, args.reuse, args.pause_others,
                                 not args.no_check))
            if args.keep is None:
                shutil.rmtree(work / f"{args.origin}-{size}", ignore_errors=True)
    finally:
        if server is not None:
            server.stop()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    _report(rows, args.json, args.out)


def _report(rows: list[dict[str, Any]], as_json: bool, out: Path) -> None:
    whole = all(name in row and "s" in row["generate"] for row in rows for name in COMMANDS)
    if not whole:  # (--commands, --reuse: a part of the figures, to be put together)
        result: dict[str, Any] = {"rows": rows, "growth": growth(rows)}
        as_json = True
    else:
        result = {"rows": rows, "growth": growth(rows), "checks": checks(rows),
                  "estimate": estimate(rows)}
    print(json.dumps(result, indent=2) if as_json else table(rows))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
