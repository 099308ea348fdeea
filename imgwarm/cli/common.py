"""What every command shares: exit codes, loading settings, given text, errors as usage errors.

Light on purpose: pydantic and the rest are imported when a command runs, not when ``imgwarm
--help`` lists the commands.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from imgwarm.config import Settings
    from imgwarm.manifest import Credits

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def json_text(value: Any) -> str:
    """One JSON line for stdout: UTF-8 text, or ASCII with escapes where stdout is not UTF-8
    (so a script always reads valid JSON, and the run never dies on a character)."""
    from imgwarm.manifest import to_json

    encoding = (sys.stdout.encoding or "").lower().replace("-", "").replace("_", "")
    return to_json(value, ascii_only=encoding != "utf8")


def load(ctx: click.Context, **overrides: Any) -> Settings:
    """The settings (--config file, IMGWARM_*, these options), or a usage error naming the
    setting that is wrong."""
    from imgwarm.config import load_settings
    from imgwarm.exceptions import SettingsError

    try:
        return load_settings(ctx.obj.get("config"), **overrides)
    except SettingsError as error:
        raise click.UsageError(str(error)) from None


def given_credits(description: str | None, copyright_: str | None,
                  artist: str | None) -> Credits:
    """The given EXIF text, or a usage error naming the option that cannot be used."""
    from imgwarm.exceptions import SettingsError
    from imgwarm.manifest import Credits

    try:
        return Credits.given(description=description, copyright=copyright_, artist=artist)
    except SettingsError as error:
        raise click.UsageError(str(error)) from None


def credit_options(command: Any) -> Any:
    """--description, --copyright and --artist, as optimize and enqueue take them."""
    for option in reversed([
        click.option("--description", help="EXIF ImageDescription for every output (else the "
                     "source's). Plain text on one line."),
        click.option("--copyright", "copyright_", metavar="TEXT",
                     help="EXIF Copyright for every output (else the source's)."),
        click.option("--artist", help="EXIF Artist for every output (else the source's)."),
    ]):
        command = option(command)
    return command


def check_keys(keys: list[str]) -> None:
    """Origin keys, each checked before any is used: a usage error names the first unsafe."""
    from imgwarm.exceptions import LayoutError
    from imgwarm.store import check_source_key

    try:
        for key in keys:
            check_source_key(key)
    except LayoutError as error:
        raise click.UsageError(str(error)) from None
