"""What imgwarm's placement is measured against on a trace (bench/placement.py --trace):

- online caches from libCacheSim (`libcachesim` on the Python registry, a bench extra):
  LRU, GDSF, LHD, W-TinyLFU and S3-FIFO, each admitting every miss; nginx's proxy_cache, as
  LRU that admits a file on its second request (``proxy_cache_min_uses 2``, the setting
  sites use so that one-hit files do not flush the cache); and Belady-Size, offline (it
  knows every next request: no policy can do as well);
- the hourly rate oracle (traces from bench/tracegen.py only): at each hour's start, the
  variants there are placed by their true expected hits in the hour per page (the rates the
  generator drew from), greedily within the budget; each request in the hour is a hit when
  its path is placed. The best any placement made from logs once an hour can do.

Every cache counts files in whole 4 KiB pages, as the RAM tier does, and only requests from
the warm-up on count: a policy runs over the whole trace, and its misses before the warm-up
(the same requests, the same state: it is deterministic) are taken away.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy
from replay import events
from tracegen import HOUR, WIDTH_SHARE, WIDTHS, Listings

from imgwarm.cache.rank import FILL_LOOKAHEAD, PAGE, pages

ORACLE_GENERAL = numpy.dtype([("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
POLICIES = ("LRU", "GDSF", "LHD", "WTinyLFU", "S3FIFO", "nginx", "BeladySize")
LABELS = {"LRU": "LRU", "GDSF": "GDSF", "LHD": "LHD", "WTinyLFU": "W-TinyLFU",
          "S3FIFO": "S3-FIFO", "nginx": "nginx proxy_cache (min_uses 2)",
          "BeladySize": "Belady-Size (offline)", "oracle": "hourly rate oracle"}
_NAME = re.compile(r"(?:^|/)([lo])(\d+)-(\d+)\.[0-9a-f]+\.\w+$")


@dataclass
class Requests:
    """A trace's variants and requests, as arrays."""

    paths: list[str]  # by id
    sizes: numpy.ndarray  # bytes in whole pages, by id
    born: numpy.ndarray  # t each variant became available, by id
    t: numpy.ndarray  # a request's time
    ids: numpy.ndarray  # a request's variant


def load(trace: Path) -> Requests:
    ids: dict[str, int] = {}
    sizes: list[int] = []
    born: list[float] = []
    times: list[float] = []
    asked: list[int] = []
    for event in events(trace):
        if event.kind == "U":
            ids[event.path] = len(sizes)
            sizes.append(pages(event.size))
            born.append(event.t)
        else:
            times.append(event.t)
            asked.append(ids[event.path])
    return Requests(list(ids), numpy.array(sizes, dtype=numpy.int64), numpy.array(born),
                    numpy.array(times), numpy.array(asked, dtype=numpy.int64))


@dataclass(frozen=True)
class Ratios:
    object_hit_ratio: float
    byte_hit_ratio: float


def _next_access(ids: numpy.ndarray) -> numpy.ndarray:
    """For each request, the index of the next request to the same object (-1: none)."""
    order = numpy.lexsort((numpy.arange(ids.size), ids))
    following = numpy.full(ids.size, -1, dtype=numpy.int64)
    same = ids[order[1:]] == ids[order[:-1]]
    following[order[:-1][same]] = order[1:][same]
    return following


def online(found: Requests, budget: int, warmup: float) -> dict[str, Ratios]:
    """Each libCacheSim policy's hit ratios over the requests from the warm-up on."""
    import libcachesim as lcs

    records = numpy.zeros(found.ids.size, dtype=ORACLE_GENERAL)
    records["t"] = found.t.astype(numpy.uint32)
    records["id"] = found.ids + 1
    records["size"] = found.sizes[found.ids]
    records["next"] = _next_access(found.ids)
    before = int(numpy.searchsorted(found.t, warmup))
    sizes = found.sizes[found.ids].astype(numpy.float64)
    bytes_before, bytes_all = sizes[:before].sum(), sizes.sum()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.oracleGeneral.bin"
        records.tofile(path)
        for name in POLICIES:
            runs = []
            for limit in (before, -1):
                if limit == 0:
                    runs.append((0.0, 0.0))
                    continue
                reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
                runs.append(_cache(lcs, name, budget).process_trace(reader, max_req=limit))
            (miss_before, byte_miss_before), (miss_all, byte_miss_all) = runs
            misses = miss_all * found.ids.size - miss_before * before
            missed_bytes = byte_miss_all * bytes_all - byte_miss_before * bytes_before
            counted = found.ids.size - before
            results[name] = Ratios(1 - misses / counted,
                                   1 - missed_bytes / (bytes_all - bytes_before))
    return results


def _cache(lcs: Any, name: str, budget: int) -> Any:
    if name == "nginx":
        return lcs.LRU(cache_size=budget, admissioner=lcs.BloomFilterAdmissioner())
    return getattr(lcs, name)(cache_size=budget)


def oracle(found: Requests, rates: Path, budget: int, warmup: float) -> Ratios:
    """The hourly rate oracle's hit ratios (see the module's docstring)."""
    listings = Listings.load(rates)
    kinds, numbers, widths = [], [], []
    for path in found.paths:
        match = _NAME.search(path)
        if match is None:
            raise ValueError(f"{path}: not a path bench/tracegen.py writes: the oracle needs "
                             "its rates")
        kinds.append(match[1] == "l")
        numbers.append(int(match[2]))
        widths.append(WIDTHS.index(int(match[3])))
    listing, number = numpy.array(kinds), numpy.array(numbers)
    share = numpy.array(WIDTH_SHARE)[numpy.array(widths)]
    hours = int(numpy.ceil(found.t[-1] / HOUR)) if found.t.size else 0
    one_hit_rate = 1.0 / max(hours, 1)  # asked once, at a uniform time: per hour
    hits = hit_bytes = counted = counted_bytes = 0.0
    for hour in range(hours):
        start, end = hour * HOUR, (hour + 1) * HOUR
        expected = numpy.where(listing, 0.0, one_hit_rate)
        per_listing = listings.expected(start, end, 12)
        expected[listing] = per_listing[number[listing]] * share[listing]
        expected[found.born > start] = 0.0  # not there yet: a run at the hour cannot place it
        placed = _greedy(expected / found.sizes, found.sizes, budget)
        lo, hi = numpy.searchsorted(found.t, [max(start, warmup), end])
        if hi <= lo:
            continue
        asked = found.ids[lo:hi]
        hit = placed[asked]
        size = found.sizes[asked]
        hits += hit.sum()
        hit_bytes += size[hit].sum()
        counted += asked.size
        counted_bytes += size.sum()
    return Ratios(hits / counted, hit_bytes / counted_bytes)


def _greedy(density: numpy.ndarray, sizes: numpy.ndarray, budget: int) -> numpy.ndarray:
    """Placed, by id: densest first while they fit, then the next FILL_LOOKAHEAD for smaller
    ones (rank.choose's rule)."""
    order = numpy.argsort(-density, kind="stable")
    order = order[density[order] > 0]
    taken = numpy.cumsum(sizes[order])
    count = int(numpy.searchsorted(taken, budget, side="right"))
    placed = numpy.zeros(sizes.size, dtype=bool)
    placed[order[:count]] = True
    left = budget - (int(taken[count - 1]) if count else 0)
    for candidate in order[count:count + 1 + FILL_LOOKAHEAD]:
        if left < PAGE:
            break
        if sizes[candidate] <= left:
            placed[candidate] = True
            left -= int(sizes[candidate])
    return placed
