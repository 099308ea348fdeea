"""``imgwarm show`` and ``imgwarm config``: what was made, and what imgwarm is told."""

from __future__ import annotations

import json
from pathlib import Path

import click

from imgwarm.cli.common import EXIT_FAILED, EXIT_OK, command, json_text, load
from imgwarm.cli.setting import SettingOption
from imgwarm.text import printable


@command()
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@click.option("--json", "as_json", is_flag=True, help="One compact JSON object per line.")
@click.option("--manifest-root", type=click.Path(path_type=Path), cls=SettingOption)
@click.pass_context
def show(ctx: click.Context, /, sources: tuple[str, ...], as_json: bool,
         manifest_root: Path | None) -> None:
    """Print the manifest of each SOURCE: a file that was optimized (by its path, even if it
    has moved since), or a manifest key. Exit status 1 if any has none."""
    from imgwarm.store import Stores, local_key
    from imgwarm.store.format import READ

    stores = Stores.for_settings(load(ctx, manifest_root=manifest_root).store)
    stores.check(READ)  # a store this code may not read: one line, not one a source
    manifests = stores.manifests
    missing = 0
    for source in sources:
        manifest = manifests.get(local_key(Path(source))) or manifests.get(source)
        if manifest is None:
            missing += 1
            click.echo(printable(f"{source}: no manifest (not optimized yet, or another "
                                 "manifest root)"), err=True)
        elif as_json:
            click.echo(json_text(manifest.model_dump()))
        else:
            click.echo(manifest.to_json(), nl=False)
    ctx.exit(EXIT_FAILED if missing else EXIT_OK)


@command("config")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON instead of TOML.")
@click.pass_context
def config_(ctx: click.Context, as_json: bool) -> None:
    """Print the effective settings (TOML you can save as imgwarm.toml)."""
    from imgwarm.config import describe_field, masked_url

    values = load(ctx).flat()
    for name in ("broker_url", "result_backend"):  # printed, logged, pasted: no passwords
        values[name] = masked_url(values[name])
    if as_json:
        click.echo(json.dumps(values, indent=2))
        return
    for name, value in values.items():
        info = describe_field(name)
        click.echo(f"# IMGWARM_{name.upper()}: {info.description if info else ''}")
        # TOML has no null: a setting that is not set stays a comment
        click.echo(f"# {name} = (not set)" if value is None else f"{name} = {json.dumps(value)}")
