"""Hostile access logs, as the public can make nginx write them: long paths answered 404,
lines past the length limit, quotes and request lines inside quoted fields, invalid UTF-8,
distinct junk paths, gzip members cut short. Shared by the log tests and the closing figures."""

from __future__ import annotations

import gzip
import random
import time
from pathlib import Path

from imgwarm.cache.index import Index
from imgwarm.cache.logformat import LogFormat
from imgwarm.cache.logs import Hits, read_logs
from imgwarm.cache.placeable import Placeable
from imgwarm.cache.rank import Decay
from imgwarm.manifest import Variant
from imgwarm.store.layout import Layout

STAMP = "25/Nov/2026:10:00:00 +0000"
LAYOUT = Layout()  # the default: 3 levels of 7 bits
VARIANT = str(LAYOUT.path_for_name("photo.0123456789abcdef.webp"))
KNOWN = VARIANT.encode()


def shaped_junk(rnd: random.Random) -> bytes:
    """A safe path of a variant's exact shape (its shard folders right) that no index knows."""
    return b"/" + str(LAYOUT.path_for_name(f"junk.{rnd.randbytes(12).hex()}.webp")).encode()


def line(path: bytes, status: int = 200, *, method: bytes = b"GET", referer: bytes = b"-",
         agent: bytes = b"Mozilla/5.0") -> bytes:
    """One combined-format line, the values as given (nothing escaped: the worst case)."""
    return (b'203.0.113.9 - - [' + STAMP.encode() + b'] "' + method + b" " + path
            + b' HTTP/1.1" ' + str(status).encode() + b' 512 "' + referer + b'" "' + agent
            + b'"\n')


def hostile(scale: int, *, lines: int = 40, seed: int = 1) -> bytes:
    """``lines`` lines of every hostile kind in turn (and good requests to ``VARIANT``), their
    hostile parts ``scale`` times longer: twice the scale, about twice the bytes, and a reader
    that backtracks takes 4x and more."""
    rnd = random.Random(seed)
    long_path = b"/" + b"a" * (1000 * scale)
    out: list[bytes] = []
    for i in range(lines):
        kind = i % 8
        if kind == 0:  # a long path nginx answered 404: the backtracking case
            out.append(line(long_path, 404))
        elif kind == 1:  # a Referer that starts like a request line
            out.append(line(b"/x", 404, referer=b"GET " + long_path))
        elif kind == 2:  # quotes and a counted request inside the quoted fields
            fake = b'GET /' + VARIANT.encode() + b' HTTP/1.1" 200 1 "'
            out.append(line(b"/y", 404, referer=fake * scale, agent=b'"' + fake * scale))
        elif kind == 3:  # past the line limit (64 KiB), with the request at its very end
            out.append(b"x" * (9000 * scale) + line(b"/" + VARIANT.encode()))
        elif kind == 4:  # invalid UTF-8 and control bytes in the path
            out.append(line(b"/\xff\xfe" + rnd.randbytes(50 * scale).replace(b"\n", b"")
                            .replace(b'"', b"").replace(b" ", b"")))
        elif kind == 5:  # a distinct junk path that climbs out and back in
            out.append(line(b"/" + rnd.randbytes(8).hex().encode() + b"/../" + VARIANT.encode()))
        elif kind == 6:  # a distinct safe path of a variant's shape that no index knows
            out.append(line(shaped_junk(rnd)))
        else:
            out.append(line(b"/" + VARIANT.encode()))
    return b"".join(out)


def junk_paths(count: int, *, distinct: bool, seed: int = 2) -> bytes:
    """``count`` requests: distinct junk paths (``/RANDOM/../variant`` and variant-shaped
    names no index knows, in turn), or the one variant over and over."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        if not distinct:
            path = b"/" + VARIANT.encode()
        elif i % 2:
            path = b"/" + rnd.randbytes(12).hex().encode() + b"/../" + VARIANT.encode()
        else:
            path = shaped_junk(rnd)
        out.append(line(path))
    return b"".join(out)


def cut_gzip(data: bytes) -> bytes:
    """A gzip member cut short (a rotation copied while it was written, a full disk)."""
    packed = gzip.compress(data)
    return packed[:len(packed) * 2 // 3]


NOW = 1_790_000_000.0
FLAT = Decay(NOW, 1e12)


def placeable(folder: Path) -> Placeable:
    """Paths checked as a warm run checks them, against a real index of warm's (made in
    ``folder`` the first time) that knows one variant, VARIANT."""
    index = folder / "state" / "index.sqlite"
    if not index.exists():
        made = Index(index)
        made.set_source("up/a.jpg", [Variant(format="webp", width=320, height=200, bytes=900,
                                             path=VARIANT)], 1.0)
        made.close(keep=True)
    return Placeable("/", LAYOUT, str(index))


def parse(file: Path, data: bytes) -> tuple[Hits, float]:
    file.write_bytes(data)
    paths = placeable(file.parent)
    started = time.perf_counter()
    hits = read_logs([file], LogFormat("combined"), {}, FLAT, NOW, paths)
    return hits, time.perf_counter() - started
