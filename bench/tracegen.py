"""A request trace shaped like a classified-ads image CDN, for bench/placement.py --trace.

The shape (issue 29), every number an option:

- LISTINGS listings on the site at the start, and UPLOADS new ones an hour, each at a random
  time; each listing has four variants (320, 640, 1280 and 1920 px), their sizes lognormal
  around medians of 14, 40, 120 and 220 KB, requested 55, 25, 15 and 5% of the time;
- a listing's requests come at a rate that is its Zipf share (alpha, by a random rank over
  every listing) plus, from its upload, a burst lognormal in size that halves every
  HALF_HOURS (6 h): the bursts are scaled so that FRESH (48%) of the listings' requests after
  the warm-up go to listings under a day old. The listings present at the start include a
  day's uploads made before it, mid-burst, so the mix is the same from the first hour;
- each listing belongs to one of three audiences, whose traffic peaks at different hours
  (a day's cosine, +-60%);
- ONE_HIT (5%) of the requests go to variants asked for once in the whole trace (old
  listings' files: present from the start).

Requests are drawn as a Poisson process a slice of SLICE seconds at a time (10 min). The
trace is written as gzipped TSV in time order, one event a line:

    U <TAB> t <TAB> path <TAB> bytes <TAB> width <TAB> listing
                                                      a variant available from t (s)
    R <TAB> t <TAB> path                              a request answered 200 at t

and, beside it (``FILE.rates.npz``), each listing's true rate parameters, from which
bench/placement.py computes the hourly rate oracle: the placement by each variant's true
expected hits in the hour, the best any placement made from logs can do.

Usage:
    .venv/bin/python bench/tracegen.py trace.tsv.gz                     # 48 h, ~3.8 M requests
    .venv/bin/python bench/tracegen.py small.tsv.gz --hours 6 --listings 4000 --uploads 80 \\
        --requests 8000
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy

HOUR = 3600.0
DAY = 24 * HOUR
WIDTHS = (320, 640, 1280, 1920)
MEDIAN_KB = (14, 40, 120, 220)
WIDTH_SHARE = (0.55, 0.25, 0.15, 0.05)
SIZE_SIGMA = 0.35  # of the lognormal sizes around each median
BURST_SIGMA = 1.0  # of the lognormal burst sizes
PEAKS = (10.0, 15.0, 21.0)  # the audiences' hours of peak traffic
SWING = 0.6  # a day's swing of an audience's traffic, +-


@dataclass(frozen=True)
class Shape:
    alpha: float = 0.8
    hours: float = 48.0
    listings: int = 40_000
    uploads: int = 800  # new listings an hour
    requests: int = 79_000  # an hour, on average
    fresh: float = 0.48  # share of listing requests to listings under a day old
    one_hit: float = 0.05
    half_hours: float = 6.0
    warmup_hours: float = 12.0
    slice_seconds: float = 600.0
    seed: int = 1


@dataclass
class Listings:
    """Every listing's true rate parameters (arrays by listing number)."""

    born: numpy.ndarray  # seconds from the start (negative: before it)
    base: numpy.ndarray  # requests a second from its Zipf share, at an audience's mean
    burst: numpy.ndarray  # requests a second at upload, halving every half-life
    audience: numpy.ndarray
    sizes: numpy.ndarray  # listings x 4 variant bytes
    half_life: float

    def rates(self, t: float, *, base: bool = True, burst: bool = True) -> numpy.ndarray:
        """Each listing's request rate at ``t`` (0 before its upload): its Zipf share, its
        burst, or both, through its audience's hour."""
        age = t - self.born
        day = numpy.cos(2 * math.pi * (t / HOUR - numpy.take(PEAKS, self.audience)) / 24)
        found = numpy.zeros_like(self.base)
        if base:
            found = found + self.base
        if burst:
            found = found + self.burst * numpy.exp2(-numpy.maximum(age, 0) / self.half_life)
        return numpy.where(age >= 0, found * (1 + SWING * day), 0.0)

    def expected(self, start: float, end: float, steps: int = 12, **parts: bool) -> numpy.ndarray:
        """Each listing's expected requests in [start, end) (the rate integrated)."""
        edges = numpy.linspace(start, end, steps + 1)
        mids = (edges[:-1] + edges[1:]) / 2
        return sum(self.rates(float(m), **parts) for m in mids) * (end - start) / steps

    def save(self, path: Path) -> None:
        numpy.savez_compressed(path, born=self.born, base=self.base, burst=self.burst,
                               audience=self.audience, sizes=self.sizes,
                               half_life=self.half_life)

    @classmethod
    def load(cls, path: Path) -> Listings:
        found = numpy.load(path)
        return cls(found["born"], found["base"], found["burst"], found["audience"],
                   found["sizes"], float(found["half_life"]))


def path_of(listing: int, width_index: int, kind: str = "l") -> str:
    """A variant-shaped path (sharded by its name's hash, as the layout does)."""
    name = f"{kind}{listing}-{WIDTHS[width_index]}"
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{digest[:2]}/{digest[2:4]}/{name}.{digest}.webp"


def listings(shape: Shape, rnd: numpy.random.Generator) -> Listings:
    """The listings and their rates: the Zipf shares and the bursts scaled to ``fresh``."""
    before = int(shape.uploads * 24)  # a day of uploads before the start, mid-burst
    old = max(shape.listings - before, 0)
    new = round(shape.uploads * shape.hours)
    born = numpy.concatenate([
        numpy.full(old, -10 * DAY),
        rnd.uniform(-DAY, 0, shape.listings - old),
        rnd.uniform(0, shape.hours * HOUR, new)])
    count = born.size
    ranks = rnd.permutation(count) + 1
    base = ranks ** -shape.alpha
    burst = rnd.lognormal(0.0, BURST_SIGMA, count)
    sizes = numpy.stack([rnd.lognormal(math.log(kb * 1000), SIZE_SIGMA, count)
                         for kb in MEDIAN_KB], axis=1).astype(numpy.int64)
    found = Listings(born, base, burst, rnd.integers(0, 3, count), sizes,
                     shape.half_hours * HOUR)
    _scale(found, shape)
    return found


def _scale(found: Listings, shape: Shape) -> None:
    """Bursts scaled so that ``fresh`` of the expected requests after the warm-up go to
    listings under a day old; then every rate so that an hour has ``requests`` requests on
    average, ``one_hit`` of them one-hit."""
    start, end = shape.warmup_hours * HOUR, shape.hours * HOUR
    edges = numpy.linspace(start, end, int((end - start) // 1800) + 1)
    base_young = base_old = burst_young = 0.0
    for a, b in itertools.pairwise(edges):
        middle = (a + b) / 2
        young = (found.born <= middle) & (middle - found.born < DAY)
        base = found.expected(a, b, 2, burst=False)
        burst = found.expected(a, b, 2, base=False)
        base_young += float(base[young].sum())
        base_old += float(base[~young].sum())
        burst_young += float(burst[young].sum())  # (a day old, a burst is 1/16 of its start)
    # fresh = (base_young + k burst_young) / (base_young + base_old + k burst_young)
    k = (shape.fresh * (base_young + base_old) - base_young) / ((1 - shape.fresh) * burst_young)
    if k <= 0:
        sys.exit(f"tracegen: the Zipf shares alone send over {shape.fresh:.0%} of requests "
                 "to young listings: lower --uploads or raise --fresh")
    found.burst = found.burst * k
    total = float(found.expected(start, end, 48).sum()) / ((end - start) / HOUR)
    factor = shape.requests * (1 - shape.one_hit) / total
    found.base = found.base * factor
    found.burst = found.burst * factor


def generate(shape: Shape, out: Path) -> dict[str, float]:
    """Write the trace and its rates; returns what it holds."""
    rnd = numpy.random.default_rng(shape.seed)
    found = listings(shape, rnd)
    found.save(out.with_name(out.name + ".rates.npz"))
    share = numpy.array(WIDTH_SHARE)
    count = found.born.size
    slices = math.ceil(shape.hours * HOUR / shape.slice_seconds)
    one_hit_total = round(shape.requests * shape.hours * shape.one_hit)
    one_hit_times = numpy.sort(rnd.uniform(0, shape.hours * HOUR, one_hit_total))
    one_hit_widths = rnd.choice(4, one_hit_total, p=share)
    one_hit_sizes = numpy.array([rnd.lognormal(math.log(MEDIAN_KB[w] * 1000), SIZE_SIGMA)
                                 for w in one_hit_widths]).astype(numpy.int64)
    requests = young = counted = 0
    with gzip.open(out, "wt", compresslevel=3, newline="\n") as trace:
        for number in range(count):  # the variants there at the start
            if found.born[number] <= 0:
                for w in range(4):
                    trace.write(f"U\t0\t{path_of(number, w)}\t{found.sizes[number, w]}\t"
                                f"{WIDTHS[w]}\tl{number}\n")
        for i in range(one_hit_total):
            trace.write(f"U\t0\t{path_of(i, one_hit_widths[i], 'o')}\t{one_hit_sizes[i]}\t"
                        f"{WIDTHS[one_hit_widths[i]]}\n")
        uploads = sorted((float(found.born[n]), n) for n in range(count) if found.born[n] > 0)
        next_upload, next_one = 0, 0
        for s in range(slices):
            a, b = s * shape.slice_seconds, min((s + 1) * shape.slice_seconds, shape.hours * HOUR)
            counts = rnd.poisson(found.expected(a, b, 2))
            who = numpy.repeat(numpy.arange(count), counts)
            when = rnd.uniform(a, b, who.size)
            # (a request before its listing's upload, within the slice, moves after it)
            when = numpy.maximum(when, numpy.minimum(found.born[who] + 1e-3, b - 1e-3))
            width = rnd.choice(4, who.size, p=share)
            order = numpy.argsort(when, kind="stable")
            events: list[tuple[float, str]] = []
            while next_upload < len(uploads) and uploads[next_upload][0] < b:
                t, n = uploads[next_upload]
                events.extend((t, f"U\t{t:.3f}\t{path_of(n, w)}\t{found.sizes[n, w]}\t"
                                  f"{WIDTHS[w]}\tl{n}\n") for w in range(4))
                next_upload += 1
            events.extend((float(when[i]),
                           f"R\t{when[i]:.3f}\t{path_of(int(who[i]), int(width[i]))}\n")
                          for i in order)
            while next_one < one_hit_total and one_hit_times[next_one] < b:
                t, w = float(one_hit_times[next_one]), int(one_hit_widths[next_one])
                events.append((t, f"R\t{t:.3f}\t{path_of(next_one, w, 'o')}\n"))
                next_one += 1
            events.sort(key=lambda e: e[0])  # (stable: a U line before requests at its time)
            trace.writelines(line for _, line in events)
            requests += who.size
            if a >= shape.warmup_hours * HOUR:
                young += int((when - found.born[who] < DAY).sum())
                counted += who.size
    return {"listings": count, "variants": 4 * count + one_hit_total,
            "requests": requests + one_hit_total, "one_hit": one_hit_total,
            "fresh_share": round(young / max(counted, 1), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="the trace (.tsv.gz)")
    defaults = Shape()
    for name, value in vars(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args()
    shape = Shape(**{name: getattr(args, name) for name in vars(defaults)})
    found = generate(shape, args.output)
    print(" ".join(f"{k}={v}" for k, v in found.items()))


if __name__ == "__main__":
    main()
