"""Replay a request trace through the code ``warm`` runs to place the RAM tier: the index, the
access-log reader, scoring and planning (no file is copied).

The trace is gzipped (or plain) TSV in time order, one event a line:

    U <TAB> t <TAB> path <TAB> bytes <TAB> width [<TAB> source]
                                     a variant available from t seconds (of the source whose
                                     manifest names it: the path itself when not given)
    R <TAB> t <TAB> path             a request answered 200 at t

Every ``interval`` seconds from 0, a placement is made as one ``warm`` run makes it: the
variants that became available since the last run are added to the index (with the prior
of a new upload, as if earned when each came), the access log written since the last run is
read and scored, and the RAM tier is planned within the budget (``Index.plan``, files in
whole pages). Each request from then until the next placement is a hit when its path is
placed. Requests before ``warmup`` are not counted. A placement at t includes the variants
available at t and judges the requests from t on.

The requests are written to an access log in nginx's ``combined`` format, as nginx would,
and read back by ``read_logs``, so hotness comes through the same parser, blocks and decay
as a cache server's. Paths need not be in imgwarm's layout: the log is read as a trusted
one (no Placeable check); every requested path must have been announced by a U line.
"""

from __future__ import annotations

import gzip
import io
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TextIO

from imgwarm.cache.index import Index
from imgwarm.cache.logformat import LogFormat
from imgwarm.cache.logs import read_logs
from imgwarm.cache.rank import PAGE, pages
from imgwarm.cache.run import start_clock
from imgwarm.config.cache import CacheSettings
from imgwarm.manifest import Variant

EPOCH = 1_767_225_600.0  # the trace's t = 0 in the log (2026-01-01 00:00 UTC)
MAX_LINE = 4096


class TraceError(ValueError):
    """A trace line that cannot be replayed; says which line and why."""


@dataclass(frozen=True)
class Event:
    kind: str  # "U" or "R"
    t: float
    path: str
    size: int = 0
    width: int = 0
    source: str = ""
    line: int = 0


@dataclass
class Replayed:
    object_hit_ratio: float
    byte_hit_ratio: float  # bytes in whole pages
    requests: int  # counted: after the warm-up
    placements: int
    planning_seconds: float  # a placement's Index.plan, on average
    scoring_seconds: float  # a placement's sources and log reading, on average

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def opened(path: Path) -> TextIO:
    """The trace as text: gzipped (by its magic bytes, not its name) or plain."""
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    # odd bytes kept as surrogates: a path holding them is refused by its line, not by a crash
    if gzipped:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8",
                                errors="surrogateescape", newline="\n")
    return path.open(encoding="utf-8", errors="surrogateescape", newline="\n")


def events(path: Path) -> Iterator[Event]:
    """The trace's events, checked: one TraceError naming the line for anything wrong."""
    last = 0.0
    with opened(path) as lines:
        for number, line in enumerate(lines, 1):
            try:
                event = parse(line)
            except TraceError as error:
                raise TraceError(f"{path}: line {number}: {error}") from None
            if event is None:
                continue
            if event.t < last:
                raise TraceError(f"{path}: line {number}: t {event.t:g} is before the line "
                                 f"above's {last:g}: events must be in time order")
            last = event.t
            yield replace(event, line=number)


def parse(line: str) -> Event | None:
    """One line (None for an empty one)."""
    if len(line) > MAX_LINE:
        raise TraceError(f"over {MAX_LINE} characters")
    line = line.rstrip("\n")
    if not line:
        return None
    fields = line.split("\t")
    kind = fields[0]
    if kind not in ("U", "R") or len(fields) not in ((5, 6) if kind == "U" else (3,)):
        raise TraceError("expected U<TAB>t<TAB>path<TAB>bytes<TAB>width[<TAB>source] or "
                         "R<TAB>t<TAB>path")
    t = _number(fields[1], "t", float)
    path = fields[2]
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in path.split("/")) \
            or any(c.isspace() or c in '"\\?#%' or not c.isprintable() for c in path):
        raise TraceError(f"path {path!r}: a relative path of plain segments (no spaces, "
                         "quotes, backslashes, ?, # or %)")
    if kind == "R":
        return Event("R", t, path)
    size = _number(fields[3], "bytes", int)
    width = _number(fields[4], "width", int)
    if size < 1 or width < 1:
        raise TraceError("bytes and width must be at least 1")
    source = fields[5] if len(fields) == 6 else path
    if not source:
        raise TraceError("an empty source")
    return Event("U", t, path, int(size), int(width), source)


def _number(text: str, name: str, kind: type[int] | type[float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise TraceError(f"{name} {text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise TraceError(f"{name} {text!r} must be 0 or more")
    return value


class _Log:
    """The access log nginx would write for the requests (``combined``, one time string a
    second: requests come in time order)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle = path.open("w", encoding="ascii")
        self.second, self.stamp = -1, ""

    def write(self, t: float, path: str, size: int) -> None:
        second = int(EPOCH + t)
        if second != self.second:
            self.second = second
            self.stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(second))
        self.handle.write(f'192.0.2.1 - - [{self.stamp}] "GET /{path} HTTP/1.1" 200 {size} '
                          '"-" "replay"\n')

    def flush(self) -> None:
        self.handle.flush()


def replay(trace: Path, *, budget: int, warmup: float, interval: float,
           settings: CacheSettings, scratch: Path) -> Replayed:
    """Replay ``trace`` (see the module's docstring); the index and the log go in
    ``scratch``. Raises TraceError for a bad line, before or after some placements."""
    if interval <= 0:
        raise ValueError("the placement interval must be above 0")
    index = Index(scratch / "index.sqlite")
    log = _Log(scratch / "access.log")
    parser = LogFormat("combined")
    positions: dict[str, int] = {}
    sizes: dict[str, int] = {}
    pending: dict[str, list[tuple[Variant, float]]] = {}  # by source
    known: dict[str, list[tuple[Variant, float]]] = defaultdict(list)  # a source's so far
    placed: set[str] = set()
    next_at, placements = 0.0, 0
    planning = scoring = 0.0
    hits = requests = hit_bytes = all_bytes = 0

    def place(at: float) -> set[str]:
        nonlocal planning, scoring
        started = time.perf_counter()
        now = EPOCH + at
        decay = start_clock(index, settings.hot_half_life, now)
        if pending:  # the sources step: new variants with the prior, as of their upload
            prior_now = index.prior(decay(now))
            for source, new in pending.items():  # (a source's variants: all it names)
                known[source].extend(new)
            latest = {source: max(t for _, t in known[source]) for source in pending}
            index.set_sources([(source, [v for v, _ in known[source]],
                                prior_now * decay(EPOCH + latest[source]) / decay(now))
                               for source in pending], now,
                              born={source: EPOCH + t for source, t in latest.items()
                                    if t > 0})  # (there at the start: of unknown age, old)
            pending.clear()
        log.flush()
        found = read_logs([log.path], parser, positions, decay, now)
        weights = {path.decode()[1:]: weight for path, weight in found.by_path.items()}
        index.add_scores(weights)
        index.rerank(weights, now=now, decay=decay)  # (as warm's score step)
        index.commit()
        planned = time.perf_counter()
        place, evict = index.plan("ram", budget, max_width=settings.ram_max_width, page=PAGE)
        planning += time.perf_counter() - planned
        scoring += planned - started
        index.mark("ram", evict, None)  # (as warm settles its copies and evictions)
        index.mark("ram", place, "placed")
        placed.difference_update(evict)
        placed.update(place)
        return placed

    try:
        for event in events(trace):
            while event.t > next_at or (event.kind == "R" and event.t == next_at):
                placed = place(next_at)
                placements += 1
                next_at += interval
            if event.kind == "U":
                if event.path in sizes:
                    raise TraceError(f"{trace}: line {event.line}: {event.path} is announced "
                                     "twice")
                sizes[event.path] = event.size
                pending.setdefault(event.source, []).append((Variant(
                    format="webp", width=event.width, height=event.width, bytes=event.size,
                    path=event.path), event.t))
                continue
            size = sizes.get(event.path)
            if size is None:
                raise TraceError(f"{trace}: line {event.line}: a request for {event.path} "
                                 "before any U line announced it")
            log.write(event.t, event.path, size)
            if event.t >= warmup:
                taken = pages(size)
                requests += 1
                all_bytes += taken
                if event.path in placed:
                    hits += 1
                    hit_bytes += taken
    finally:
        log.handle.close()
        index.close(keep=False)
    return Replayed(hits / requests if requests else 0.0,
                    hit_bytes / all_bytes if all_bytes else 0.0, requests, placements,
                    planning / placements if placements else 0.0,
                    scoring / placements if placements else 0.0)
