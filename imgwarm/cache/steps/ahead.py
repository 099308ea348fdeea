"""Copies made while the records are read: when the backing tier (NVMe) takes every variant
(no budget), each batch of records read starts copying its variants there, and thumbnails to
an empty tier beside it (RAM) while it has room; the copies run while the next records are
read. The ranking after the listing corrects what RAM took (evicting what it does not choose);
where RAM's budget holds every thumbnail it has nothing to correct."""

from __future__ import annotations

from imgwarm.cache.copier import Item
from imgwarm.cache.rank import pages
from imgwarm.cache.run import Run
from imgwarm.cache.steps.copy import placed, placing

AHEAD = 1  # batches copied ahead while the next is read (the copier always has one queued)


def enabled(run: Run) -> bool:
    backing = run.backing
    return not run.dry_run and backing.size is None and not backing.report.stopped


def prepare(run: Run) -> None:
    """Before the listing: the room of each empty tier beside the backing one (read once,
    written twice), and the copier forked before the listing starts its reading threads."""
    if not run.dry_run:
        for policy in run.policies:
            if not policy.backing and run.index.totals(policy.name, 1).files == 0:
                room = policy.budget(0)
                if room is not None:
                    run.room[policy.name] = room
    if enabled(run):
        run.copies()


def copy(run: Run, entries: list[tuple[str, int]]) -> None:
    """Start copying the variants of records just read (path, width)."""
    if not entries or not enabled(run):
        return
    backing = run.backing
    widths = dict(entries)
    placed_there = run.index.sizes(widths, placed_in=backing.name)
    beside = [(p, p.page()) for p in run.policies if p.name in run.room]
    items: list[Item] = []
    for path, size in run.index.sizes(widths).items():
        targets: tuple[str, ...] = () if path in placed_there else (backing.name,)
        for policy, page in beside:
            taken = pages(size, page)
            if taken <= run.room[policy.name] and widths[path] <= policy.max_width and \
                    not policy.report.stopped:
                run.room[policy.name] -= taken
                targets += (policy.name,)
        if targets:
            items.append(Item(path, size, targets))
    if not items:
        return
    placing(run, items)
    run.ahead.append((items, run.copies().start(items)))
    settle(run, keep=AHEAD)


def settle(run: Run, keep: int = 0) -> None:
    """Wait for the copies started ahead but the last ``keep`` batches, and record them."""
    if len(run.ahead) <= keep:
        return
    done = [(items, wait()) for items, wait in run.ahead[:len(run.ahead) - keep]]
    del run.ahead[:len(done)]
    items = [i for batch, _ in done for i in batch]
    results = [r for _, found in done for r in found]
    placed(run, items, results)
    # what the backing tier did not take is not tried again in this run (what it took is
    # placed, which the plan does not ask for: so ``tried`` holds the failures only)
    backing = run.backing.name
    run.tried.update(item.path for item, result in zip(items, results, strict=True)
                     if backing in item.targets and result[item.targets.index(backing)]
                     is not True)
