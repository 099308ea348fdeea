"""Check the tiers before anything else: a tier found empty (a reboot, a new disk) is taken
as empty and filled again; what a killed run left unsettled is finished; with ``--full``, the
tiers as they are against the index."""

from __future__ import annotations

from imgwarm.cache.identity import identities as identities_of
from imgwarm.cache.run import Run
from imgwarm.cache.steps.trust import ours, whole
from imgwarm.cache.tiers import IDENTITY
from imgwarm.racepoints import reached


def identities(run: Run) -> None:
    """A tier whose identity is missing or not the one the index knows holds nothing: the
    index forgets it, and it is given a new identity."""
    for policy in run.policies:
        tier = policy.tier
        found, known = tier.identity(), run.index.meta(f"tier:{tier.name}")
        if found is not None and found == known:
            continue
        run.index.forget_tier(tier.name)  # empty (a reboot) or not the one we filled
        policy.report.reset = known is not None
        run.changed = True
        run.touched.add(tier.name)
        if not run.dry_run:
            run.index.remember(f"tier:{tier.name}", tier.new_identity())


def recover(run: Run) -> None:
    """Settle what a killed run left: placements checked, evictions done."""
    for policy in run.policies:
        tier = policy.tier
        for pending in run.index.unsettled(tier.name):
            run.touched.add(tier.name)
            run.changed = True  # what a tier holds moved: plan again
            there = whole(tier, pending.path, pending.bytes)  # written by that run? its hash
            if pending.state == "evicting" or not there:
                if not run.dry_run:
                    tier.delete(pending.path)
                run.index.mark(tier.name, [pending.path], None)
            else:  # whole: the copy finished, only its record did not
                run.index.mark(tier.name, [pending.path], "placed")
                run.index.note_identities(tier.name, identities_of(tier, [pending.path]))
    run.commit()


def reconcile(run: Run) -> None:
    """--full: the tiers as they are, against the index. A file the index does not hold
    goes only when this index recorded writing that very file there (a copy it lost
    track of); any other (a dot file, another program's, a second state folder's copy
    on a shared root) is left and counted as foreign (docs/architecture.md, I3). A file the index
    holds that is missing or damaged (size, or hash against the name) is copied again."""
    if not run.full:
        return
    run.index.recount()  # (a whole pass: the tallies counted afresh, whatever edited rows)
    for policy in run.policies:
        tier, report = policy.tier, policy.report
        held = run.index.held(tier.name)
        listed = [str(key) for key in tier.files() if str(key) != IDENTITY]
        reached("warm.listed")
        strays = [name for name in listed if name not in held]
        mine = ours(run, tier, strays)
        for name in strays:
            if name not in mine:
                report.foreign += 1
                continue
            report.repaired += 1
            if not run.dry_run:
                tier.delete(name)
        for name in (n for n in listed if n in held):
            if not whole(tier, name, held.pop(name)):
                report.repaired += 1
                run.index.mark(tier.name, [name], None)
                if not run.dry_run:
                    tier.delete(name)
        report.repaired += len(held)  # in the index, not in the tier: placed again
        run.index.mark(tier.name, held, None)
        run.changed = True
        run.touched.add(tier.name)
    run.commit()
