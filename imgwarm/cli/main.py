"""``imgwarm`` and its commands."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from imgwarm.cli import report
from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import ImgwarmError, SettingsError
from imgwarm.pipeline.manifest import to_json
from imgwarm.pipeline.text import printable

if TYPE_CHECKING:
    from imgwarm.pipeline.batch import SourceResult
    from imgwarm.pipeline.metadata import Credits

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _settings(ctx: click.Context, **overrides: Any) -> Settings:
    try:
        return load_settings(ctx.obj.get("config"), **overrides)
    except SettingsError as error:
        raise click.UsageError(str(error)) from None


def _credits(description: str | None, copyright_: str | None, artist: str | None) -> Credits:
    """The given EXIF text, or a usage error naming the option that cannot be used."""
    from imgwarm.pipeline.metadata import Credits

    try:
        return Credits.given(description=description, copyright=copyright_, artist=artist)
    except SettingsError as error:
        raise click.UsageError(str(error)) from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML settings file (default: ./imgwarm.toml, or IMGWARM_CONFIG).")
@click.version_option(package_name="imgwarm")
@click.pass_context
def cli(ctx: click.Context, config: Path | None) -> None:
    """imgwarm: photos in, compact web variants out.

    Every upload becomes WebP (and AVIF) plus a progressive JPEG fallback at several widths,
    upright, sRGB, carrying its description and copyright in EXIF, named by the SHA-256 of its
    bytes and laid out in shard folders that nginx serves as they are.

    Settings come from defaults, then imgwarm.toml, then IMGWARM_* variables, then options:
    see `imgwarm config`.
    """
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


@cli.command()
@click.argument("sources", nargs=-1, metavar="SOURCE...", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per source per line.")
@click.option("--description", help="EXIF ImageDescription for every output (else the source's).")
@click.option("--copyright", "copyright_", metavar="TEXT",
              help="EXIF Copyright for every output (else the source's).")
@click.option("--artist", help="EXIF Artist for every output (else the source's).")
@click.option("--widths", help="Comma-separated widths, e.g. 320,640,1280,1920.")
@click.option("--formats", help="Comma-separated formats among avif, webp, jpeg.")
@click.option("--webp-quality", type=int, help="WebP quality, 1..100 (default 80).")
@click.option("--jpeg-quality", type=int, help="JPEG quality, 1..100 (default 82).")
@click.option("--avif-quality", type=int, help="AVIF quality, 1..100 (default 55).")
@click.option("--origin-root", type=click.Path(path_type=Path),
              help="Where variants are written (default var/origin).")
@click.option("--manifest-root", type=click.Path(path_type=Path),
              help="Where manifests are written (default var/manifest).")
@click.option("--max-pixels", type=int, help="Refuse images with more pixels (default 100 MP).")
@click.option("--max-bytes", type=int, help="Refuse files larger than this (default 64 MiB).")
@click.option("--workers", type=int, help="Sources at once (default: one per core).")
@click.pass_context
def optimize(ctx: click.Context, /, sources: tuple[str, ...], as_json: bool,
             description: str | None, copyright_: str | None, artist: str | None,
             **options: Any) -> None:
    """Make the web variants of each SOURCE (image files, or folders searched recursively),
    in this process.

    With IMGWARM_ORIGIN=s3, each SOURCE is instead the key of an original in the bucket, and
    variants and manifests go to the bucket.

    Exit status: 0 when every source succeeded, 1 when any failed (the others are still
    done), 2 for usage errors. A failed source leaves no file behind. Running again on the
    same sources with the same settings writes nothing new.
    """
    from imgwarm.pipeline.batch import batch_workers, collect_sources, run_batch, run_keys
    from imgwarm.pipeline.vipsutil import configure_libvips

    settings = _settings(ctx, **options)
    if not sources:
        raise click.UsageError(
            "no SOURCE given: name image files or folders "
            "(`imgwarm samples DIR` makes sample photos to try)"
        )
    credits = _credits(description, copyright_, artist)
    if settings.origin == "s3":
        keys = list(dict.fromkeys(sources))
        _check_keys(keys)
        configure_libvips(batch_workers(settings, len(keys)))
        results = run_keys(keys, settings, credits)
        count, where = len(keys), f"s3://{settings.s3_bucket}/{settings.s3_prefix}"
    else:
        paths = collect_sources(sources, skip=[settings.origin_root, settings.manifest_root])
        if not paths:
            raise click.UsageError(f"no image files found in {', '.join(sources)}")
        configure_libvips(batch_workers(settings, len(paths)))
        results = run_batch(paths, settings, credits)
        count, where = len(paths), str(settings.origin_root)
    failed = _report(results, count, as_json, "optimizing")
    if not as_json:
        click.echo(f"{count} source(s): {count - failed} ok, {failed} failed; "
                   f"variants in {where}", err=True)
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


def _check_keys(keys: list[str]) -> None:
    from imgwarm.exceptions import LayoutError
    from imgwarm.pipeline.origin import check_source_key

    try:
        for key in keys:
            check_source_key(key)
    except LayoutError as error:
        raise click.UsageError(str(error)) from None


def _progress_bar() -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress("{task.description}", BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    redirect_stdout=False, redirect_stderr=False)


def _report(results: Iterable[SourceResult], total: int, as_json: bool, doing: str) -> int:
    """Show results as they come: to stdout, failures to stderr, the bar (on a terminal, for
    several sources) to stderr. Returns how many sources failed."""
    show_bar = not as_json and sys.stderr.isatty() and total > 1
    progress = _progress_bar() if show_bar else None  # rich is imported only for a TTY
    failed = 0

    def emit(line: str, err: bool) -> None:
        stream = sys.stderr if err else sys.stdout
        if progress is not None and stream.isatty():  # above the bar, on the same terminal
            progress.console.print(line, markup=False, highlight=False, emoji=False)
        else:
            click.echo(line, err=err)

    with progress if progress is not None else nullcontext():
        task = progress.add_task(doing, total=total) if progress else None
        for result in results:
            failed += not result.ok
            if as_json:
                click.echo(report.json_line(result))
            else:
                emit(report.human_line(result), err=not result.ok)
            if progress is not None and task is not None:
                progress.advance(task)
    return failed


@cli.command()
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--json", "as_json", is_flag=True, help="One compact JSON object per line.")
@click.option("--manifest-root", type=click.Path(path_type=Path),
              help="Where manifests are (default var/manifest).")
@click.pass_context
def show(ctx: click.Context, /, sources: tuple[str, ...], as_json: bool,
         manifest_root: Path | None) -> None:
    """Print the manifest of each SOURCE: a file that was optimized (by its path, even if it
    has moved since), or a manifest key. Exit status 1 if any has none."""
    from imgwarm.pipeline.optimize import local_key
    from imgwarm.pipeline.origin import Stores

    manifests = Stores.for_settings(_settings(ctx, manifest_root=manifest_root)).manifests
    missing = 0
    for source in sources:
        manifest = manifests.get(local_key(Path(source))) or manifests.get(source)
        if manifest is None:
            missing += 1
            click.echo(printable(f"{source}: no manifest (not optimized yet, or another "
                                 "manifest root)"), err=True)
        elif as_json:
            click.echo(to_json(manifest.model_dump()))
        else:
            click.echo(manifest.to_json(), nl=False)
    ctx.exit(EXIT_FAILED if missing else EXIT_OK)


def _credit_options(command: Any) -> Any:
    for option in reversed([
        click.option("--description", help="EXIF ImageDescription (else the source's)."),
        click.option("--copyright", "copyright_", metavar="TEXT",
                     help="EXIF Copyright (else the source's)."),
        click.option("--artist", help="EXIF Artist (else the source's)."),
    ]):
        command = option(command)
    return command


@cli.command()
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@_credit_options
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
    from imgwarm.exceptions import LayoutError
    from imgwarm.workers.jobs import enqueue_all

    settings = _settings(ctx)
    credits = _credits(description, copyright_, artist)
    try:  # every key is checked before any is queued
        jobs = enqueue_all(list(dict.fromkeys(keys)), settings, credits)
    except LayoutError as error:
        raise click.UsageError(str(error)) from None
    if not wait:
        for job in jobs:
            click.echo(to_json({"source": job.key, "queued": True, "job": job.id})
                       if as_json else printable(f"queued    {job.key}"))
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    results: Iterable[SourceResult] = (
        job.wait(None if deadline is None else max(0.01, deadline - time.monotonic()))
        for job in jobs
    )
    failed = _report(results, len(jobs), as_json, "waiting")
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                               "help_option_names": ["-h"]})
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED, metavar="[CELERY OPTIONS]")
@click.pass_context
def worker(ctx: click.Context, /, celery_args: tuple[str, ...]) -> None:
    """Run a queue worker: a real Celery worker that takes jobs from the broker
    (IMGWARM_BROKER_URL), reads originals from the origin and writes variants and manifests.

    Any `celery worker` option is passed on (`imgwarm worker --help` lists them):
    --concurrency N (default: the workers setting, one process per core), --loglevel
    (default INFO), -n/--hostname, --max-tasks-per-child... Run one per machine against the
    same Redis and bucket. SIGTERM finishes the jobs in hand; a worker killed outright has
    its jobs handed to another after visibility_timeout.
    """
    from imgwarm.workers.app import make_app

    settings = _settings(ctx)

    def given(short: str, long: str) -> bool:  # -c 2, -c2, --concurrency 2, --concurrency=2
        return any((a.startswith(short) and not a.startswith("--")) or a.split("=")[0] == long
                   for a in celery_args)

    argv = ["worker"]
    if not given("-c", "--concurrency"):
        argv += ["--concurrency", str(settings.effective_workers())]
    if not given("-l", "--loglevel"):
        argv += ["--loglevel", "INFO"]
    make_app(settings, role="worker").worker_main([*argv, *celery_args])


@cli.command()
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per key per line.")
@click.pass_context
def status(ctx: click.Context, /, keys: tuple[str, ...], as_json: bool) -> None:
    """Say where each queued KEY stands: queued, running, retrying, done (with its
    variants), failed (with the reason) or unknown (never queued, or forgotten and never
    made).

    Exit status: 0 when no key failed or is unknown, 1 otherwise.
    """
    from imgwarm.cli.report import summarize
    from imgwarm.pipeline.origin import Stores
    from imgwarm.workers.jobs import describe, job_status

    settings = _settings(ctx)
    stores = Stores.for_settings(settings)
    bad = 0
    for key in dict.fromkeys(keys):
        found = job_status(key, settings, stores)
        bad += found.state in ("failed", "unknown")
        if as_json:
            click.echo(describe(found))
        elif found.state == "done" and found.manifest is not None:
            click.echo(printable(f"{'done':9} {key}  {summarize(found.manifest)}"))
        elif found.error:
            click.echo(printable(f"{found.state:9} {found.error}"), err=found.state == "failed")
        else:
            click.echo(printable(f"{found.state:9} {key}"), err=found.state == "unknown")
    ctx.exit(EXIT_FAILED if bad else EXIT_OK)


@cli.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON instead of TOML.")
@click.pass_context
def config_(ctx: click.Context, as_json: bool) -> None:
    """Print the effective settings (TOML you can save as imgwarm.toml)."""
    from kombu.utils.url import maybe_sanitize_url

    settings = _settings(ctx)
    values = settings.model_dump(mode="json")
    for name in ("broker_url", "result_backend"):  # printed, logged, pasted: no passwords
        values[name] = maybe_sanitize_url(values[name])
    if as_json:
        click.echo(json.dumps(values, indent=2))
        return
    for name, value in values.items():
        info = Settings.model_fields[name]
        click.echo(f"# IMGWARM_{name.upper()}: {info.description}")
        click.echo(f"{name} = {json.dumps(value)}")


@cli.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
def samples(folder: Path) -> None:
    """Write a few synthetic sample photos into FOLDER (to try imgwarm on)."""
    from imgwarm.samples import write_samples

    for path in write_samples(folder):
        click.echo(str(path))


def main() -> None:
    try:
        cli.main(prog_name="imgwarm")
    except ImgwarmError as error:  # anything not tied to one source
        click.echo(printable(f"imgwarm: {error}"), err=True)
        sys.exit(EXIT_FAILED)
