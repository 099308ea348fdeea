"""Finish: the budgets met (the next run need not rank again while nothing changes), what
each tier holds and RAM's hit share, counted again only when something changed (a run with
nothing new costs nothing at any size), else as the last run counted."""

from __future__ import annotations

from imgwarm.cache.run import Run


def remember_budgets(run: Run) -> None:
    """A tier ranked against its budget, with every copy placed: that budget is met. One
    stopped (a full disk) or with a copy that failed is not: the next run plans it again,
    changed or not (a failed copy would otherwise wait for the next upload)."""
    for policy in run.policies:
        if policy.name in run.planned:
            met = not policy.report.stopped and not policy.report.failed
            run.index.remember(f"{policy.name}_budget", policy.report.budget if met else None)


def count(run: Run) -> None:
    """What each tier holds, and the share of requests RAM answers, into the report."""
    for policy in run.policies:
        held = run.index.meta(f"held:{policy.name}")
        if held is None or policy.name in run.touched:
            totals = run.index.totals(policy.name, 1)
            held = [totals.files, totals.bytes]
            run.index.remember(f"held:{policy.name}", held)
        policy.report.held, policy.report.held_bytes = held
    share = run.index.meta("hit_share")
    if share is None or run.changed or run.touched:
        share = run.index.hit_share()
        run.index.remember("hit_share", share)
    in_ram, total = share
    run.report.ram_hit_share = in_ram / total if total > 0 else None
    run.commit()
