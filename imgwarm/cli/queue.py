"""``imgwarm enqueue``, ``imgwarm worker`` and ``imgwarm status``: the queue on Redis."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import click

from imgwarm.cli import report
from imgwarm.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    command,
    credit_options,
    given_credits,
    json_text,
    load,
)
from imgwarm.text import printable

if TYPE_CHECKING:
    from imgwarm.manifest import SourceResult


@command()
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@credit_options
@click.option("--wait", is_flag=True,
              help="Block until each job ends; exit 1 if any failed.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="With --wait: count the jobs not ended this long after queueing as "
              "failed (they still run).")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per key per line (with --wait: the optimize --json one).")
@click.pass_context
def enqueue(ctx: click.Context, /, keys: tuple[str, ...], description: str | None,
            copyright_: str | None, artist: str | None, wait: bool, timeout: float | None,
            as_json: bool) -> None:
    """Queue each KEY (an original in the origin: a path under origin_root, or an S3 key
    under the prefix) for the workers (`imgwarm worker`).

    Keys with '..', absolute paths, control characters or hidden ('.') names are refused
    before anything is queued (exit 2). If Redis cannot be reached, nothing is silently
    dropped: the message says which keys were queued and the exit status is 1.
    """
    from imgwarm.workers.client import enqueue_all

    settings = load(ctx)
    credits = given_credits(description, copyright_, artist)
    jobs = enqueue_all(list(dict.fromkeys(keys)), settings, credits)  # every key checked first
    if not wait:
        for job in jobs:
            click.echo(json_text({"source": job.key, "queued": True, "job": job.id})
                       if as_json else printable(f"queued    {job.key}"))
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    results: Iterable[SourceResult] = (
        job.wait(None if deadline is None else max(0.01, deadline - time.monotonic()))
        for job in jobs
    )
    failed = report.show(results, len(jobs), as_json, "waiting")
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


@command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                           "help_option_names": ["-h"]})
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED, metavar="[CELERY OPTIONS]")
@click.pass_context
def worker(ctx: click.Context, /, celery_args: tuple[str, ...]) -> None:
    """Run a queue worker: a real Celery worker that takes jobs from the broker
    (IMGWARM_BROKER_URL), reads originals from the origin and writes variants and manifests.

    Any `celery worker` option is passed on (`imgwarm worker --help` lists them):
    --concurrency N (default: the workers setting, one process per core; never more than
    max_memory holds, each process at its idle cost, with room for one decode), --loglevel
    (default INFO), -n/--hostname, --max-tasks-per-child... Run one per machine against the
    same Redis and bucket. SIGTERM finishes the jobs in hand; a worker killed outright has
    its jobs handed to another after visibility_timeout.
    """
    from imgwarm.workers.task import worker_app

    settings = load(ctx)

    def given(short: str, long: str) -> bool:  # -l INFO, -lINFO, --loglevel INFO, --loglevel=INFO
        return any((a.startswith(short) and not a.startswith("--")) or a.split("=")[0] == long
                   for a in celery_args)

    asked, rest = _concurrency(celery_args)
    # Each pool process holds its idle memory: no more of them than max_memory holds.
    processes, cut = settings.image.workers_within_memory(
        asked or settings.image.effective_workers())
    if cut is not None and (asked or settings.image.workers):  # (one a core: a default)
        click.echo(cut, err=True)
    argv = ["worker", "--concurrency", str(processes)]
    if not given("-l", "--loglevel"):
        argv += ["--loglevel", "INFO"]
    worker_app(settings).worker_main([*argv, *rest])


def _concurrency(args: tuple[str, ...]) -> tuple[int | None, list[str]]:
    """The pool size asked for (-c 2, -c2, --concurrency 2, --concurrency=2; the last one),
    and the other arguments."""
    asked, rest, skip = None, [], False
    for at, argument in enumerate(args):
        if skip:
            skip = False
            continue
        if argument in ("-c", "--concurrency") and at + 1 < len(args):
            value, skip = args[at + 1], True
        elif argument.startswith("--concurrency="):
            value = argument.partition("=")[2]
        elif argument.startswith("-c") and not argument.startswith("--") and argument != "-c":
            value = argument[2:]
        else:
            rest.append(argument)
            continue
        if not value.isdigit() or int(value) < 1:
            raise click.BadParameter(f"{value!r} is not a number of processes (1 or more)",
                                     param_hint="--concurrency")
        asked = int(value)
    return asked, rest


@command()
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per key per line.")
@click.pass_context
def status(ctx: click.Context, /, keys: tuple[str, ...], as_json: bool) -> None:
    """Say where each queued KEY stands: queued, running, retrying, done (with its
    variants), failed (with the reason) or unknown (never queued, or forgotten and never
    made).

    Exit status: 0 when no key failed or is unknown, 1 otherwise.
    """
    from imgwarm.store import Stores
    from imgwarm.store.format import READ
    from imgwarm.workers.client import job_status

    settings = load(ctx)
    stores = Stores.for_settings(settings.store)
    stores.check(READ)  # a store this code may not read: one line, not one a key
    bad = 0
    for key in dict.fromkeys(keys):
        found = job_status(key, settings, stores)
        bad += found.state in ("failed", "unknown")
        if as_json:
            click.echo(json_text(found.to_object()))
        elif found.state == "done" and found.manifest is not None:
            click.echo(printable(f"{'done':9} {key}  {report.summarize(found.manifest)}"))
        elif found.error:
            click.echo(printable(f"{found.state:9} {found.error}"), err=found.state == "failed")
        else:
            click.echo(printable(f"{found.state:9} {key}"), err=found.state == "unknown")
    ctx.exit(EXIT_FAILED if bad else EXIT_OK)
