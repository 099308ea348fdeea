"""Placement policy: imgwarm's RAM-tier ranking against online LRU, LFU and GDSF caches.

A synthetic, non-stationary trace is replayed hour by hour:

- SOURCES photos at the start and UPLOADS new ones every hour; each has four variants, two
  thumbnails (320 and 640 px: 5-15 and 15-40 KB) and two large ones (1280 and 1920 px:
  100-250 and 200-400 KB); a request asks for a thumbnail 80% of the time;
- a source's popularity is Zipf (alpha 0.8 or 1.0) by a random rank, and a new upload starts
  as hot as the tenth most popular source and cools with a half-life of HOT_HOURS, then keeps
  its Zipf share (a new listing on a classifieds site is its hottest);
- REQUESTS requests an hour, at uniform times within it.

imgwarm: before each hour, the hour's uploads are recorded (their variants get the prior) and
the RAM tier is re-placed from the log so far, by imgwarm's own index and ranking code (the
``Index`` and ``rank`` functions that ``warm`` calls, with its default half-life and width
limit, 640 px: only thumbnails go to RAM, and, to show the ranking alone, with no width limit);
the hour's requests are then answered from that fixed set. The online caches see every
request as it comes and admit every miss. All count sizes in whole 4 KiB pages (what a tmpfs
takes), within the same byte budget: 1% and 5% of all variant bytes at the end of the trace.
Reported: the object hit ratio over the hours after WARMUP (averaged over every request).

With ``--trace FILE`` (issue 29), a recorded or generated trace (bench/tracegen.py) is
replayed instead through the code ``warm`` runs (bench/replay.py: the index, the access-log
reader, scoring and planning; no file copies), a placement every ``--interval`` seconds
within ``--ram-budget`` bytes; ``--json`` prints its figures as one line, and ``--compare``
puts it beside libCacheSim's policies and the hourly rate oracle (bench/baselines.py).

Usage:
    .venv/bin/python bench/placement.py                     # alpha 0.8 and 1.0, 1% and 5%
    .venv/bin/python bench/placement.py --hours 24 --requests 20000
    .venv/bin/python bench/tracegen.py trace.tsv.gz
    .venv/bin/python bench/placement.py --trace trace.tsv.gz --ram-budget 433000000 \
        --warmup 43200 --compare
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from imgwarm.cache.index import Index  # noqa: E402
from imgwarm.cache.rank import PAGE, Decay, pages  # noqa: E402
from imgwarm.config import Settings  # noqa: E402
from imgwarm.manifest import Variant  # noqa: E402

HOUR = 3600.0
INTERVAL = 300.0  # seconds between warm runs with --trace: the compose file's WARM_EVERY
HOT_HOURS = 6.0
WIDTHS = ((320, 5_000, 15_000, 0.50), (640, 15_000, 40_000, 0.30),
          (1280, 100_000, 250_000, 0.15), (1920, 200_000, 400_000, 0.05))


@dataclass
class Source:
    key: str
    born: float  # hours
    rank: int
    variants: list[Variant]


class Trace:
    def __init__(self, alpha: float, sources: int, uploads: int, hours: int, requests: int,
                 seed: int) -> None:
        self.rnd = random.Random(seed)
        self.alpha, self.uploads, self.hours, self.requests = alpha, uploads, hours, requests
        self.total = sources + uploads * hours
        ranks = list(range(1, self.total + 1))
        self.rnd.shuffle(ranks)
        self.ranks = iter(ranks)
        self.sources = [self._source(i, 0.0) for i in range(sources)]
        self.hot = 1.0 / 10 ** alpha  # the tenth most popular source's weight

    def _source(self, number: int, born: float) -> Source:
        key = f"up/{number}.jpg"
        variants = []
        for width, low, high, _ in WIDTHS:
            size = self.rnd.randrange(low, high)
            variants.append(Variant(format="webp", width=width, height=width * 2 // 3,
                                    bytes=size, path=f"v/{number}-{width}.webp"))
        return Source(key, born, next(self.ranks), variants)

    def upload(self, hour: int) -> list[Source]:
        new = [self._source(len(self.sources) + i, float(hour)) for i in range(self.uploads)]
        self.sources.extend(new)
        return new

    def hour(self, hour: int) -> Iterator[tuple[float, Variant]]:
        weights = []
        for source in self.sources:
            age = hour - source.born
            boost = self.hot * 2 ** (-age / HOT_HOURS) if source.born > 0 else 0.0
            weights.append(1.0 / source.rank ** self.alpha + boost)
        picked = self.rnd.choices(self.sources, weights=weights, k=self.requests)
        kinds = self.rnd.choices(range(len(WIDTHS)), weights=[w[3] for w in WIDTHS],
                                 k=self.requests)
        times = sorted(self.rnd.uniform(hour, hour + 1) * HOUR for _ in range(self.requests))
        for when, source, kind in zip(times, picked, kinds, strict=True):
            yield when, source.variants[kind]

    def all_bytes(self) -> int:
        return sum(v.bytes for s in self.sources for v in s.variants) + \
            self.uploads * self.hours * sum((w[1] + w[2]) // 2 for w in WIDTHS)


class Lru:
    def __init__(self, budget: int) -> None:
        self.budget, self.used, self.items = budget, 0, OrderedDict[str, int]()

    def request(self, path: str, size: int) -> bool:
        if path in self.items:
            self.items.move_to_end(path)
            return True
        if size <= self.budget:
            while self.used + size > self.budget:
                self.used -= self.items.popitem(last=False)[1]
            self.items[path] = size
            self.used += size
        return False


class _Heap:
    """A cache evicting the lowest priority (lazy deletion); ``priority`` sets the policy."""

    def __init__(self, budget: int) -> None:
        self.budget, self.used = budget, 0
        self.items: dict[str, tuple[float, int]] = {}  # path -> (priority, size)
        self.freq: dict[str, int] = {}
        self.heap: list[tuple[float, int, str]] = []
        self.clock, self.tick = 0.0, 0

    def priority(self, path: str, size: int) -> float:
        raise NotImplementedError

    def request(self, path: str, size: int) -> bool:
        hit = path in self.items
        self.freq[path] = self.freq.get(path, 0) + 1 if hit else 1
        if not hit and size > self.budget:
            return False
        while not hit and self.used + size > self.budget:
            value, _, victim = heapq.heappop(self.heap)
            if victim in self.items and self.items[victim][0] == value:
                self.clock = value
                self.used -= self.items.pop(victim)[1]
                del self.freq[victim]
        value = self.priority(path, size)
        self.tick += 1
        heapq.heappush(self.heap, (value, self.tick, path))
        if not hit:
            self.used += size
        self.items[path] = (value, size)
        if len(self.heap) > 4 * len(self.items) + 1024:  # drop stale entries
            self.heap = [(v, t, p) for v, t, p in self.heap
                         if p in self.items and self.items[p][0] == v]
            heapq.heapify(self.heap)
        return hit


class Lfu(_Heap):
    def priority(self, path: str, size: int) -> float:
        return float(self.freq[path])


class Gdsf(_Heap):
    """Greedy-Dual-Size-Frequency (Cherkasova): clock + frequency / size, for hit ratio."""

    def priority(self, path: str, size: int) -> float:
        return self.clock + self.freq[path] / size


def simulate(alpha: float, share: float, args: argparse.Namespace) -> dict[str, float]:
    trace = Trace(alpha, args.sources, args.uploads, args.hours, args.requests, args.seed)
    budget = int(trace.all_bytes() * share)
    settings = Settings().cache
    caches: dict[str, Any] = {"LRU": Lru(budget), "LFU": Lfu(budget), "GDSF": Gdsf(budget)}
    hits = dict.fromkeys([*caches, "imgwarm", "imgwarm any width"], 0)
    counted = 0
    with tempfile.TemporaryDirectory() as folder:
        index = Index(Path(folder) / "index.sqlite")
        decay = Decay(0.0, settings.hot_half_life)
        for source in trace.sources:
            index.set_source(source.key, source.variants, decay(0.0))
        held: dict[str, int] = {}
        log: list[tuple[float, str]] = []
        for hour in range(args.hours):
            now = hour * HOUR
            weights: dict[str, float] = {}
            for when, path in log:  # the last hour's requests, as warm reads them
                weights[path] = weights.get(path, 0.0) + decay(when)
            index.add_scores(weights)
            prior = index.prior(decay(now))
            for source in trace.upload(hour) if hour else []:
                index.set_source(source.key, source.variants, prior)
            held = index.choose(budget, max_width=settings.ram_max_width, page=PAGE)
            unlimited = index.choose(budget, max_width=1 << 30, page=PAGE)
            log = []
            for when, variant in trace.hour(hour):
                size = pages(variant.bytes)
                log.append((when, variant.path))
                measured = hour >= args.warmup
                for name, cache in caches.items():
                    hit = cache.request(variant.path, size)
                    hits[name] += hit and measured
                hits["imgwarm"] += (variant.path in held) and measured
                hits["imgwarm any width"] += (variant.path in unlimited) and measured
                counted += measured
        index.close(keep=False)
    return {name: value / counted for name, value in hits.items()}


def trace_mode(args: argparse.Namespace) -> None:
    """Replay a trace (bench/replay.py); with --compare, beside libCacheSim's policies and the
    hourly rate oracle (bench/baselines.py)."""
    from replay import TraceError, replay

    settings = Settings().cache
    changes = {name: value for name, value in (("hot_half_life", args.half_life),
                                                ("ram_max_width", args.ram_max_width))
               if value is not None}
    if changes:
        settings = settings.model_copy(update=changes)
    if args.ram_budget is None or args.ram_budget < PAGE:
        sys.exit(f"placement: --ram-budget BYTES is needed with --trace (at least {PAGE})")
    try:
        with tempfile.TemporaryDirectory() as folder:
            found = replay(args.trace, budget=args.ram_budget, warmup=args.warmup,
                           interval=args.interval, settings=settings, scratch=Path(folder))
    except (TraceError, OSError, EOFError) as error:  # (a gzip cut short: EOFError)
        sys.exit(f"placement: {error}")
    line = {k: round(v, 6) if isinstance(v, float) else v
            for k, v in found.as_dict().items()}
    if args.json:
        print(json.dumps(line))
    else:
        print(f"imgwarm: object hit ratio {found.object_hit_ratio:.1%}, byte hit ratio "
              f"{found.byte_hit_ratio:.1%}, {found.requests} requests counted, "
              f"{found.placements} placements, {found.planning_seconds * 1000:.0f} ms "
              "planning a run")
    if args.compare:
        compare(args, line)


def compare(args: argparse.Namespace, ours: dict[str, Any]) -> None:
    from baselines import LABELS, load, online, oracle

    requests = load(args.trace)
    rows = {name: (r.object_hit_ratio, r.byte_hit_ratio)
            for name, r in online(requests, args.ram_budget, args.warmup).items()}
    rates = args.trace.with_name(args.trace.name + ".rates.npz")
    if rates.exists():
        best = oracle(requests, rates, args.ram_budget, args.warmup)
        rows["oracle"] = (best.object_hit_ratio, best.byte_hit_ratio)
    rows["imgwarm"] = (ours["object_hit_ratio"], ours["byte_hit_ratio"])
    print("| policy | object hit ratio | byte hit ratio |\n|---|---:|---:|")
    for name, (obj, byte) in sorted(rows.items(), key=lambda r: -r[1][0]):
        print(f"| {LABELS.get(name, name)} | {obj:.1%} | {byte:.1%} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"trace": str(args.trace), "budget": args.ram_budget,
                                       "rows": rows, "imgwarm": ours}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=20_000)
    parser.add_argument("--uploads", type=int, default=200, help="new sources an hour")
    parser.add_argument("--hours", type=int, default=36)
    parser.add_argument("--warmup", type=float, default=None,
                        help="hours not counted (synthetic: 12); with --trace, seconds "
                        "(default 0)")
    parser.add_argument("--requests", type=int, default=40_000, help="requests an hour")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "placement.json")
    parser.add_argument("--trace", type=Path, help="replay this trace (bench/replay.py)")
    parser.add_argument("--ram-budget", type=int, metavar="BYTES",
                        help="with --trace: the RAM tier's budget (files in whole 4 KiB pages)")
    parser.add_argument("--interval", type=float, default=INTERVAL,
                        help=f"with --trace: seconds between placements (default {INTERVAL:g}, "
                        "the compose file's WARM_EVERY)")
    parser.add_argument("--half-life", type=float, metavar="SECONDS",
                        help="with --trace: hot_half_life (default: the setting's)")
    parser.add_argument("--ram-max-width", type=int,
                        help="with --trace: ram_max_width (default: the setting's)")
    parser.add_argument("--json", action="store_true",
                        help="with --trace: print one JSON line of the replay's figures")
    parser.add_argument("--compare", action="store_true",
                        help="with --trace: also libCacheSim's policies and the oracle")
    args = parser.parse_args()
    if args.trace is not None:
        args.warmup = args.warmup or 0.0
        trace_mode(args)
        return
    args.warmup = int(args.warmup if args.warmup is not None else 12)
    results: dict[str, Any] = {}
    print("| Zipf alpha | budget | imgwarm (thumbnails only) | imgwarm (any width) | GDSF | LFU "
          "| LRU | imgwarm - LRU |")
    print("|---|---|---|---|---|---|---|---|")
    for alpha in (0.8, 1.0):
        for share in (0.01, 0.05):
            found = simulate(alpha, share, args)
            results[f"{alpha} {share}"] = found
            print(f"| {alpha} | {share:.0%} | {found['imgwarm']:.1%} | "
                  f"{found['imgwarm any width']:.1%} | {found['GDSF']:.1%} | "
                  f"{found['LFU']:.1%} | {found['LRU']:.1%} | "
                  f"{(found['imgwarm'] - found['LRU']) * 100:+.1f} points |", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"args": vars(args) | {"output": str(args.output)},
                                       "hit_ratio": results}, indent=2))


if __name__ == "__main__":
    main()
