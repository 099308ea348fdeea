"""Rank: which variants deserve the RAM tier, as pure functions (``warm`` and the placement
simulation in bench/ call these very ones).

- **Score**: every successful request adds ``2 ** ((t - epoch) / half_life)``: a request a
  half-life old weighs half a new one. Weights are kept relative to a fixed epoch, so a score
  never needs rewriting as time passes (the order of scores does not change by waiting); the
  epoch moves forward, rescaling every score once, when weights grow too large for a float.
- **Prior**: a source that has just been uploaded has no requests yet, though on a
  classifieds site a new listing is often the hottest thing there is. Its variants start with
  the score that a variant at the ``PRIOR_PERCENTILE`` of the current scores has (a busy
  variant, not the busiest), as if earned at the moment of upload: it then cools like any
  other request, and real traffic takes over within a half-life or two.
- **Estimate**: what a variant is worth is the requests it can expect, not the ones it had.
  A score counts a variant's requests over about a half-life, so a variant younger than that
  has had less time to earn one: its score is divided by the share of a half-life's
  exposure it has had, ``1 - 2 ** (-age / half_life)`` (with an age of at least AGE_FLOOR,
  and none past YOUNG_FOR half-lives, when it is within 7%).
- **Shares**: a source's variants share its popularity (a listing's thumbnail and its large
  view are asked for in the proportions the site's pages ask for them), and one variant's
  few requests say little alone. So the estimates of a source's variants (each its corrected
  score plus its prior) are pooled and shared out again by each variant's own score plus
  SHARE_PRIOR requests now spread over the source by the site's shares: each variant's
  ``weight``: how many times its source's mean score the variants of its format and width
  class (``width_class``, half an octave) have, measured on the sources each run re-ranks
  and kept decaying with the half-life (``measure_shares``, ``class_weights``). So
  ``total * (score + k * weight) / (source score + k * source weights)``: a listing with
  little traffic is shared the way the site asks for widths, not by its last few requests;
  one with much traffic of its own keeps its own proportions. Measured on bursty-upload
  traces (bench/placement.py --trace), each step moves the RAM tier toward the placement
  by true popularity: docs/benchmarks.md.
- **Density**: value per page, ``estimate / pages``, a page being the 4 KiB a file takes at
  least on a tmpfs or a disk. The RAM tier is filled with the densest variants first
  (Squid's GDSF and AdaptSize weigh size the same way): many small popular thumbnails answer
  more requests from the same memory than a few large ones.
- **Choice**: greedy by density within the budget; a variant that does not fit is passed
  over and smaller ones among the next FILL_LOOKAHEAD may still go in (the gap left is then
  less than one file). The chosen are thus a prefix of the ranking plus a few past its end
  (the cut); ``Index.plan`` finds the same choice from where the last run's cut was, and
  compares it with what a tier holds inside SQLite, so a run reads the rows that moved.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

PRIOR_PERCENTILE = 0.9
PAGE = 4096
FILL_LOOKAHEAD = 1024  # candidates looked at, past the first that does not fit
AGE_FLOOR = 600.0  # seconds: less exposure than this says no more than the prior does
YOUNG_FOR = 4  # half-lives: past this, a score has had 94% of its exposure and stands as is
SHARE_PRIOR = 8.0  # requests now, spread over a source's variants by the site's shares
ANY_WIDTH = 1 << 30  # a tier that takes every width (NVMe: policy.py)
REBASE_AFTER = 256.0  # half-lives past the epoch before scores are rescaled (2**256 < 1e78)


@dataclass(frozen=True)
class Decay:
    """Weights of requests at a time, relative to ``epoch``."""

    epoch: float
    half_life: float

    def __call__(self, t: float) -> float:
        """The weight at ``t``; at most that of REBASE_AFTER half-lives (a time far ahead,
        from a clock gone wrong or a forged log line, must not overflow a float)."""
        return float(2.0 ** min((t - self.epoch) / self.half_life, 2 * REBASE_AFTER))

    def due_for_rebase(self, now: float) -> bool:
        return (now - self.epoch) / self.half_life > REBASE_AFTER


def estimate(score: float, born: float | None, now: float, half_life: float) -> float:
    """A score corrected for the exposure its variant has had (see the module's docstring);
    ``born`` None: a variant from before ages were kept, taken as old."""
    if born is None:
        return score
    age = max(now - born, AGE_FLOOR)
    if age >= YOUNG_FOR * half_life:
        return score
    return score / (1.0 - float(2.0 ** (-age / half_life)))


def width_class(width: int) -> int:
    """Widths within half an octave of each other share a class (a ladder by bytes gives
    each source its own widths; the site's shares are by about how wide)."""
    return math.floor(2 * math.log2(max(1, width)) + 0.5)  # (halves up, as SQLite rounds)


Shares = dict[tuple[str, int], tuple[float, float]]  # (format, class) -> (score, sources' mean)


def measure_shares(kept: Shares, faded: float, sample: Iterable[tuple[str, int, float, float]],
                   unit: float) -> Shares:
    """The site's shares: for each (format, width class), the total score of its variants and
    the total of their sources' mean scores, over the sources of two variants or more that a
    run re-ranked (shares are among siblings: a source of one would only dilute them).
    ``kept`` (in requests now) faded by ``faded`` since it was kept, plus a run's ``sample``
    in scores, divided by ``unit`` (the weight of a request now): a measure that follows the
    site as scores do."""
    found = {key: (score * faded, mean * faded) for key, (score, mean) in kept.items()}
    for fmt, cls, score, mean in sample:
        before = found.get((fmt, cls), (0.0, 0.0))
        found[(fmt, cls)] = (before[0] + score / unit, before[1] + mean / unit)
    return found


def class_weights(shares: Shares) -> dict[tuple[str, int], float]:
    """(format, width class) -> how many times its source's mean score a variant of that
    class has; none while nothing has traffic (every weight is then 1: a source's priors
    are shared evenly)."""
    return {key: score / mean for key, (score, mean) in shares.items() if mean > 0}


def pages(size: int, page: int = PAGE) -> int:
    """The bytes a file of ``size`` takes in whole pages."""
    return -(-max(1, size) // page) * page


def density(score: float, prior: float, size: int) -> float:
    """Value per page taken."""
    return (score + prior) / pages(size)


class Candidate(NamedTuple):
    """A variant the tier could take (a tuple: half a million are made a run)."""

    path: str
    size: int
    density: float
    pinned: bool = False  # named in a hot list: first, whatever its density


def choose(candidates: Iterable[Candidate], budget: int, page: int = 1) -> Iterator[Candidate]:
    """Candidates, best first (pinned, then densest), taken while they fit ``budget``, each
    counted in whole pages of ``page`` bytes. ``candidates`` must come in that order (warm's
    index gives them so; plain tuples in Candidate's order will do). Past the first that does
    not fit, smaller ones may still go in, looked for among the next FILL_LOOKAHEAD only: the
    gap left is less than one file, and a run reads the rows it takes, not every row there
    is."""
    left, passed = budget, -1
    for candidate in candidates:  # (unpacked, not read by name: a run takes 100,000s)
        _, size, value, pinned = candidate
        if value <= 0 and not pinned:
            return  # nothing with value is left: the rest of the tier stays free
        size = -(-max(1, size) // page) * page
        if size <= left:
            left -= size
            yield candidate
            if left < page:
                return
        elif passed < 0:
            passed = 0
        if passed >= 0:
            passed += 1
            if passed > FILL_LOOKAHEAD:
                return
