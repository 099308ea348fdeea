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
- **Density**: value per page, ``(score + prior) / pages``, a page being the 4 KiB a file
  takes at least on a tmpfs or a disk. The RAM tier is filled with the densest variants
  first (Squid's GDSF and AdaptSize weigh size the same way): many small popular thumbnails
  answer more requests from the same memory than a few large ones.
- **Choice**: greedy by density within the budget; a variant that does not fit is passed
  over and smaller ones further down may still go in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

PRIOR_PERCENTILE = 0.9
PAGE = 4096
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


def pages(size: int, page: int = PAGE) -> int:
    """The bytes a file of ``size`` takes in whole pages."""
    return -(-max(1, size) // page) * page


def density(score: float, prior: float, size: int) -> float:
    """Value per page taken."""
    return (score + prior) / pages(size)


@dataclass(frozen=True)
class Candidate:
    path: str
    size: int
    density: float
    pinned: bool = False  # named in a hot list: first, whatever its density


def choose(candidates: Iterable[Candidate], budget: int) -> Iterator[Candidate]:
    """Candidates, best first (pinned, then densest), taken while they fit ``budget``.
    ``candidates`` must come in that order (warm's index gives them so)."""
    left = budget
    for candidate in candidates:
        if candidate.density <= 0 and not candidate.pinned:
            return  # nothing with value is left: the rest of the tier stays free
        if candidate.size <= left:
            left -= candidate.size
            yield candidate
        if left <= 0:
            return
