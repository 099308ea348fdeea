"""What the cache and serving benchmarks share: tmpfs mounts, cold caches, tier settings and
timed commands."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
IMGWARM = ROOT / ".venv" / "bin" / "imgwarm"
PYTHON = ROOT / ".venv" / "bin" / "python"

from imgwarm.config import Settings  # noqa: E402
from tests.support.sites import Site  # noqa: E402


def quiet_caches() -> None:
    """Everything on disk, then the page cache dropped (as root): the next read is cold."""
    subprocess.run(["sync"], check=True)
    if os.geteuid() == 0:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def mount(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                   check=True)


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], check=False)


def settings_for(base: Path, ram: Path, **extra: Any) -> Settings:
    return Settings().updated(
        origin_root=base / "origin", manifest_root=base / "manifest", nvme_root=base / "nvme",
        ram_root=ram / "tier", cache_state=base / "state", fsync=False, **extra)


def env_for(settings: Settings) -> dict[str, str]:
    return {**os.environ, **Site(settings, Path(), Path()).env()}


def save_results(name: str, data: Any) -> Path:
    """Write a bench's raw figures to bench/results/NAME.json (for the docs' tables)."""
    out = HERE / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1))
    return out


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return took, done.stdout


def run_parts(name: str, wanted: str, parts: dict[str, Callable[[Path], Any]],
              table: Callable[[dict[str, Any]], str], output: Path) -> None:
    """Run the ``wanted`` (comma-separated) of ``parts`` in a scratch folder under /var/tmp
    (on the disk, not a tmpfs), print their table and write the raw numbers to ``output``."""
    results: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix=f"imgwarm-bench-{name}-", dir="/var/tmp"))
    try:
        for part, run in parts.items():
            if part in wanted.split(","):
                results[part] = run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2))


def index_references(db: Any, refs: list[tuple[str, str]]) -> None:
    """(source key, variant path) pairs written straight into a warm index (index schema 2:
    a source's key once in ``sources``, its references by its id), then the tiers' tallies
    counted, as the rows were made directly and not marked."""
    from imgwarm.cache.index.schema import tallies

    db.executemany("INSERT OR IGNORE INTO sources (key) VALUES (?)", [(key,) for key, _ in refs])
    db.executemany("INSERT INTO refs SELECT id, ? FROM sources WHERE key = ?",
                   [(path, key) for key, path in refs])
    tallies(db)
