"""The state of one warm run, explicit: what it was given (settings, tiers and their
policies, the index, the stores, the clock, the flags) and what its steps hand on to the next
(what changed, what each tier is to be given). The steps (cache/steps/) are functions of it;
warm.py writes down their order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from imgwarm.cache.copier import Copier, Item, Result
from imgwarm.cache.index import Index
from imgwarm.cache.logformat import LogFormat
from imgwarm.cache.policy import TierPolicy
from imgwarm.cache.rank import Decay
from imgwarm.cache.report import WarmReport
from imgwarm.cache.tiers import Tiers
from imgwarm.config import Settings
from imgwarm.config.cache import CacheSettings
from imgwarm.reporting import Progress
from imgwarm.store import Stores

Waiting = Callable[[], list[tuple[Result, ...]]]  # waits for copies started, gives results


@dataclass
class Run:
    # --- given ----------------------------------------------------------------------------
    settings: Settings
    tiers: Tiers
    policies: tuple[TierPolicy, ...]  # one a tier, in the tiers' order
    index: Index
    stores: Stores
    report: WarmReport
    now: float
    decay: Decay  # request weights, relative to the index's epoch
    parser: LogFormat
    access_logs: list[str]  # patterns
    hot_list: Path | None
    full: bool
    dry_run: bool
    progress: Progress
    lock: int | None = None  # the lock's descriptor: the copier's processes drop it
    # --- found by the steps, for the next -------------------------------------------------
    changed: bool = False  # anything that can change what the tiers should hold
    touched: set[str] = field(default_factory=set)  # tiers whose files changed in this run
    taken_down: set[str] = field(default_factory=set)  # variants of sources deleted since
    planned: set[str] = field(default_factory=set)  # tiers ranked against their budget
    wanted: dict[str, dict[str, int]] = field(default_factory=dict)  # tier -> path -> bytes
    uncommitted: set[str] = field(default_factory=set)  # a dry run's new variants (never in
    # the index file: it commits nothing)
    # --- copies started while the records are read (steps/ahead.py) -------------------------
    ahead: list[tuple[list[Item], Waiting]] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)  # copied ahead to the backing tier, failed
    room: dict[str, int] = field(default_factory=dict)  # bytes an empty tier may take ahead
    copier: Copier | None = None  # started on the first copy: a run with none forks nothing
    backing: TierPolicy = field(init=False)  # the tier the others read from (NVMe)

    def __post_init__(self) -> None:
        self.backing = next(p for p in self.policies if p.backing)

    @property
    def cache(self) -> CacheSettings:
        return self.settings.cache

    def commit(self) -> None:
        if not self.dry_run:
            self.index.commit()

    def copies(self) -> Copier:
        """The copier, started on first use."""
        if self.copier is None:
            self.copier = Copier(list(self.tiers), self.stores.origin,
                                 local=self.settings.store.origin == "local",
                                 drop=() if self.lock is None else (self.lock,))
        return self.copier


def start_clock(index: Index, half_life: float, now: float) -> Decay:
    """The decay of this run: the index's epoch, moved to ``now`` (every score rescaled once)
    when the half-life changed or weights grew too large for a float."""
    epoch = index.meta("epoch")
    if epoch is None:
        epoch = now
    else:
        old = Decay(epoch, index.meta("half_life", half_life))
        if old.half_life != half_life or old.due_for_rebase(now):
            # scores kept at their value now, in the new terms (epoch - now: a factor that
            # goes to 0 after a long pause, never an overflow)
            index.rescale(float(2.0 ** max((old.epoch - now) / old.half_life, -1000.0)))
            epoch = now
    index.remember("epoch", epoch)
    index.remember("half_life", half_life)
    return Decay(epoch, half_life)
