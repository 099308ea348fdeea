"""A first warm filled from several processes (fill_processes): the same index and tiers as
from one, and a reading process killed midway stops the run cleanly (the next finishes it)."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from imgwarm.cache.warm import warm
from imgwarm.config import Settings
from imgwarm.exceptions import StorageError
from imgwarm.racepoints import at

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from scalegen import generate

SOURCES = 300


def _box(settings: Settings, base: Path, ram: Path, processes: int) -> Settings:
    return settings.updated(origin_root=base.parent / "origin",
                            manifest_root=base.parent / "manifest", nvme_root=base / "nvme",
                            ram_root=ram / base.name, cache_state=base / "state", fsync=False,
                            fill_processes=processes)


def _store(tmp_path: Path) -> None:
    generate(tmp_path / "origin", tmp_path / "manifest", SOURCES, prefix=f"{tmp_path}/up/",
             processes=1)


def _index(box: Settings) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    db = sqlite3.connect(box.cache.cache_state / "index.sqlite")
    variants = db.execute("SELECT path, refs, bytes, width, ram, nvme FROM variants "
                          "ORDER BY path").fetchall()
    refs = db.execute("SELECT s.key, r.path FROM refs r JOIN sources s ON s.id = r.source "
                      "ORDER BY s.key, r.path").fetchall()
    db.close()
    return variants, refs


def _tier(root: Path) -> dict[str, tuple[int, str]]:
    return {f.relative_to(root).as_posix(): (f.stat().st_size,
                                             hashlib.sha256(f.read_bytes()).hexdigest())
            for f in root.rglob("*") if f.is_file() and not f.name.startswith(".")}


def test_two_processes_fill_what_one_does(settings: Settings, tmp_path: Path,
                                          ram: Path) -> None:
    _store(tmp_path)
    one, two = (_box(settings, tmp_path / f"box{n}", ram, n) for n in (1, 2))
    reports = [warm(one), warm(two)]
    assert [r.sources for r in reports] == [SOURCES, SOURCES]
    assert [r.nvme.copied for r in reports] == [2 * SOURCES, 2 * SOURCES]
    assert _index(one) == _index(two)
    assert len(_index(two)[1]) == 2 * SOURCES
    origin = _tier(tmp_path / "origin")
    nvme = _tier(two.cache.nvme_root)
    assert nvme == _tier(one.cache.nvme_root)
    assert nvme == {p: v for p, v in origin.items() if p != "imgwarm-format.json"}
    assert _tier(one.cache.ram_root) == _tier(two.cache.ram_root)


def test_a_reading_process_killed_stops_the_run_and_the_next_finishes(
        settings: Settings, tmp_path: Path, ram: Path) -> None:
    _store(tmp_path)
    box = _box(settings, tmp_path / "box", ram, 2)
    # each forked reader inherits the hook: the first folder it reads, it is SIGKILLed
    with at("fill.read", lambda: os.kill(os.getpid(), signal.SIGKILL)), \
            pytest.raises(StorageError, match="ended unexpectedly"):
        warm(box)
    report = warm(box)
    assert report.sources == SOURCES
    variants, refs = _index(box)
    assert len(refs) == 2 * SOURCES
    assert all(row[5] == "placed" for row in variants)
    assert len(_tier(box.cache.nvme_root)) == 2 * SOURCES
