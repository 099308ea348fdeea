"""What leaves the tiers before anything is copied: a deleted source's variants (at once,
whatever ``drop_gone`` says), variants no source references (with ``drop_gone``), and
``evict`` itself, which plan and gc's part in the tiers (cache/collect.py) use too."""

from __future__ import annotations

from imgwarm.cache.index import Index
from imgwarm.cache.policy import TierPolicy
from imgwarm.cache.run import Run
from imgwarm.cache.steps.copy import BATCH
from imgwarm.cache.steps.trust import ours
from imgwarm.cache.tiers import Tier


def evict(index: Index, tier: Tier, paths: dict[str, int], *, dry_run: bool) -> None:
    """Remove files from a tier, each batch marked ``evicting`` in the index before and
    settled after (a run killed between is finished by the next: check.recover)."""
    items = sorted(paths)
    for start in range(0, len(items), BATCH):
        part = items[start:start + BATCH]
        index.mark(tier.name, part, "evicting")
        if not dry_run:
            index.commit()
            for path in part:
                tier.delete(path)
        index.mark(tier.name, part, None)
        if not dry_run:
            index.commit()


def evict_from(run: Run, policy: TierPolicy, paths: dict[str, int]) -> None:
    """``evict`` in a run: counted in the tier's report."""
    if paths:
        run.touched.add(policy.name)
    policy.report.evicted += len(paths)
    policy.report.evicted_bytes += sum(paths.values())
    evict(run.index, policy.tier, paths, dry_run=run.dry_run)


def take_down(run: Run) -> None:
    """A deleted source's variants leave every tier now, whatever ``drop_gone`` says,
    unless another source names them; a file the index does not know is removed too."""
    if not run.taken_down:
        return
    known = run.index.states(run.taken_down)
    gone = sorted(p for p in run.taken_down if (p not in known or known[p].refs == 0)
                  and run.stores.layout.holds(p))  # (a hand-made tombstone's: no path)
    for policy in run.policies:
        tier = policy.tier
        held = {p: known[p].bytes for p in gone if p in known and known[p].state(tier.name)}
        evict_from(run, policy, held)
        unheld = [p for p in gone if p not in held]  # not in the index: ours, lost?
        for path in ours(run, tier, unheld):
            size = tier.size_of(path)
            if size is not None:
                if not run.dry_run:
                    tier.delete(path)
                policy.report.evicted += 1
                policy.report.evicted_bytes += size
    if not run.dry_run:
        run.index.forget_unreferenced()
    run.commit()


def drop_unreferenced(run: Run) -> None:
    """With ``drop_gone``: variants no source references leave every tier."""
    if not run.cache.drop_gone:
        return
    gone = run.index.unreferenced()
    for policy in run.policies:
        evict_from(run, policy, {row.path: row.bytes for row in gone
                                 if row.state(policy.name)})
    if not run.dry_run:
        run.index.forget_unreferenced()
    run.commit()
