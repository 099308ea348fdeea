"""Tier policies: how warm fills each tier, written down once. Every step treats the tiers
alike and asks a tier's policy where they differ: its budget, the widest variant it takes,
whether sizes count in whole pages, and whether it is the backing tier.

    RAM   a tmpfs: the densest thumbnails (up to ``ram_max_width``) within ``ram_budget``,
          counted in whole pages (a tmpfs gives each file whole pages, so a budget near the
          tmpfs's size is never overrun).
    NVMe  a disk, the backing tier: every referenced variant; with ``nvme_budget``, the
          densest within it, whatever their width.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from imgwarm.cache.rank import ANY_WIDTH
from imgwarm.cache.report import TierReport, WarmReport
from imgwarm.cache.tiers import Tier, Tiers
from imgwarm.config import Settings
from imgwarm.config.units import Budget


@dataclass(frozen=True)
class Role:
    """What sets a tier apart before any setting: its name (its column in the index, its
    settings' prefix, its name in reports) and how it is filled."""

    name: str
    paged: bool  # sizes counted in whole blocks of its file system
    # the backing tier: on a disk (synced before the index says its copies are placed),
    # planned first; a file another tier wants is read from it when it is whole there; with
    # no budget it takes every variant, copied while the records are read
    backing: bool
    width_bounded: bool  # takes variants up to a width (the index keeps them by width)


RAM = Role("ram", paged=True, backing=False, width_bounded=True)
NVME = Role("nvme", paged=False, backing=True, width_bounded=False)
ROLES = (RAM, NVME)  # in the order nginx tries them
TIERS = tuple(role.name for role in ROLES)
BACKING = next(role.name for role in ROLES if role.backing)


def role_of(tier: str) -> Role:
    """The role of the tier named ``tier``; ValueError for a name that is none."""
    for role in ROLES:
        if role.name == tier:
            return role
    raise ValueError(f"no tier {tier!r}")


@dataclass(frozen=True)
class TierPolicy:
    tier: Tier
    report: TierReport  # this tier's part of the run's report
    size: Budget | None  # its budget; None: no budget, every referenced variant
    max_width: int  # the widest variant it takes (a pinned one goes in whatever its width)
    role: Role
    name: str = field(init=False)  # the tier's

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.role.name)

    @property
    def paged(self) -> bool:
        return self.role.paged

    @property
    def backing(self) -> bool:
        return self.role.backing

    def page(self) -> int:
        """The unit sizes count in: the tier's block, or a byte."""
        return self.tier.block_size() if self.paged else 1

    def budget(self, held: int) -> int | None:
        """The bytes the tier may hold, ``held`` being what it holds now (counted as this
        policy counts); never more than its file system has. None: no budget."""
        if self.size is None:
            return None
        total, free = self.tier.space()
        return min(self.size.of(total), free + held)


def policies(settings: Settings, tiers: Tiers, report: WarmReport) -> tuple[TierPolicy, ...]:
    """The policy of each tier, in the order nginx tries them (RAM, then NVMe)."""
    cache = settings.cache
    return (TierPolicy(tiers.ram, report.ram, cache.ram_budget, cache.ram_max_width, RAM),
            TierPolicy(tiers.nvme, report.nvme, cache.nvme_budget, ANY_WIDTH, NVME))
