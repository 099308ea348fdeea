"""Access logs: every request counted once across rotation, gzip and copytruncate; formats
read from the log_format string; time weighs."""

from __future__ import annotations

import gzip
import os
import shutil
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from imgwarm.cache import logs
from imgwarm.cache.logformat import LogFormat, LogFormatError
from imgwarm.cache.logs import log_files, read_logs
from imgwarm.cache.rank import Decay
from tests.support.logs import log_line

NOW = 1_790_000_000.0
FLAT = Decay(NOW, 1e12)  # a half-life so long that every request weighs 1


def lines(tag: str, count: int, when: float = NOW) -> str:
    return "".join(log_line(f"/{tag}/{i}.webp", when) for i in range(count))


def read(folder: Path, positions: dict[str, int], decay: Decay = FLAT) -> logs.Hits:
    return read_logs(log_files([str(folder / "access.log*")]), LogFormat("combined"),
                     positions, decay, NOW)


def test_rotation_and_gzip_count_every_line_once(tmp_path: Path) -> None:
    live = tmp_path / "access.log"
    live.write_text(lines("a", 30))
    positions: dict[str, int] = {}
    assert read(tmp_path, positions).counted == 30
    with live.open("a") as handle:
        handle.write(lines("b", 20))
    live.rename(tmp_path / "access.log.1")  # logrotate
    live.write_text(lines("c", 10))
    second = read(tmp_path, positions)
    assert second.counted == 30 and {p.split(b"/")[1] for p in second.by_path} == {b"b", b"c"}
    rotated = tmp_path / "access.log.1"
    with rotated.open("rb") as plain, gzip.open(tmp_path / "access.log.2.gz", "wb") as packed:
        shutil.copyfileobj(plain, packed)  # delaycompress, one rotation later
    rotated.unlink()
    with live.open("a") as handle:
        handle.write(lines("d", 5))
    third = read(tmp_path, positions)
    assert third.counted == 5 and third.bytes_read == len(lines("d", 5))
    assert read(tmp_path, positions).counted == 0  # the gzipped file is not even opened again


def test_a_new_gzipped_file_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "access.log.3.gz").write_bytes(gzip.compress(lines("z", 40).encode()))
    assert read(tmp_path, {}).counted == 40


def test_copytruncate(tmp_path: Path) -> None:
    live = tmp_path / "access.log"
    live.write_text(lines("a", 10))
    positions: dict[str, int] = {}
    read(tmp_path, positions)
    shutil.copy(live, tmp_path / "access.log.1")
    live.write_text(lines("c", 4))  # truncated in place, then written again
    found = read(tmp_path, positions)
    assert found.counted == 4 and all(p.startswith(b"/c/") for p in found.by_path)


def test_a_line_being_written_waits_for_its_end(tmp_path: Path) -> None:
    live = tmp_path / "access.log"
    whole, half = lines("a", 1), log_line("/b/1.webp", NOW)
    live.write_text(whole + half[:40])
    positions: dict[str, int] = {}
    assert read(tmp_path, positions).counted == 1
    with live.open("a") as handle:
        handle.write(half[40:])
    assert read(tmp_path, positions).counted == 1


def test_older_requests_weigh_less() -> None:
    decay = Decay(NOW, 86400)
    assert decay(NOW - 86400) == pytest.approx(decay(NOW) / 2)
    assert decay(NOW - 3 * 86400) == pytest.approx(decay(NOW) / 8)


def test_weights_come_from_each_block_s_time(tmp_path: Path) -> None:
    (tmp_path / "access.log").write_text(lines("old", 10, NOW - 86400))
    found = read(tmp_path, {}, Decay(NOW, 86400))
    assert sum(found.by_path.values()) == pytest.approx(10 * Decay(NOW, 86400)(NOW - 86400))


CUSTOM = ('$remote_addr [$time_iso8601] "$request" $status $body_bytes_sent '
          '$request_time "$http_user_agent" $upstream_cache_status')


def test_a_custom_format_given_as_its_log_format_string(tmp_path: Path) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(NOW - 86400))
    text = "".join(f'10.0.0.{i} [{stamp}] "GET /x/{i}.webp?v=2 HTTP/2.0" {code} 512 0.003 '
                   f'"curl/8" HIT\n' for i, code in enumerate([200, 206, 304, 404, 500]))
    (tmp_path / "access.log").write_text(text + "junk line\n")
    found = read_logs([tmp_path / "access.log"], LogFormat(CUSTOM), {}, Decay(NOW, 86400), NOW)
    assert (found.counted, found.malformed, found.lines) == (3, 1, 6)
    assert set(found.by_path) == {b"/x/0.webp", b"/x/1.webp", b"/x/2.webp"}
    assert sum(found.by_path.values()) == pytest.approx(3 * Decay(NOW, 86400)(NOW - 86400))


def test_a_format_with_method_and_uri_apart(tmp_path: Path) -> None:
    fmt = LogFormat("$msec $request_method $uri $status")
    (tmp_path / "a.log").write_text(f"{NOW:.3f} GET /p/1.webp 200\n{NOW:.3f} HEAD /p/2.webp "
                                    f"304\n{NOW:.3f} POST /p/3.webp 200\n")
    found = read_logs([tmp_path / "a.log"], fmt, {}, FLAT, NOW)
    assert set(found.by_path) == {b"/p/1.webp", b"/p/2.webp"}


def test_a_format_without_status_or_request_is_refused() -> None:
    with pytest.raises(LogFormatError, match=r"\$status"):
        LogFormat('$remote_addr "$request"')


def test_large_files_read_in_parallel_count_the_same(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    text = lines("p", 5000) + "garbage\n" + lines("q", 3000)
    (tmp_path / "access.log").write_text(text)
    (tmp_path / "access.log.2.gz").write_bytes(gzip.compress(lines("g", 4000).encode()))
    alone = read(tmp_path, {})
    monkeypatch.setattr(logs, "PARALLEL_FROM", 10_000)
    monkeypatch.setattr(logs, "BLOCK", 50_000)
    monkeypatch.setattr(logs, "PROCESSES", 2)
    positions: dict[str, int] = {}
    spread = read(tmp_path, positions)
    assert (spread.counted, spread.malformed, spread.lines) == (
        alone.counted, alone.malformed, alone.lines) == (12000, 1, 12001)
    assert spread.by_path == alone.by_path
    assert read(tmp_path, positions).counted == 0
    assert os.path.getsize(tmp_path / "access.log") in positions.values()


def test_a_gzipped_log_cut_short_counts_what_was_read(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    whole = gzip.compress(lines("t", 20000).encode())
    (tmp_path / "access.log.3.gz").write_bytes(whole[:len(whole) * 2 // 3])
    monkeypatch.setattr(logs, "BLOCK", 50_000)
    alone = read(tmp_path, {})
    monkeypatch.setattr(logs, "PARALLEL_FROM", 10_000)
    monkeypatch.setattr(logs, "PROCESSES", 2)
    positions: dict[str, int] = {}
    spread = read(tmp_path, positions)
    assert 0 < spread.counted == alone.counted < 20000
    assert spread.malformed == alone.malformed == 1
    assert spread.by_path == alone.by_path
    (offset,) = positions.values()  # read up to the last whole block before the break
    assert offset == sum(len(line) + 1 for line in lines("t", spread.counted).splitlines())


def test_forked_parsers_cut_a_large_log_only_at_line_ends(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # a line far past the limit across the middle (where the shares are cut) and one still
    # being written at the end, longer than the limit: the cuts and the position read to are
    # line ends, found in bounded memory, so the next run never starts inside a line
    monster = "/" + "x" * (8 << 20)
    text = lines("a", 3000) + log_line(monster, NOW) + lines("b", 3000)
    tail = '203.0.113.9 - - [x] "GET /' + "y" * 200_000  # no newline yet
    (tmp_path / "access.log").write_text(text + tail)
    alone_positions: dict[str, int] = {}
    alone = read(tmp_path, alone_positions)
    monkeypatch.setattr(logs, "PARALLEL_FROM", 10_000)
    monkeypatch.setattr(logs, "PROCESSES", 2)
    positions: dict[str, int] = {}
    tracemalloc.start()
    try:
        spread = read(tmp_path, positions)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert spread.counted == alone.counted == 6000
    assert (spread.malformed, spread.lines) == (1, 6001)  # the one across the cut
    assert spread.by_path == alone.by_path
    assert positions == alone_positions and list(positions.values()) == [len(text)]
    assert peak < 3 << 20, peak  # 6,000 paths counted; the cuts never read a whole line
    with (tmp_path / "access.log").open("a") as log:  # the last line ends: read whole, once
        log.write(" HTTP/1.1\" 200 5 \"-\" \"-\"\n")
    for found in (positions, alone_positions):
        again = read(tmp_path, found)
        assert (again.lines, again.malformed, again.counted) == (1, 1, 0)  # over the limit
        assert list(found.values()) == [(tmp_path / "access.log").stat().st_size]


class _Interrupted(Exception):
    pass


def _children() -> set[int]:
    """This process's children still running (zombies are reaped by join: not counted)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def test_a_reader_stopped_midway_leaves_no_parser_behind(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # the reader fails while feeding a gzipped log to its parsers (an interrupt, a fault):
    # it raises at once and no parser is left waiting for blocks. Each parser held the
    # reader's ends of the ones forked before it, so the first never saw its pipe end and
    # the reader waited for it for ever.
    with gzip.open(tmp_path / "access.log.1.gz", "wt") as log:
        log.write(lines("g", 20_000))
    monkeypatch.setattr(logs, "PARALLEL_FROM", 10_000)
    monkeypatch.setattr(logs, "PROCESSES", 3)
    monkeypatch.setattr(logs, "BLOCK", 4096)
    blocks = logs._blocks

    def failing(path: Path, offset: int, hits: logs.Hits) -> Iterator[tuple[bytes, int]]:
        for turn, block in enumerate(blocks(path, offset, hits)):
            if turn == 5:
                raise _Interrupted
            yield block

    monkeypatch.setattr(logs, "_blocks", failing)
    before = _children()
    outcome: list[BaseException | None] = []

    def reading() -> None:
        try:
            read(tmp_path, {})
            outcome.append(None)
        except BaseException as error:  # (looked at below)
            outcome.append(error)

    reader = threading.Thread(target=reading, daemon=True)
    reader.start()
    reader.join(60)
    assert not reader.is_alive(), "the reader waits on its parsers"
    assert len(outcome) == 1 and isinstance(outcome[0], _Interrupted)
    assert _children() <= before  # every parser ended
