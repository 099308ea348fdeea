"""``imgwarm delete``, ``imgwarm gc`` and ``imgwarm fsck``: a photo taken down everywhere;
variants nobody names reclaimed after a grace period; a store's bad states found and set right."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from imgwarm.cli.common import EXIT_FAILED, EXIT_OK, command, json_text, load
from imgwarm.cli.report import bars
from imgwarm.cli.setting import SettingOption
from imgwarm.reporting import mib
from imgwarm.text import printable

if TYPE_CHECKING:
    from imgwarm.config import Settings
    from imgwarm.lifecycle.fanout import FanOut
    from imgwarm.lifecycle.fsck import FsckReport
    from imgwarm.store.shard import Shard


def queue_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--queue`` and ``--shards``: a store-wide pass as slices on the workers."""
    command = click.option(
        "--shards", type=click.IntRange(1, 4096), default=16, show_default=True, metavar="N",
        help="With --queue: how many slices (jobs) the pass is cut into.")(command)
    return click.option(
        "--queue", "queued", is_flag=True,
        help="Run it as jobs on the workers (imgwarm worker, the queue settings): every slice "
        "a job; waits with progress and prints the merged summary when the last slice ends, "
        "and which slices failed.")(command)


@command()
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@click.option("--original", is_flag=True,
              help="Remove the original too (by default it is left to the application).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per key.")
@click.pass_context
def delete(ctx: click.Context, /, keys: tuple[str, ...], original: bool, as_json: bool) -> None:
    """Take sources down at once: each KEY's manifest becomes a tombstone, and its variants
    leave the origin (local or S3), except those another source names (the same bytes under
    the same name). Each cache server's next `imgwarm warm` reads the tombstones and removes
    the files from its tiers; nginx then answers 404.

    KEY is an origin key (S3, or one given to `imgwarm enqueue`) or, with a local origin, the
    file that was optimized. Running it again is safe: a delete killed midway is finished.
    Browsers and CDNs that cached an immutable URL keep their copy (purge them there).

    Exit status: 0 when every key was deleted, 1 when any was unknown or failed (the others
    are still deleted), 2 for an unsafe key (then none is touched).
    """
    from imgwarm.events.out import Outbox, deleted
    from imgwarm.exceptions import ImgwarmError, about
    from imgwarm.lifecycle.delete import delete as run
    from imgwarm.lifecycle.delete import resolve_key
    from imgwarm.store import Stores

    settings = load(ctx)
    outbox = Outbox(settings, explicit_only=True)  # the events stream, when set
    stores = Stores.for_settings(settings.store)
    stores.check()  # a store too new for this code: one line, before any key
    resolved = [resolve_key(key, stores) for key in keys]  # all, before any is deleted
    failed = freed = 0
    with bars(as_json, "deleting") as progress:
        for number, key in enumerate(resolved, start=1):
            try:
                done = run(key, stores, original=original)
            except ImgwarmError as error:  # this key: the others are still deleted
                failed += 1
                message = about(key, error)
                if as_json:
                    click.echo(json_text({"key": key, "ok": False, "error": message}))
                else:
                    click.echo(printable(f"FAILED {message}"), err=True)
            else:
                freed += done.freed
                outbox.add(deleted(key, done.variants))
                click.echo(json_text(done.to_object()) if as_json else printable(done.line()))
            progress("origin", number, len(resolved))
    if not as_json:
        click.echo(f"{len(resolved)} source(s): {len(resolved) - failed} deleted, {failed} "
                   f"failed; {mib(freed)} freed in the origin", err=True)
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


@command()
@click.option("--grace", metavar="DURATION", cls=SettingOption, setting="gc_grace")
@click.option("--full", is_flag=True,
              help="List every variant and read every manifest (S3: listings in parallel "
              "pages): finds what no manifest names whatever left it, and sets the "
              "references right. The first gc of a store does it by itself.")
@click.option("--dry-run", is_flag=True, help="Print what would go and the bytes; change "
              "nothing.")
@click.option("--shard", "shard", metavar="I/N", default=None,
              help="With --full: do slice I of N (the variants of its share of the shard "
              "folders); N runs, one a machine, do together what one whole pass does.")
@click.option("--now", "now", type=float, hidden=True, help="The clock, for tests.")
@queue_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object (with the paths).")
@click.pass_context
def gc(ctx: click.Context, /, grace: str | None, full: bool, dry_run: bool,
       shard: str | None, now: float | None, queued: bool, shards: int,
       as_json: bool) -> None:
    """Remove the variants that no manifest names any more (a settings change, a source made
    again) once they have been unnamed for longer than the grace period: from the origin,
    and from this machine's cache tiers when it has them (found in warm's index).

    A usual run looks only at the variants that lost a reference since (the references kept
    beside the manifests), so it costs what changed, not the origin's size.

    Exit status: 0 when done, 1 when a part failed (the rest is done), 2 for usage errors.
    """
    from imgwarm.config.units import parse_duration
    from imgwarm.lifecycle.gc import GcReport
    from imgwarm.lifecycle.gc import gc as run

    settings = load(ctx)
    try:
        seconds = parse_duration(grace, zero=True) if grace is not None else None
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--grace") from None
    slice_ = _shard(shard)
    if slice_ is not None and not full:
        raise click.BadParameter("a slice is of a full pass: add --full", param_hint="--shard")
    if queued and not full:
        raise click.UsageError("--queue needs --full (a usual gc looks only at what changed)")
    if queued and slice_ is not None:
        raise click.UsageError("--queue runs every slice (--shards N): give no --shard")
    if queued:
        done = _fan_out("gc", settings, shards, as_json, {
            "grace": seconds, "now": now, "dry_run": dry_run})
        report = done.report
        assert isinstance(report, GcReport)
    else:
        with bars(as_json, "looking") as progress:
            report = run(settings, grace=seconds, now=now, full=full, dry_run=dry_run,
                         progress=progress, shard=slice_)
    if as_json:
        click.echo(json_text(done.to_object() if queued else report.to_object()))
    else:
        for path in report.paths:
            click.echo(printable(f"{'would remove' if dry_run else 'removed'} {path}"))
        if report.removed > len(report.paths):
            click.echo(f"(the first {len(report.paths):,} of {report.removed:,} shown)")
        for path in report.damaged_records:  # skipped: make its source again
            click.echo(printable(f"damaged {path}"))
        click.echo(printable(report.line()))
        if queued:
            click.echo(printable(done.line()))
    ctx.exit(EXIT_FAILED if queued and done.failed else EXIT_OK)


@command()
@click.option("--repair", is_flag=True,
              help="Set right what is safe to: add the missing claims, drop the dangling "
              "ones (gc's grace then starts now), make sources with a missing file again "
              "from their originals.")
@click.option("--shard", "shard", metavar="I/N", default=None,
              help="Check slice I of N (the variants of its share of the shard folders; "
              "every record is still read); N runs, one a machine, find together what one "
              "whole check finds.")
@click.option("--now", "now", type=float, hidden=True, help="The clock, for tests.")
@queue_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object (with the paths).")
@click.pass_context
def fsck(ctx: click.Context, /, repair: bool, shard: str | None, now: float | None,
         queued: bool, shards: int,
         as_json: bool) -> None:
    """Check the store: read every manifest and claim and list the origin, and report each
    kind of bad state with its count and paths:

    \b
      missing    a manifest names a variant whose file is not in the origin
      unclaimed  a manifest names a variant without its claim (gc could remove it)
      dangling   a claim no manifest stands behind, older than an hour (a younger one
                 may be an upload under way: shown as in flight, never touched)
      damaged    a record that cannot be read

    --repair makes the sources with a missing file again from their originals, adds the
    missing claims, and removes the dangling ones (their variants then go at gc after the
    grace period, counted from now). It never writes over a manifest whose original cannot
    be read (reported as unrepaired, with why), never touches a damaged record (make its
    source again), and removes no variant or original (gc does, after the grace period).

    Exit status: 0 when the store is clean or everything found was repaired, 1 when
    problems are left, 2 for usage errors.
    """
    from imgwarm.lifecycle.fsck import FsckReport, check
    from imgwarm.store import Stores

    slice_ = _shard(shard)
    settings = load(ctx)
    if queued and slice_ is not None:
        raise click.UsageError("--queue runs every slice (--shards N): give no --shard")
    if queued:
        done = _fan_out("fsck", settings, shards, as_json, {"repair": repair, "now": now})
        report = done.report
        assert isinstance(report, FsckReport)
    else:
        with bars(as_json, "checking") as progress:
            report = check(Stores.for_settings(settings.store), repair=repair, now=now,
                           settings=settings, progress=progress, shard=slice_)
    if as_json:
        click.echo(json_text(done.to_object() if queued else report.to_object()))
    else:
        for line in _found_lines(report):
            click.echo(printable(line))
        for what, why in sorted(report.unrepaired.items()):
            click.echo(printable(f"UNREPAIRED {what}: {why}"), err=True)
        for line in [*report.lines(), report.line(), *([done.line()] if queued else [])]:
            click.echo(printable(line))
    ctx.exit(EXIT_FAILED if report.left() or (queued and done.failed) else EXIT_OK)


def _fan_out(kind: str, settings: Settings, shards: int, as_json: bool,
             options: dict[str, Any]) -> FanOut:
    """``kind`` as ``shards`` jobs on the workers, with a bar of the slices ended."""
    from imgwarm.workers.fanout import fan_out

    with bars(as_json, f"{kind} on the workers") as progress:
        return fan_out(kind, settings, shards=shards, options=options, progress=progress)


def _shard(text: str | None) -> Shard | None:
    """``--shard I/N`` parsed; a usage error (exit 2) with its one line."""
    from imgwarm.store.shard import Shard

    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--shard") from None


def _found_lines(report: FsckReport) -> list[str]:
    """A line a path found: its kind, the path, and what the repair did."""
    named_by: dict[str, list[str]] = {}
    for key, paths in sorted(report.sources.items()):
        for path in paths:
            named_by.setdefault(path, []).append(key)
    lines = []
    for kind in ("missing", "unclaimed", "dangling", "damaged"):
        finding = getattr(report, kind)
        repaired = set(finding.repaired)
        for path in finding.paths:
            done = " (repaired)" if path in repaired else ""
            of = f" (named by {', '.join(named_by[path])})" if path in named_by else ""
            lines.append(f"{kind:9}  {path}{of}{done}")
    lines += [f"{'in flight':9}  {path} (left alone)" for path in report.in_flight]
    return lines
