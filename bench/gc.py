"""Benchmark ``imgwarm gc``: an origin of N variants of which 10% no manifest names, local and
S3 (moto's server over HTTP), against a walking collector for the local case.

    usual   ``imgwarm gc --grace 0``: the variants that lost a reference (dropped/ markers),
            each checked against the claims and removed.
    full    ``imgwarm gc --full --grace 0``: every manifest read, every variant listed (S3: the
            shard folders' listings in parallel pages), compared, removed.
    walk    (local) what a collector without references does, ``find -newer``-style: find(1)
            lists every file of the origin and of the manifest store, every manifest is read,
            the unnamed files are unlinked.

Each run starts from the same origin (copied afresh, then the caches dropped: cold, as a gc
run once a day finds them); files/s is the origin's variants over the run's time (what a
collector has to answer for), removed/s the variants it removed.

Usage (root for drop_caches; a quiet machine: no tests, no other sessions):
    .venv/bin/python bench/gc.py                                   # local 25k,100k; S3 10k,20k
    .venv/bin/python bench/gc.py --local 100000 --s3 0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common import HERE, IMGWARM, quiet_caches, timed

from imgwarm.config import Settings
from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.naming import file_name
from imgwarm.store import Stores

PER_SOURCE = 8
UNNAMED = 0.10


def populate(settings: Settings, variants: int, seed: int = 0) -> int:
    """Sources of PER_SOURCE opaque variants each (gc never decodes them), written through
    imgwarm's stores (claims included); then 10% of them made again with none (their variants
    dropped, as by a settings change). Returns how many variants no manifest names."""
    stores = Stores.for_settings(settings.store)
    sources = variants // PER_SOURCE

    def one(number: int) -> Manifest:
        rnd = random.Random(seed * 10_000_000 + number)  # one a thread's source
        made = []
        for _ in range(PER_SOURCE):
            data = rnd.randbytes(rnd.randrange(5000, 20000))
            name = file_name(f"ad-{number}", hashlib.sha256(data).hexdigest(), "webp", 16)
            path = stores.place(name)
            stores.origin.write(path, data)
            made.append(Variant(format="webp", width=320, height=213, bytes=len(data),
                                path=str(path)))
        manifest = Manifest(key=f"up/{number}.jpg", source_sha256="0" * 64, width=1280,
                            height=853, settings_digest="bench", variants=made)
        stores.manifests.put(manifest, None)
        return manifest

    threads = 2 if settings.store.origin == "local" else 32
    with ThreadPoolExecutor(threads) as pool:
        made = list(pool.map(one, range(sources)))
    dropped = made[: int(sources * UNNAMED)]
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda m: stores.manifests.put(
            m.model_copy(update={"variants": []}), m), dropped))
    return len(dropped) * PER_SOURCE


def walk_gc(origin: Path, manifests: Path) -> int:
    """A collector without references: every file found, every manifest read, the unnamed
    unlinked. Returns how many it removed."""
    listed = subprocess.run(["find", str(origin), "-type", "f", "-not", "-newer",
                             str(origin / ".stamp"), "-printf", "%P\n"], capture_output=True,
                            text=True, check=True).stdout.split()
    found = subprocess.run(["find", str(manifests), "-name", "*.json", "-type", "f"],
                           capture_output=True, text=True, check=True).stdout.split()
    named: set[str] = set()
    for path in found:
        record = json.loads(Path(path).read_bytes())
        named.update(v["path"] for v in record.get("variants", []))
    gone = [p for p in listed if p not in named and not p.startswith(".")]
    for path in gone:
        os.unlink(origin / path)
    return len(gone)


def local(sizes: list[int], work: Path) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        template = work / f"template-{size}"
        settings = Settings().updated(origin_root=template / "origin",
                                      manifest_root=template / "manifest", fsync=False)
        started = time.perf_counter()
        unnamed = populate(settings, size)
        built = time.perf_counter() - started
        (template / "origin" / ".stamp").touch()
        row: dict[str, Any] = {"origin": "local", "variants": size, "unnamed": unnamed,
                               "populate_s": round(built, 1)}
        for mode in ("usual", "full", "walk"):
            run = work / "run"
            shutil.rmtree(run, ignore_errors=True)
            subprocess.run(["cp", "-a", str(template), str(run)], check=True)
            quiet_caches()
            env = {**os.environ, "IMGWARM_ORIGIN_ROOT": str(run / "origin"),
                   "IMGWARM_MANIFEST_ROOT": str(run / "manifest"),
                   "IMGWARM_CACHE_STATE": str(run / "state")}
            if mode == "walk":
                started = time.perf_counter()
                removed = walk_gc(run / "origin", run / "manifest")
                took = time.perf_counter() - started
            else:
                if mode == "usual":  # the references were built by an earlier gc
                    timed([str(IMGWARM), "gc", "--grace", "7d"], env)
                    quiet_caches()
                took, out = timed([str(IMGWARM), "gc", "--json", "--grace", "0",
                                   *(["--full"] if mode == "full" else [])], env)
                removed = json.loads(out)["removed"]
            assert removed == unnamed, (mode, removed, unnamed)
            row[mode] = {"s": round(took, 2), "files_per_s": round(size / took),
                         "removed_per_s": round(removed / took)}
            print(json.dumps({"size": size, mode: row[mode]}), file=sys.stderr)
        rows.append(row)
        shutil.rmtree(template)
    return rows


def s3(sizes: list[int]) -> list[dict[str, Any]]:
    sys.path.insert(0, str(HERE.parent))
    from tests.servers import AWS, S3Server

    os.environ.update(AWS)
    server = S3Server()
    rows = []
    try:
        for size in sizes:
            row: dict[str, Any] = {"origin": "s3", "variants": size}
            for mode in ("usual", "full"):
                bucket = server.new_bucket()
                values = {"origin": "s3", "s3_bucket": bucket, "s3_endpoint_url": server.endpoint,
                          "s3_region": "us-east-1"}
                settings = Settings().updated(**values)
                started = time.perf_counter()
                row["unnamed"] = populate(settings, size)
                row["populate_s"] = round(time.perf_counter() - started, 1)
                env = {**os.environ, **{f"IMGWARM_{k.upper()}": v for k, v in values.items()},
                       "IMGWARM_CACHE_STATE": "/var/tmp/imgwarm-bench-gc-none"}
                if mode == "usual":
                    timed([str(IMGWARM), "gc", "--grace", "7d"], env)
                took, out = timed([str(IMGWARM), "gc", "--json", "--grace", "0",
                                   *(["--full"] if mode == "full" else [])], env)
                removed = json.loads(out)["removed"]
                assert removed == row["unnamed"], (mode, removed)
                row[mode] = {"s": round(took, 2), "files_per_s": round(size / took),
                             "removed_per_s": round(removed / took)}
                print(json.dumps({"size": size, mode: row[mode]}), file=sys.stderr)
            rows.append(row)
    finally:
        server.stop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| origin | variants | unnamed | mode | seconds | origin files/s | removed/s | "
             "time vs walk |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for mode in ("usual", "full", "walk"):
            if mode in row:
                found = row[mode]
                ratio = (f"{found['s'] / row['walk']['s']:.2f}" if "walk" in row else "-")
                lines.append(f"| {row['origin']} | {row['variants']:,} | {row['unnamed']:,} | "
                             f"{mode} | {found['s']} | {found['files_per_s']:,} | "
                             f"{found['removed_per_s']:,} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", default="25000,100000", help="origin sizes (0: none)")
    parser.add_argument("--s3", default="10000,20000", help="origin sizes on moto (0: none)")
    args = parser.parse_args()
    work = Path("/var/tmp/imgwarm-bench-gc")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rows = []
    try:
        if args.local != "0":
            rows += local([int(n) for n in args.local.split(",")], work)
        if args.s3 != "0":
            rows += s3([int(n) for n in args.s3.split(",")])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    out = HERE / "results" / "gc.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
