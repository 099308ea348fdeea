"""Warm: fill a cache server's tiers from the origin, in time with what changed.

One run is a list of steps over one state (cache/run.py), in this order:

1. take the lock (one run at a time on these tiers), open the index;
2. check each tier's identity (a tier found empty, after a reboot, is refilled) and finish
   what a killed run left unsettled;
3. ``--full`` first reconciles: files in the tiers the index does not hold go if this index
   wrote them (their identity says so), any other is left; files the index holds but that are
   missing or damaged (size, or hash against the name) are copied again;
4. sources: what the manifest store's journal says changed since last time (everything, on
   a first run or with ``--full``): each source's variants are wanted, a source gone drops
   its references, a deleted one's variants leave the tiers at once; new variants start with
   the prior (rank.py);
5. hotness: what is new in the access logs, each successful request to a variant weighed by
   its time; a hot list pins paths;
6. plan, each tier by its policy (cache/policy.py): NVMe wants every referenced variant
   (within its budget, densest first); RAM wants the densest thumbnails within its budget;
   variants nobody references leave both tiers;
7. act: evictions first, then copies (from NVMe when there, else the origin, in parallel),
   each committed in the index before and after; ENOSPC stops that tier alone;
8. report: what each tier holds, RAM's share of the requests.

``dry_run`` does all of it but act: the plan is reported, nothing is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from imgwarm.cache.index import Index
from imgwarm.cache.lock import INDEX, lock
from imgwarm.cache.logformat import LogFormat
from imgwarm.cache.policy import policies
from imgwarm.cache.report import WarmReport
from imgwarm.cache.run import Run, start_clock
from imgwarm.cache.steps import check, copy, finish, plan, score, sources
from imgwarm.cache.steps import evict as evictions
from imgwarm.cache.tiers import open_tiers
from imgwarm.config import Settings
from imgwarm.exceptions import LogFormatError, SettingsError
from imgwarm.reporting import Progress
from imgwarm.store import Stores
from imgwarm.store.format import ACT, READ

__all__ = ["WarmReport", "warm"]

STEPS: tuple[Callable[[Run], None], ...] = (
    check.identities,
    check.recover,
    check.reconcile,  # --full only
    sources.read,  # (copies to the backing tier start meanwhile: steps/ahead.py)
    evictions.take_down,
    score.read_access_logs,
    score.pin,  # with a hot list only
    evictions.drop_unreferenced,
    plan.plan,
    copy.copy,
    finish.remember_budgets,
    finish.count,
)


def step_name(step: Callable[[Run], None]) -> str:
    """A step as the report names it: its module in steps/ and its function
    (``sources.read``)."""
    return f"{step.__module__.rsplit('.', 1)[-1]}.{step.__name__}"


def warm(settings: Settings, *, access_logs: list[str] | None = None,
         log_format: str | None = None, hot_list: Path | None = None, full: bool = False,
         dry_run: bool = False, now: float | None = None,
         progress: Progress | None = None) -> WarmReport:
    """One run (see the module's docstring). Raises WarmBusy when another run holds the
    tiers, SettingsError for a RAM tier not on tmpfs or a log format it cannot read,
    FormatTooNew for a store or index newer than this code (before any tier is touched:
    warm removes from its tiers what the store says, so it must know the store's format)."""
    started = time.monotonic()
    cache = settings.cache
    try:
        parser = LogFormat(log_format or cache.log_format)
    except LogFormatError as error:
        raise SettingsError(f"log_format (--log-format): {error}") from None
    stores = Stores.for_settings(settings.store)
    stores.check(READ if dry_run else ACT)
    with lock(cache.cache_state) as held:
        index = Index(cache.cache_state / INDEX)  # (first: one too new touches no tier)
        tiers = open_tiers(settings)
        report = WarmReport(dry_run=dry_run, full=full)
        at = now or time.time()
        run = Run(settings=settings, tiers=tiers, policies=policies(settings, tiers, report),
                  index=index, stores=stores, report=report,
                  now=at, decay=start_clock(index, cache.hot_half_life, at), parser=parser,
                  access_logs=cache.access_logs if access_logs is None else access_logs,
                  hot_list=hot_list, full=full, dry_run=dry_run,
                  progress=progress or (lambda *_: None), lock=held)
        kept = False
        try:
            for step in STEPS:  # each step's own seconds in the report, in their order
                began = time.perf_counter()
                step(run)
                report.steps[step_name(step)] = round(time.perf_counter() - began, 6)
            kept = not dry_run
        finally:
            if run.copier is not None:
                run.copier.close()
            index.close(keep=kept)
    report.seconds = time.monotonic() - started
    return report
