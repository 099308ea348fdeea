"""Copy what each tier is to be given, in batches: a file two tiers want is read once and
written to both; one only the tier beside the backing one wants is read from the backing tier
when it is whole there (faster than the origin), else from the origin. Each batch is marked
``placing`` in the index before and settled after; a tier found full stops, the other goes
on."""

from __future__ import annotations

from imgwarm.cache.copier import Failed, Item, Result
from imgwarm.cache.identity import identities
from imgwarm.cache.policy import TierPolicy
from imgwarm.cache.run import Run
from imgwarm.cache.steps.trust import still_ours

BATCH = 1024  # files a commit (and a syncfs of the backing tier)


def copy(run: Run) -> None:
    """Copy ``run.wanted`` (what plan chose) into the tiers."""
    wanted, backing = run.wanted, run.backing
    sizes: dict[str, int] = {}  # every path wanted, and its size (as the backing tier has it)
    for chosen in reversed(wanted.values()):
        sizes.update(chosen)
    paths = sorted(sizes)
    source, on_source = backing.name, wanted[backing.name]
    for start in range(0, len(paths), BATCH):
        run.progress("tiers", start, len(paths))
        part = paths[start:start + BATCH]
        on_backing = still_ours(run, backing.tier, run.index.sizes(
            (p for p in part if p not in on_source), placed_in=source))
        going = [(p.name, wanted[p.name]) for p in run.policies if not p.report.stopped]
        items: list[Item] = []
        for path in part:
            targets = tuple(name for name, chosen in going if path in chosen)
            if targets:
                read_first = source not in targets and path in on_backing
                items.append(Item(path, sizes[path], targets, source if read_first else None))
        if not items:
            continue
        if run.dry_run:
            for policy in run.policies:
                mine = [item.size for item in items if policy.name in item.targets]
                policy.report.copied += len(mine)
                policy.report.copied_bytes += sum(mine)
            continue
        placing(run, items)
        placed(run, items, run.copies().place(items))
    run.progress("tiers", len(paths), len(paths))


def placing(run: Run, items: list[Item]) -> None:
    """Say in the index, before copying, what each tier is being given."""
    for policy in run.policies:
        run.index.mark(policy.name, [i.path for i in items if policy.name in i.targets],
                       "placing")
        run.touched.add(policy.name)
    run.commit()


def placed(run: Run, items: list[Item], results: list[tuple[Result, ...]]) -> None:
    """Record what the copies did, once the backing tier's are on the disk."""
    for policy in run.policies:
        if policy.backing and any(policy.name in item.targets for item in items):
            policy.tier.sync()  # on the disk before the index says they are placed
    for policy in run.policies:
        _settle(run, policy, items, results)
    run.commit()


def _settle(run: Run, policy: TierPolicy, items: list[Item],
            results: list[tuple[Result, ...]]) -> None:
    """Record in the index and the report what a batch did in one tier."""
    report, name = policy.report, policy.name
    done: dict[str, int] = {}
    failed: list[str] = []
    for item, outcome in zip(items, results, strict=True):
        if name not in item.targets:
            continue
        result = outcome[item.targets.index(name)]
        if result is True:
            done[item.path] = item.size
            continue
        failed.append(item.path)
        if result is False:
            report.missing += 1
        elif isinstance(result, Failed):
            report.failed += 1
            report.errors = report.errors or result.message
        elif report.stopped is None:
            report.stopped = result.message
    run.index.mark(name, done, "placed")
    run.index.note_identities(name, identities(policy.tier, done))
    run.index.mark(name, failed, None)
    report.copied += len(done)
    report.copied_bytes += sum(done.values())
