"""Access logs: what was asked for, and when, read incrementally from plain and gzipped,
rotated files.

A file is known by its *fingerprint*: the hash of its first line. Where a file was read to is
kept by fingerprint, so the next run reads only what is new, whatever happened meanwhile:
``access.log`` renamed ``access.log.1`` (same first line: go on from where it was), then
gzipped as ``access.log.2.gz`` (same first line; its trailer says its length, so a file read
to its end is not even decompressed), or copied and truncated in place (copytruncate: the
truncated file starts with a new first line and is read from its start).

Lines are untrusted: a line longer than ``MAX_LINE`` (checked on every line, linearly: by
jumps of ``MAX_LINE`` that each find a newline), binary garbage, or one the format cannot read
is counted as malformed and skipped. Only successful GETs and HEADs count. Given a
``Placeable``, each counted path is checked as it is read: an unsafe one is counted and
dropped, one that is no variant's is dropped, and what is kept is pruned to the variants the
index knows whenever it grows past ``KEEP`` (and twice what the last pruning kept).

One way of weighing, whatever the file: ``_count`` over blocks of whole lines, in this
process for a few new lines, or for a large new part in one forked parser a core, each with
a share (a range of a plain file that it reads, or the blocks of a gzipped one, inflated
here, down its pipe), its hits sent back once.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import itertools
import math
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from isal import igzip, igzip_lib

from imgwarm.cache.logformat import LogFormat
from imgwarm.cache.placeable import NOT_VARIANT, Check, Placeable, checking
from imgwarm.cache.rank import Decay

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

MAX_LINE = 64 * 1024
KEEP = 1 << 12  # distinct paths kept before they are pruned to the variants the index knows
BLOCK = 4 << 20
PARALLEL_FROM = 16 << 20  # new bytes of a file worth forking parsers for
PROCESSES = os.cpu_count() or 1
_ISAL_ERROR: type[Exception] = igzip_lib.IsalError  # type: ignore[assignment]  # stub: an instance
_DAMAGED = (OSError, EOFError, zlib.error, _ISAL_ERROR)  # a damaged or vanished file


@dataclass
class Hits:
    """What a read found: per requested path (still percent-encoded; with a Placeable, per
    variant key, of the variants that can be placed only), its weight."""

    by_path: dict[bytes, float] = field(default_factory=dict)
    count_by_path: dict[bytes, int] = field(default_factory=dict)
    lines: int = 0
    counted: int = 0  # successful GETs and HEADs
    malformed: int = 0
    unsafe: int = 0  # counted requests whose path was unsafe ('..', odd bytes): dropped
    files: int = 0
    bytes_read: int = 0
    # With a Placeable: paths not checked yet (at most KEEP and a block's), and the plain
    # spelling of each variant found placeable (one a variant: bounded by what can be placed)
    pending: dict[bytes, tuple[float, int]] = field(default_factory=dict)
    plain: dict[bytes, bytes] = field(default_factory=dict)

    def add(self, path: bytes, weight: float, count: int) -> None:
        self.by_path[path] = self.by_path.get(path, 0.0) + weight
        self.count_by_path[path] = self.count_by_path.get(path, 0) + count

    def bound(self, check: Check | None, *, at: int | None = None) -> None:
        """Check the pending paths once there are more than ``at`` (KEEP): the unsafe are
        counted, the others' keys asked of the index at once, and only the variants it knows
        are kept."""
        if check is None or len(self.pending) <= (KEEP if at is None else at):
            return
        placeable = check.placeable
        keys: dict[bytes, bytes] = {}
        for path, (_, count) in self.pending.items():
            key = placeable.key(path)
            if key is None:
                self.unsafe += count
            elif key is not NOT_VARIANT:
                keys[path] = key
        known = check.known(list(set(keys.values())))
        for path, key in keys.items():
            if key in known:
                weight, count = self.pending[path]
                self.add(key, weight, count)
                if path == placeable.spelled(key):
                    self.plain[path] = key
        self.pending = {}  # (a new dict: one never shrinks when entries leave it)


def log_files(patterns: list[str]) -> list[Path]:
    """Files named or matched by globs, oldest first (rotated ones before the live one)."""
    found: set[str] = set()
    for pattern in patterns:
        matches = glob.glob(pattern) if glob.has_magic(pattern) else [pattern]
        found.update(m for m in matches if os.path.isfile(m))
    return sorted((Path(f) for f in found), key=lambda p: (p.stat().st_mtime, str(p)))


def _gzipped(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _opened(path: Path) -> gzip.GzipFile | object:
    if not _gzipped(path):
        return path.open("rb")
    # ISA-L's gzip reader (a GzipFile) inflates at 3x zlib's speed: with the parsers on
    # both cores, inflating a rotated log is the process that feeds them
    return igzip.open(path, "rb")  # type: ignore[no-untyped-call,no-any-return]


def fingerprint(path: Path) -> str | None:
    """The hash of the first line (None for an empty file: nothing to know it by yet)."""
    try:
        with _opened(path) as handle:  # type: ignore[attr-defined]
            first = handle.readline(4096)
    except _DAMAGED:
        return None
    return hashlib.sha256(first).hexdigest()[:24] if first else None


def _read_to_end_already(path: Path, offset: int) -> bool:
    """A gzipped file whose trailer says it is as long as what was read: nothing new."""
    with path.open("rb") as handle:
        handle.seek(-4, os.SEEK_END)
        (size,) = struct.unpack("<I", handle.read(4))
    return bool(size == offset % (1 << 32))


def _skip(handle: gzip.GzipFile, count: int) -> None:
    while count > 0:  # gzip cannot seek: decompress and drop what was read before
        skipped = handle.read(min(count, BLOCK))
        if not skipped:
            return
        count -= len(skipped)


def _blocks(path: Path, offset: int, hits: Hits) -> Iterator[tuple[bytes, int]]:
    """Whole lines from ``offset`` on, a block at a time, with the offset after each block.
    A line still being written (no newline yet) is left for the next run."""
    with _opened(path) as handle:  # type: ignore[attr-defined]
        if isinstance(handle, gzip.GzipFile):
            _skip(handle, offset)
        else:
            handle.seek(offset)
        yield from _whole_lines(iter(lambda: handle.read(BLOCK), b""), offset, hits)


def _whole_lines(chunks: Iterator[bytes], position: int, hits: Hits, *,
                 rest: bool = False) -> Iterator[tuple[bytes, int]]:
    """Pieces cut anywhere, made into blocks of whole lines, each with the offset after it
    (counting from ``position``). A line longer than MAX_LINE that runs over a piece's end is
    dropped whole as it arrives (never gathered) and counted as malformed; ``rest``: the last
    piece of line without a newline is a block too."""
    carry, dropping = b"", False
    for piece in chunks:
        data = piece
        if dropping:  # the rest of a monster line
            newline = data.find(b"\n")
            if newline < 0:
                position += len(data)
                continue
            position += newline + 1
            data, dropping = data[newline + 1:], False
        data = carry + data
        end = data.rfind(b"\n") + 1
        block, carry = data[:end], data[end:]
        if block:  # its offset is its own end: a monster line after it is not read yet
            position += len(block)
            hits.bytes_read += len(block)
            yield block, position
        if len(carry) > MAX_LINE:
            hits.malformed += 1
            hits.lines += 1
            position += len(carry)
            carry, dropping = b"", True
    if rest and carry:
        yield carry, position + len(carry)


def _within_limit(block: bytes) -> tuple[bytes, int]:
    """The block without its lines longer than MAX_LINE, and how many those were. Linear: a
    newline within each jump of MAX_LINE bytes means no line starting before it is too long,
    so only a jump without one (a line too long, found whole) costs a second look."""
    kept: list[bytes] = []
    dropped, start, position, size = 0, 0, 0, len(block)
    while size - position > MAX_LINE:
        last = block.rfind(b"\n", position, position + MAX_LINE + 1)
        if last >= 0:
            position = last + 1
            continue
        end = block.find(b"\n", position)
        end = size if end < 0 else end + 1
        kept.append(block[start:position])
        start = position = end
        dropped += 1
    if not dropped:
        return block, 0
    kept.append(block[start:])
    return b"".join(kept), dropped


def _count(blocks: Iterator[tuple[bytes, int]], log_format: LogFormat, weigh: Decay,
           when: float, hits: Hits, check: Check | None) -> Iterator[int]:
    """Weigh the requests of each block into ``hits`` (``when``: now, the time of a block
    with no readable time); yields the offset after each block."""
    now = when
    for whole, offset in blocks:
        block, too_long = _within_limit(whole)
        hits.lines += too_long
        hits.malformed += too_long
        found_time = log_format.time_of(block)
        if found_time is not None and math.isfinite(found_time):
            when = min(found_time, now)  # a line from the future counts as now
        weight = weigh(when)
        counts, lines, unreadable = log_format.counted(block)
        hits.lines += lines
        hits.malformed += unreadable
        by_path, count_by_path = hits.by_path, hits.count_by_path
        plain, pending = hits.plain, hits.pending
        for target, count in counts.items():  # a few thousand paths a block: inlined
            key = target if check is None else plain.get(target)
            if key is None:  # not checked yet: checked with many others (bound)
                was = pending.get(target, (0.0, 0))
                pending[target] = (was[0] + weight * count, was[1] + count)
                continue
            by_path[key] = by_path.get(key, 0.0) + weight * count
            count_by_path[key] = count_by_path.get(key, 0) + count
        hits.counted += counts.total()
        hits.bound(check)
        yield offset


def _merge(into: Hits, part: Hits) -> None:
    for path, weight in part.by_path.items():
        into.add(path, weight, part.count_by_path[path])
    into.lines += part.lines
    into.counted += part.counted
    into.malformed += part.malformed
    into.unsafe += part.unsafe


def _last_line_end(path: Path, offset: int) -> int:
    """Where a plain file's last whole line after ``offset`` ends (``offset`` when none does:
    a line still being written is left for the next run, however long). Read backwards a
    piece at a time."""
    with path.open("rb") as handle:
        end = os.fstat(handle.fileno()).st_size
        while end > offset:
            start = max(offset, end - MAX_LINE)
            handle.seek(start)
            newline = handle.read(end - start).rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            end = start
    return offset


def _line_start(handle: BinaryIO, position: int, end: int) -> int:
    """The first line start at or after ``position`` (past its newline), at most ``end``;
    read forwards a piece at a time, never a whole line (a line may be any length)."""
    handle.seek(position)
    while position < end:
        piece = handle.read(min(MAX_LINE, end - position))
        if not piece:
            break
        newline = piece.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(piece)
    return end


def _split(path: Path, start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """[start, end) cut into ``parts`` ranges at line ends."""
    cuts = [start]
    with path.open("rb") as handle:
        for i in range(1, parts):
            middle = max(cuts[-1], start + (end - start) * i // parts)
            cuts.append(_line_start(handle, middle, end) if middle > start else start)
    cuts.append(end)
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def _read_share(path: Path, start: int, end: int) -> Iterator[bytes]:
    """A parser's share of a plain file, [start, end), read by the parser a block at a time
    (a share of a large log is larger than memory)."""
    with path.open("rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0 and (data := handle.read(min(BLOCK, left))):
            left -= len(data)
            yield data


def _received(conn: Connection) -> Iterator[bytes]:
    """Blocks of whole lines sent down ``conn``, until an empty one."""
    while block := conn.recv_bytes():
        yield block


def _parser(conn: Connection, path: Path, share: tuple[int, int] | None, log_format: LogFormat,
            weigh: Decay, when: float, placeable: Placeable | None,
            siblings: tuple[Connection, ...]) -> None:
    """A forked parser: its share (a range of a plain file, read here; None: the blocks
    sent down ``conn``) weighed by ``_count`` and checked against its own look at the
    snapshot; its hits go back up ``conn`` once, at the end. ``siblings``: the reader's
    ends of the parsers forked before, which this one must not hold open (a parser whose
    reader is gone sees the end of its pipe only when no other process holds it)."""
    for end in siblings:
        end.close()
    pieces = _received(conn) if share is None else _read_share(path, *share)
    hits = Hits()
    with checking(placeable) as check:
        for _ in _count(_whole_lines(pieces, 0, hits, rest=True), log_format, weigh, when,
                        hits, check):
            pass
        hits.bound(check, at=0)
    hits.plain = {}  # (this process's: not sent back)
    conn.send(hits)


def _in_parallel(path: Path, offset: int, gzipped: bool, log_format: LogFormat, weigh: Decay,
                 when: float, hits: Hits, check: Check | None) -> Iterator[int]:
    """``_count`` spread over one forked parser a core, each weighing a share of the new
    whole lines, its hits coming back once. A plain file is cut at line ends, each parser
    reading its own range; a gzipped one cannot be cut: it is inflated here and its blocks
    go down each parser's pipe in turn, as raw bytes (pickling blocks cost more than the
    parsing it spread). Yields the offset read to; a file that breaks midway raises after
    what was read of it is counted."""
    import multiprocessing  # here: most runs read a few new lines, in this process

    shares: list[tuple[int, int] | None] = [None] * PROCESSES
    if not gzipped:
        end = _last_line_end(path, offset)
        if end <= offset:
            return
        shares = list(_split(path, offset, end, PROCESSES))
    fork = multiprocessing.get_context("fork")  # (the parsers inherit format and snapshot)
    placeable = None if check is None else check.placeable
    ends: list[Connection] = []
    workers = []
    done, broken = None, None
    try:
        for share in shares:
            mine, theirs = fork.Pipe()
            worker = fork.Process(target=_parser, daemon=True, args=(
                theirs, path, share, log_format, weigh, when, placeable, tuple(ends)))
            ends.append(mine)
            try:
                worker.start()
            finally:
                theirs.close()
            workers.append(worker)  # (started: killed and joined below)
        if gzipped:
            try:
                for turn, (block, at) in enumerate(_blocks(path, offset, hits)):
                    ends[turn % len(ends)].send_bytes(block)
                    done = at
            except _DAMAGED as error:
                broken = error
            for conn in ends:
                conn.send_bytes(b"")
        else:
            done = end
            hits.bytes_read += end - offset
        for conn in ends:
            _merge(hits, conn.recv())
            hits.bound(check)
    except BaseException:  # (a parser that died, an interrupt): the others' work is moot
        for worker in workers:
            worker.kill()
        raise
    finally:
        for conn in ends:
            conn.close()
        for worker in workers:
            worker.join()
    if done is not None:
        yield done
    if broken is not None:
        raise broken


def read_logs(files: list[Path], log_format: LogFormat, positions: dict[str, int],
              weigh: Decay, default_time: float, placeable: Placeable | None = None) -> Hits:
    """Read what is new in ``files`` (``positions`` is updated in place: fingerprint -> offset
    read to) and weigh every counted request by ``weigh(time)``. A large new part of a file,
    plain or gzipped, is parsed by one process per core. With ``placeable``, the counts are
    by variant key, and only of variants that can be placed (without, by requested path: for
    tests and tools that trust their logs)."""
    hits = Hits()
    seen: set[str] = set()
    with checking(placeable) as check:
        for path in files:
            mark = fingerprint(path)
            if mark is None or mark in seen:
                continue
            seen.add(mark)
            offset = positions.get(mark, 0)
            try:
                gzipped = _gzipped(path)
                if offset and gzipped and _read_to_end_already(path, offset):
                    continue
                if not gzipped and path.stat().st_size < offset:
                    offset = 0  # rewritten in place with the same first line
                hits.files += 1
                large = PROCESSES > 1 and path.stat().st_size - offset > PARALLEL_FROM
                reading = (_in_parallel(path, offset, gzipped, log_format, weigh,
                                        default_time, hits, check) if large else
                           _count(_blocks(path, offset, hits), log_format, weigh,
                                  default_time, hits, check))
                for done in reading:
                    positions[mark] = done
            except _DAMAGED:
                hits.malformed += 1  # a damaged or vanished file: what was read of it counts
        hits.bound(check, at=0)
    return hits
