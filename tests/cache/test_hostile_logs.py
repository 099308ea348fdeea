"""Hostile access logs: every line has its length limit, paths are checked as they are read,
and memory follows what can be placed, not the junk sent (that parsing is linear in the
input, a timing, is bench/logs.py's)."""

from __future__ import annotations

import multiprocessing
import pickle
import tracemalloc
from pathlib import Path

import pytest

from imgwarm.cache import logs
from imgwarm.cache.index import Index
from imgwarm.cache.logformat import LogFormat, LogFormatError
from imgwarm.cache.logs import read_logs
from imgwarm.cache.placeable import Placeable
from imgwarm.manifest import Variant
from tests.support.cli import Cli
from tests.support.hostile_logs import (
    FLAT,
    KNOWN,
    LAYOUT,
    NOW,
    cut_gzip,
    hostile,
    junk_paths,
    line,
    parse,
    placeable,
)


def test_each_hostile_kind_is_read_for_what_it_is(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "KEEP", 2)  # prune at once: only what the index knows stays
    hits, _ = parse(tmp_path / "access.log", hostile(8))
    # 40 lines, 5 of each kind: the over-long ones (72 KB) malformed (their request, at the end,
    # not counted); the fake requests inside quoted fields never counted; the invalid UTF-8
    # and climbing paths unsafe; the shaped junk dropped; the good requests counted
    assert (hits.lines, hits.malformed, hits.unsafe) == (40, 5, 10)
    assert hits.count_by_path == {KNOWN: 5}
    assert hits.counted == 5 + 5 + 5 + 5  # good, unsafe UTF-8, climbing, junk: all 200s


def test_a_line_past_the_limit_inside_a_block_is_malformed(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    good = line(b"/" + KNOWN)
    data = good * 3 + b"/" * 100_000 + good + good * 2  # the request at the long line's end
    hits, _ = parse(tmp_path / "access.log", data)
    assert (hits.lines, hits.malformed, hits.count_by_path) == (6, 1, {KNOWN: 5})
    monkeypatch.setattr(logs, "PARALLEL_FROM", 10_000)  # the same, read by forked parsers
    monkeypatch.setattr(logs, "PROCESSES", 2)
    monkeypatch.setattr(logs, "BLOCK", 30_000)
    spread, _ = parse(tmp_path / "access.log", data * 40)
    assert (spread.lines, spread.malformed, spread.count_by_path) == (240, 40, {KNOWN: 200})


def peak(file: Path, data: bytes) -> int:
    file.write_bytes(data)
    tracemalloc.start()
    try:
        read_logs([file], LogFormat("combined"), {}, FLAT, NOW, placeable(file.parent))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_memory_follows_what_can_be_placed_not_distinct_junk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "PROCESSES", 1)  # all of it parsed here, where it is traced
    log = tmp_path / "access.log"
    repeated = peak(log, junk_paths(60_000, distinct=False))
    distinct = peak(log, junk_paths(60_000, distinct=True))
    more = peak(log, junk_paths(120_000, distinct=True))
    # what does not grow with the junk: the blocks in hand (4 MiB, a few copies), one block's
    # distinct paths, the verdicts remembered, what waits for the next pruning
    assert distinct < 2.5 * repeated, (repeated, distinct)
    assert more < 1.1 * distinct, (distinct, more)


def test_a_gzipped_hostile_log_cut_short_counts_what_was_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "BLOCK", 50_000)
    hits, _ = parse(tmp_path / "access.log.2.gz", cut_gzip(hostile(8, lines=400)))
    assert 0 < hits.lines < 400 and hits.count_by_path[KNOWN] > 0
    assert hits.malformed == hits.lines // 8 + 1  # the long lines, and the break


@pytest.mark.parametrize("text", ["$1", "$é", "${status", "$", "${}", "$remote_addr $1x"])
def test_a_log_format_with_what_is_not_a_variable_is_refused(text: str) -> None:
    with pytest.raises(LogFormatError, match="is not a variable"):
        LogFormat(f'"$request" $status {text}')


def test_warm_with_a_bad_log_format_says_so_in_one_line(tmp_path: Path, run_cli: Cli) -> None:
    for text in ("$1", "$é", '"$request" $status ${status'):
        done = run_cli("warm", "--log-format", text)
        assert done.exit_code == 2, done.output
        errors = [t for t in done.stderr.splitlines() if t.startswith("Error:")]
        assert len(errors) == 1 and "is not a variable" in errors[0]
        assert "Traceback" not in done.stderr


def _known_in_a_fork(placeable: Placeable, keys: list[bytes]) -> set[bytes]:
    with placeable.checking() as check:
        return check.known(keys)


def test_the_snapshot_is_plain_data_asked_alike_in_every_process(tmp_path: Path) -> None:
    index = Index(tmp_path / "index.sqlite")
    committed, added, unknown = (str(LAYOUT.path_for_name(f"{n}.{n * 16}.webp")) for n in "abc")
    index.set_source("up/a.jpg", [Variant(format="webp", width=320, height=200, bytes=900,
                                          path=committed)], 1.0)
    index.commit()
    index.set_source("up/b.jpg", [Variant(format="webp", width=320, height=200, bytes=900,
                                          path=added)], 1.0)  # not committed: a dry run's
    snapshot = Placeable("/", LAYOUT, str(index.path), frozenset({added}))
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot  # nothing bound to a process
    keys = [k.encode() for k in (committed, added, unknown)]
    with snapshot.checking() as check:
        here = check.known(keys)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        there = pool.apply(_known_in_a_fork, (snapshot, keys))
    assert here == there == {committed.encode(), added.encode()}
    without = Placeable("/", LAYOUT, str(index.path))  # the file alone: what was committed
    with without.checking() as check:
        assert check.known(keys) == {committed.encode()}
    index.close(keep=False)
