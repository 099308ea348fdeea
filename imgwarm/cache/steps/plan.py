"""Plan: what each tier should hold, by its policy (cache/policy.py), one rule for every tier.
A tier with no budget takes every referenced variant it lacks. A tier with one takes the
pinned, then the densest variants up to its widest, within the budget (counted as the policy
counts: in whole pages on a tmpfs); what it holds and did not choose is evicted first. A tier
is ranked again only when something that ranks or bounds it changed."""

from __future__ import annotations

from imgwarm.cache.index import Index
from imgwarm.cache.policy import TierPolicy
from imgwarm.cache.run import Run
from imgwarm.cache.steps.evict import evict_from


def plan(run: Run) -> None:
    """``run.wanted``: what to copy to each tier; the backing tier planned first."""
    for policy in sorted(run.policies, key=lambda p: not p.backing):
        run.wanted[policy.name] = plan_tier(run, policy)


def plan_tier(run: Run, policy: TierPolicy) -> dict[str, int]:
    """What to copy to one tier (path -> bytes), its evictions done."""
    if policy.size is None:  # (what was copied ahead and failed: not again)
        return {p: s for p, s in run.index.missing(policy.name) if p not in run.tried}
    page = policy.page()
    totals = run.index.totals(policy.name, page)
    budget = policy.budget(totals.paged if policy.paged else totals.bytes)
    policy.report.budget = budget
    if budget is None or (not run.changed and still_met(run.index, policy.name, budget)):
        return {}  # nothing that ranks or bounds the tier changed: it stays as it is
    run.planned.add(policy.name)
    place, evict = run.index.plan(policy.name, budget, max_width=policy.max_width, page=page)
    evict_from(run, policy, evict)
    return place


def still_met(index: Index, tier: str, budget: int) -> bool:
    """Would ranking again against ``budget`` choose what the tier was last given (the ranking
    unchanged)? Yes for the budget it was planned and met at; and for one that still holds
    all it chose, where it chose every candidate (no cut: more room changes nothing) or where
    the budget shrank (a greedy fill takes the same rows in the same order with less room
    left). A tier's budget follows its file system's free space, which others move (a shared
    /dev/shm): a quiet run must not rank every candidate again for that."""
    met = index.meta(f"{tier}_budget")
    if met is None:
        return False
    if budget == met:
        return True
    chose, every = index.last_plan(tier)
    return chose is not None and chose <= budget and (every or budget <= met)
