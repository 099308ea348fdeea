"""``imgwarm warm``: fill the cache server's tiers, once or every few minutes."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from imgwarm.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    command,
    failure_line,
    json_text,
    load,
)
from imgwarm.cli.report import bars
from imgwarm.cli.setting import SettingOption
from imgwarm.cli.signals import stopped_by_signals, then_interrupt
from imgwarm.exceptions import ImgwarmError
from imgwarm.text import printable

if TYPE_CHECKING:
    from imgwarm.cache.warm import WarmReport
    from imgwarm.config import Settings


@command()
@click.option("--access-log", "access_logs", multiple=True, metavar="PATH|GLOB",
              help="nginx access log to read (repeat; globs take rotated and .gz files). "
              "Default: the access_logs setting.")
@click.option("--log-format", cls=SettingOption)
@click.option("--hot-list", type=click.Path(dir_okay=False, path_type=Path),
              help="A file of URL paths, one a line, to hold in RAM first.")
@click.option("--ram-budget", metavar="SIZE|PERCENT", cls=SettingOption)
@click.option("--nvme-budget", metavar="SIZE|PERCENT", cls=SettingOption)
@click.option("--half-life", "hot_half_life", metavar="DURATION", cls=SettingOption)
@click.option("--ram-root", type=click.Path(file_okay=False, path_type=Path),
              cls=SettingOption)
@click.option("--nvme-root", type=click.Path(file_okay=False, path_type=Path),
              cls=SettingOption)
@click.option("--allow-non-tmpfs", "ram_allow_non_tmpfs", is_flag=True, default=None,
              cls=SettingOption)
@click.option("--processes", "fill_processes", type=int, metavar="N", cls=SettingOption)
@click.option("--full", is_flag=True,
              help="Reconcile index, tiers and origin completely: list every manifest, check "
              "every file in the tiers (repairs files deleted or damaged by hand).")
@click.option("--every", metavar="DURATION",
              help="Run again and again, this long apart (for a service or a container); "
              "one line a run.")
@click.option("--follow", is_flag=True,
              help="Keep running, and run as soon as the events stream (events_stream) says "
              "a source was published or taken down: its variants are on this box within "
              "seconds. This box's consumer group (follow_group) resumes where it stopped. "
              "With --every, the periodic run stays as the safety net.")
@click.option("--dry-run", is_flag=True, help="Print what would be done; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a run.")
@click.pass_context
def warm(ctx: click.Context, /, access_logs: tuple[str, ...], log_format: str | None,
         hot_list: Path | None, full: bool, every: str | None, follow: bool, dry_run: bool,
         as_json: bool, **options: Any) -> None:
    """Fill the cache tiers from the origin: every variant on NVMe, the hottest thumbnails
    in RAM (a tmpfs), placed by what the nginx access logs say is asked for.

    Each run costs what changed since the last one: new and changed manifests (read from the
    manifest store's journal), new log lines, scores that moved. A tier found empty (a
    reboot empties a tmpfs) is filled again. Copies are atomic; a full disk stops that tier
    alone; two runs on the same tiers never interleave.

    --every and --follow keep running (a service): one line a run, a failed run is one
    line and the next goes on; SIGTERM or Ctrl-C finishes the run in hand and exits 0.

    Exit status: 0 when the run did what it planned, 1 when a tier stopped (full), a file
    could not be copied, or the run failed; 2 for usage errors.
    """
    from imgwarm.config.units import parse_duration

    settings = load(ctx, **{k: v for k, v in options.items() if v is not None})
    try:
        pause = parse_duration(every) if every else None
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--every") from None
    logs = list(access_logs) or None
    if follow and dry_run:
        raise click.UsageError("--follow places what it is woken for: not with --dry-run")
    if pause is None and not follow:
        once = _once(settings, logs, log_format, hot_list, full, dry_run, as_json)
        ctx.exit(EXIT_OK if _whole(once) else EXIT_FAILED)
    _service(settings, pause, follow, lambda first: _once(
        settings, logs, log_format, hot_list, full and first, dry_run, as_json))
    ctx.exit(EXIT_OK)


def _service(settings: Settings, pause: float | None, follow: bool,
             once: Callable[[bool], WarmReport]) -> None:
    """Runs until SIGTERM or Ctrl-C (the run in hand finished): every ``pause`` seconds,
    when the events stream wakes it (``follow``), or both."""
    from imgwarm.cache.heartbeat import beat
    from imgwarm.cache.service import keep_warm

    stop = threading.Event()
    waker = None
    if follow:
        from imgwarm.events.follow import Follower

        waker = Follower(settings, stop=stop, say=lambda line: click.echo(printable(line),
                                                                          err=True))
    state, started, runs = settings.cache.cache_state, time.time(), 0

    def run() -> WarmReport | None:
        nonlocal runs
        runs += 1
        try:
            return once(runs == 1)  # --full: a reconciliation once, at the start
        except ImgwarmError as error:  # a service goes on: one line, and the next run
            if error.exit_code == EXIT_USAGE:  # not a run that failed: a usage error
                raise
            click.echo(failure_line("warm", error), err=True)
        except click.ClickException:
            raise
        except Exception as error:
            click.echo(printable(f"warm FAILED (unexpected {type(error).__name__}): {error}"),
                       err=True)
        return None

    # for `imgwarm health`: the period runs are due in; none when only events wake it (its
    # health is then the last run's, which is never overdue)
    period = pause if pause is not None else math.inf

    def after(report: WarmReport | None) -> None:
        beat(state, started, period, time.time(), _whole(report))

    # a second signal does not wait for the run in hand
    with stopped_by_signals(then_interrupt(stop)), suppress(KeyboardInterrupt):
        beat(state, started, period, None, True)  # for `imgwarm health`: under way
        keep_warm(run, every=pause, waker=waker, stop=stop, after=after)


def _whole(report: WarmReport | None) -> bool:
    """The run did what it planned: no tier stopped, no copy failed."""
    return report is not None and not any(t.stopped or t.failed for t in report.tiers().values())


def _once(settings: Any, logs: list[str] | None, log_format: str | None,
          hot_list: Path | None, full: bool, dry_run: bool, as_json: bool) -> WarmReport:
    """One run, its line printed."""
    from imgwarm.cache.warm import warm as run

    with bars(as_json, "copying") as progress:
        report = run(settings, access_logs=logs, log_format=log_format, hot_list=hot_list,
                     full=full, dry_run=dry_run, progress=progress)
    click.echo(json_text(report.to_object()) if as_json else printable(report.line()))
    return report
