"""``imgwarm optimize`` and ``imgwarm samples``: making variants in this process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from imgwarm.cli import report
from imgwarm.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    check_keys,
    command,
    credit_options,
    given_credits,
    load,
)
from imgwarm.cli.setting import SettingOption


@command()
@click.argument("sources", nargs=-1, metavar="SOURCE...", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per source per line.")
@credit_options
@click.option("--widths", cls=SettingOption)
@click.option("--width-step-bytes", metavar="SIZE", cls=SettingOption)
@click.option("--max-widths", type=int, cls=SettingOption)
@click.option("--formats", cls=SettingOption)
@click.option("--webp-quality", metavar="Q|auto", cls=SettingOption)
@click.option("--jpeg-quality", metavar="Q|auto", cls=SettingOption)
@click.option("--avif-quality", metavar="Q|auto", cls=SettingOption)
@click.option("--quality-target", type=float, cls=SettingOption)
@click.option("--quality-tolerance", type=float, cls=SettingOption)
@click.option("--quality-check-width", type=int, metavar="PIXELS", cls=SettingOption)
@click.option("--report-quality", is_flag=True,
              help="After each source, a line a variant: its quality and, for auto, whether "
              "it was checked (with its SSIMULACRA2 score) or predicted (--json carries "
              "quality and score in each variant, and predicted where true).")
@click.option("--origin-root", type=click.Path(path_type=Path), cls=SettingOption)
@click.option("--manifest-root", type=click.Path(path_type=Path), cls=SettingOption)
@click.option("--max-pixels", type=int, cls=SettingOption)
@click.option("--max-bytes", metavar="SIZE", cls=SettingOption)
@click.option("--workers", type=int, cls=SettingOption)
@click.pass_context
def optimize(ctx: click.Context, /, sources: tuple[str, ...], as_json: bool,
             description: str | None, copyright_: str | None, artist: str | None,
             report_quality: bool, **options: Any) -> None:
    """Make the web variants of each SOURCE (image files, or folders searched recursively),
    in this process.

    With IMGWARM_ORIGIN=s3, each SOURCE is instead the key of an original in the bucket, and
    variants and manifests go to the bucket.

    Exit status: 0 when every source succeeded, 1 when any failed (the others are still
    done), 2 for usage errors. A failed source leaves no file behind. Running again on the
    same sources with the same settings writes nothing new.
    """
    from imgwarm.pipeline.isolate import prestart

    if sources:  # the workers start while the settings load and the sources are listed
        wanted = options.get("workers") or _workers_from_env() or os.cpu_count() or 1
        if not any(os.path.isdir(source) for source in sources):  # no more than the files
            wanted = min(wanted, len(sources))
        prestart(max(1, min(wanted, _prestart_most(ctx.obj.get("config")))))
    from imgwarm.pipeline.batch import collect_sources, run_batch, run_keys

    settings = load(ctx, **options)
    if not sources:
        raise click.UsageError(
            "no SOURCE given: name image files or folders "
            "(`imgwarm samples DIR` makes sample photos to try)"
        )
    credits = given_credits(description, copyright_, artist)
    store = settings.store
    if store.origin == "s3":
        keys = list(dict.fromkeys(sources))
        check_keys(keys)
        results = run_keys(keys, settings, credits)
        count, where = len(keys), f"s3://{store.s3_bucket}/{store.s3_prefix}"
    else:
        paths = collect_sources(sources, skip=[store.origin_root, store.manifest_root])
        if not paths:
            raise click.UsageError(f"no image files found in {', '.join(sources)}")
        results = run_batch(paths, settings, credits)
        count, where = len(paths), str(store.origin_root)
    from imgwarm.events.out import Outbox, told
    from imgwarm.store import local_key

    # each source told to the events stream as it ends, when events_redis_url is set
    outbox = Outbox(settings, explicit_only=True)
    results = told(results, outbox, str if store.origin == "s3" else
                   lambda source: local_key(Path(source)))
    failed = report.show(results, count, as_json, "optimizing", qualities=report_quality)
    if not as_json:
        click.echo(f"{count} source(s): {count - failed} ok, {failed} failed; "
                   f"variants in {where}", err=True)
    ctx.exit(EXIT_FAILED if failed else EXIT_OK)


# ImageSettings().memory_workers(), known before pydantic loads (a test checks they agree)
PRESTART_MOST = 11


def _prestart_most(config: str | os.PathLike[str] | None) -> int:
    """Workers to start ahead: what the default max_memory holds; one when max_memory is set
    (the others start once the settings say how many it holds: never more, even a moment)."""
    if os.environ.get("IMGWARM_MAX_MEMORY"):
        return 1
    # (where load_settings finds its file: --config, IMGWARM_CONFIG, ./imgwarm.toml)
    path = config or os.environ.get("IMGWARM_CONFIG") or "imgwarm.toml"
    try:
        if os.path.isfile(path) and b"max_memory" in Path(path).read_bytes():
            return 1
    except OSError:
        return 1  # (the settings will say what is wrong with it)
    return PRESTART_MOST


def _workers_from_env() -> int | None:
    """IMGWARM_WORKERS before the settings load, to start that many workers ahead (the
    settings check it; a config file's value is found then, and extra workers stopped)."""
    given = os.environ.get("IMGWARM_WORKERS", "").strip()
    return int(given) if given.isascii() and given.isdigit() and 0 < int(given) <= 256 else None


@command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
def samples(folder: Path) -> None:
    """Write a few synthetic sample photos into FOLDER (to try imgwarm on)."""
    from imgwarm.samples import write_samples

    for path in write_samples(folder):
        click.echo(str(path))
