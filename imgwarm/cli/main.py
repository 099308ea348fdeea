"""``imgwarm``: the command group, its commands (one module per group of them), and ``main``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from imgwarm.cli import (
    bucket,
    cache,
    events,
    events_out,
    health,
    inspect,
    lifecycle,
    make,
    queue,
    serve,
    watch,
)


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


for command in (make.optimize, inspect.show, queue.enqueue, queue.worker, queue.status,
                cache.warm, serve.nginx, serve.picture, serve.gallery, serve.serve,
                inspect.config_, make.samples, health.health, lifecycle.delete,
                lifecycle.gc, lifecycle.fsck, bucket.bucket, events.listen, watch.watch,
                events_out.notify):
    cli.add_command(command)


def main() -> None:
    for stream in (sys.stdout, sys.stderr):  # a terminal that is not UTF-8 gets escapes
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    cli.main(prog_name="imgwarm")  # errors end each command in one place: common.Command
