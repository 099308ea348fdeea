"""``imgwarm watch``: local folders whose complete files are made as they come."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from imgwarm.cli import report
from imgwarm.cli.common import EXIT_FAILED, EXIT_OK, command, json_text, load
from imgwarm.cli.setting import SettingOption
from imgwarm.cli.signals import stopped_by_signals
from imgwarm.text import printable

if TYPE_CHECKING:
    from imgwarm.events.actions import Outcome


@command()
@click.argument("folders", nargs=-1, required=True, metavar="FOLDER...",
                type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--once", is_flag=True, help="Catch up (make what changed, take down what was "
              "removed), then exit: for cron, or a first run.")
@click.option("--settle", type=click.FloatRange(0, 60), default=0.5, show_default=True,
              metavar="SECONDS", help="Quiet time after a file's last event before it is "
              "acted on: closes in quick succession make it once, with the last bytes.")
@click.option("--queue", "on_queue", is_flag=True,
              help="Queue each file's job (and each takedown) for `imgwarm worker` instead of "
              "making it here: the folders must lie inside origin_root, and a key is the "
              "path under it.")
@click.option("--json", "as_json", is_flag=True,
              help='One JSON object a file, with "event": "made", "failed", "deleted", '
              '"queued" or "delete queued".')
@click.option("--origin-root", type=click.Path(path_type=Path), cls=SettingOption)
@click.option("--manifest-root", type=click.Path(path_type=Path), cls=SettingOption)
@click.option("--workers", type=int, cls=SettingOption)
@click.pass_context
def watch(ctx: click.Context, /, folders: tuple[Path, ...], once: bool, settle: float,
          on_queue: bool, as_json: bool, **options: Any) -> None:
    """Make each new or changed image file under FOLDER... (recursively) once it is complete,
    and take down the variants of a file removed or moved out, as `imgwarm optimize` and
    `imgwarm delete` would; runs until SIGTERM or Ctrl-C (the files in hand are finished).

    Complete means closed after writing, or moved in: a file still being written is never
    read. Hidden names (a dot first), temporary ones (`*.part`, `*.tmp`, `*.crdownload`,
    `*.swp`, `x~`, `~x`, rsync's `.x.XXXXXX`), files that are not images by their suffix,
    and anything under imgwarm's own roots are passed over.
    On start, what changed while no watcher ran is caught up. Each file a line on stdout
    (failures on stderr, one line each: the watcher goes on). With events_redis_url set,
    each publish, failure and takedown is also added to the events stream.

    With --queue, each file's key (its path under origin_root) is queued for the workers, as
    `imgwarm enqueue` does, and a removed file's takedown too; the workers make them.

    Exit status: 0 (with --once: 1 when a file failed), 2 for usage errors.
    """
    from imgwarm.events.watch import watch as make_watcher

    settings = load(ctx, **options)
    if settings.store.origin != "local":
        raise click.UsageError("watch makes local files: set IMGWARM_ORIGIN=local (for a "
                               "bucket, use `imgwarm listen`)")
    failures = 0

    def show(outcome: Outcome) -> None:
        nonlocal failures
        from imgwarm.lifecycle.delete import Deletion
        from imgwarm.manifest import SourceResult

        if isinstance(outcome, SourceResult):
            failures += not outcome.ok
            if as_json:
                event = "made" if outcome.ok else "failed"
                click.echo(json_text({"event": event, **outcome.to_object()}))
            else:
                click.echo(report.human_line(outcome), err=not outcome.ok)
        elif as_json:
            event = "deleted" if isinstance(outcome, Deletion) else \
                "delete queued" if outcome.delete else "queued"
            click.echo(json_text({"event": event, **outcome.to_object()}))
        else:
            click.echo(printable(outcome.line()))

    watcher = make_watcher(folders, settings, show, settle=settle, queue=on_queue)
    shown = ", ".join(str(f) for f in watcher.folders.watched)

    def ready() -> None:  # (on stderr, with --json too: a supervisor's or a test's cue)
        click.echo(printable(f"{'catching up' if once else 'watching'} {shown}; variants in "
                             f"{settings.store.origin_root}"), err=True)

    with stopped_by_signals(watcher.stop):
        watcher.run(once=once, ready=ready)
    ctx.exit(EXIT_FAILED if once and failures else EXIT_OK)
