"""Benchmark ``imgwarm gc``: an origin of N variants of which 10% no manifest names, local and
S3 (moto's server over HTTP), against a walking collector for the local case.

    usual   ``imgwarm gc --grace 0``: the variants that lost a reference (dropped/ markers),
            each checked against the claims (locally one look-up each; on S3, past one
            candidate a top folder, one listing of the claims before and one after), removed.
    full    ``imgwarm gc --full --grace 0``: every manifest read, every variant listed (S3: the
            shard folders' listings in parallel pages), compared, removed.
    walk    (local) what a collector without references does, ``find -newer``-style: find(1)
            lists every file of the origin and of the manifest store, every manifest is read,
            the unnamed files are unlinked.

Each run starts from the same origin (copied afresh, then the caches dropped: cold, as a gc
run once a day finds them); files/s is the origin's variants over the run's time (what a
collector has to answer for), removed/s the variants it removed.

Usage (root for drop_caches; a quiet machine: no tests, no other sessions):
    .venv/bin/python bench/gc.py                          # local 10k,30k,100k; S3 10k,30k
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
            path = stores.path_of(name)
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


def template(size: int, work: Path) -> tuple[Path, int]:
    """An origin and manifest store of ``size`` variants, 10% unnamed, made with imgwarm's
    local stores (the S3 runs load the same files into the bucket)."""
    folder = work / f"template-{size}"
    settings = Settings().updated(origin_root=folder / "origin",
                                  manifest_root=folder / "manifest", fsync=False)
    started = time.perf_counter()
    unnamed = populate(settings, size)
    print(json.dumps({"size": size, "populate_s": round(time.perf_counter() - started, 1)}),
          file=sys.stderr)
    (folder / "origin" / ".stamp").touch()
    return folder, unnamed


def measured(size: int, removed: int, took: float) -> dict[str, Any]:
    return {"s": round(took, 2), "files_per_s": round(size / took),
            "removed_per_s": round(removed / took)}


def gc_command(env: dict[str, str], mode: str, unnamed: int) -> tuple[float, int]:
    """``imgwarm gc`` timed (for the usual mode, after a first gc that built the references
    and found every variant within its grace period)."""
    if mode == "usual":
        timed([str(IMGWARM), "gc", "--grace", "7d"], env)
        quiet_caches()
    took, out = timed([str(IMGWARM), "gc", "--json", "--grace", "0",
                       *(["--full"] if mode == "full" else [])], env)
    removed = json.loads(out)["removed"]
    assert removed == unnamed, (mode, removed, unnamed)
    return took, removed


def local(size: int, folder: Path, unnamed: int, work: Path) -> dict[str, Any]:
    row: dict[str, Any] = {"origin": "local", "variants": size, "unnamed": unnamed}
    for mode in ("usual", "full", "walk"):
        run = work / "run"
        shutil.rmtree(run, ignore_errors=True)
        subprocess.run(["cp", "-a", str(folder), str(run)], check=True)
        quiet_caches()
        env = {**os.environ, "IMGWARM_ORIGIN_ROOT": str(run / "origin"),
               "IMGWARM_MANIFEST_ROOT": str(run / "manifest"),
               "IMGWARM_CACHE_STATE": str(run / "state")}
        if mode == "walk":
            started = time.perf_counter()
            removed = walk_gc(run / "origin", run / "manifest")
            took = time.perf_counter() - started
            assert removed == unnamed, (mode, removed, unnamed)
        else:
            took, removed = gc_command(env, mode, unnamed)
        row[mode] = measured(size, removed, took)
        print(json.dumps({"size": size, "local": mode, **row[mode]}), file=sys.stderr)
    shutil.rmtree(work / "run", ignore_errors=True)
    return row


def load_bucket(folder: Path, bucket: str) -> None:
    """The template's files into the bucket, straight into moto's backend (this process
    runs the server): the setup is not what is measured, and over HTTP it takes longer than
    the runs themselves. Manifests go under .imgwarm/manifests/ as on S3 (the local journal
    aside: gc does not read it)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    from imgwarm.store.origin import S3_MANIFEST_FOLDER

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for part, prefix in (("origin", ""), ("manifest", S3_MANIFEST_FOLDER)):
        root = folder / part
        for found in root.rglob("*"):
            key = found.relative_to(root).as_posix()
            if found.is_file() and not key.startswith((".", "changes/")):
                backend.put_object(bucket, prefix + key, found.read_bytes())


def s3(size: int, folder: Path, unnamed: int, server: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"origin": "s3", "variants": size, "unnamed": unnamed}
    for mode in ("usual", "full"):
        bucket = server.new_bucket()
        load_bucket(folder, bucket)
        values = {"origin": "s3", "s3_bucket": bucket, "s3_endpoint_url": server.endpoint,
                  "s3_region": "us-east-1"}
        env = {**os.environ, **{f"IMGWARM_{k.upper()}": v for k, v in values.items()},
               "IMGWARM_CACHE_STATE": "/var/tmp/imgwarm-bench-gc-none"}
        took, removed = gc_command(env, mode, unnamed)
        row[mode] = measured(size, removed, took)
        print(json.dumps({"size": size, "s3": mode, **row[mode]}), file=sys.stderr)
    return row


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
    parser.add_argument("--local", default="10000,30000,100000", help="origin sizes (0: none)")
    parser.add_argument("--s3", default="10000,30000", help="origin sizes on moto (0: none)")
    args = parser.parse_args()
    local_sizes = [int(n) for n in args.local.split(",") if n != "0"]
    s3_sizes = [int(n) for n in args.s3.split(",") if n != "0"]
    work = Path("/var/tmp/imgwarm-bench-gc")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rows = []
    server = None
    try:
        if s3_sizes:
            sys.path.insert(0, str(HERE.parent))
            from tests.support.servers import AWS, S3Server

            os.environ.update(AWS)
            server = S3Server()
        for size in sorted(set(local_sizes) | set(s3_sizes)):
            folder, unnamed = template(size, work)
            if size in local_sizes:
                rows.append(local(size, folder, unnamed, work))
            if size in s3_sizes:
                rows.append(s3(size, folder, unnamed, server))
            shutil.rmtree(folder)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    out = HERE / "results" / "gc.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
