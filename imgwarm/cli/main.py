"""``imgwarm`` and its commands."""

from __future__ import annotations

import json
import logging
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import click

from imgwarm.cli import report
from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import ImgwarmError, SettingsError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _settings(ctx: click.Context, **overrides: Any) -> Settings:
    try:
        return load_settings(ctx.obj.get("config"), **overrides)
    except SettingsError as error:
        raise click.UsageError(str(error)) from None


def _quiet_libvips(workers: int) -> None:
    """libvips logs every warning it survives; we report errors ourselves. One libvips thread
    per worker keeps (workers x threads) within the cores; no operation cache saves memory."""
    import pyvips

    logging.getLogger("pyvips").setLevel(logging.CRITICAL)
    pyvips.cache_set_max(0)
    if workers > 1:
        pyvips.concurrency_set(1)


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
    """Make the web variants of each SOURCE (image files, or folders searched recursively).

    Exit status: 0 when every source succeeded, 1 when any failed (the others are still
    done), 2 for usage errors. A failed source leaves no file behind. Running again on the
    same sources with the same settings writes nothing new.
    """
    from imgwarm.pipeline.batch import batch_workers, collect_sources
    from imgwarm.pipeline.metadata import Credits

    settings = _settings(ctx, **options)
    if not sources:
        raise click.UsageError(
            "no SOURCE given: name image files or folders "
            "(`imgwarm samples DIR` makes sample photos to try)"
        )
    paths = collect_sources(sources, skip=[settings.origin_root, settings.manifest_root])
    if not paths:
        raise click.UsageError(f"no image files found in {', '.join(sources)}")
    _quiet_libvips(batch_workers(settings, len(paths)))
    credits = Credits.given(description=description, copyright=copyright_, artist=artist)
    failed = _run(paths, settings, credits, as_json)
    if not as_json:
        click.echo(f"{len(paths)} source(s): {len(paths) - failed} ok, {failed} failed; "
                   f"variants in {settings.origin_root}", err=True)
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


def _progress_bar() -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress("{task.description}", BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=True,
                    redirect_stdout=False, redirect_stderr=False)


def _run(paths: list[Path], settings: Settings, credits: Any, as_json: bool) -> int:
    """Process the batch; results go to stdout, failures to stderr, the bar (on a terminal,
    for several sources) to stderr. Returns how many sources failed."""
    from imgwarm.pipeline.batch import run_batch

    show_bar = not as_json and sys.stderr.isatty() and len(paths) > 1
    progress = _progress_bar() if show_bar else None  # rich is imported only for a TTY
    failed = 0

    def emit(line: str, err: bool) -> None:
        stream = sys.stderr if err else sys.stdout
        if progress is not None and stream.isatty():  # above the bar, on the same terminal
            progress.console.print(line, markup=False, highlight=False, emoji=False)
        else:
            click.echo(line, err=err)

    with progress if progress is not None else nullcontext():
        task = progress.add_task("optimizing", total=len(paths)) if progress else None
        for result in run_batch(paths, settings, credits):
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
    from imgwarm.pipeline.optimize import Stores, local_key

    manifests = Stores.local(_settings(ctx, manifest_root=manifest_root)).manifests
    missing = 0
    for source in sources:
        manifest = manifests.get(local_key(Path(source))) or manifests.get(source)
        if manifest is None:
            missing += 1
            click.echo(f"{source}: no manifest (not optimized yet, or another manifest root)",
                       err=True)
        elif as_json:
            click.echo(manifest.model_dump_json())
        else:
            click.echo(manifest.to_json(), nl=False)
    ctx.exit(EXIT_FAILED if missing else EXIT_OK)


@cli.command("config")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON instead of TOML.")
@click.pass_context
def config_(ctx: click.Context, as_json: bool) -> None:
    """Print the effective settings (TOML you can save as imgwarm.toml)."""
    settings = _settings(ctx)
    values = settings.model_dump(mode="json")
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
        click.echo(f"imgwarm: {error}", err=True)
        sys.exit(EXIT_FAILED)
