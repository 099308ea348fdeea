"""What every command shares: the one place errors become exit codes, loading settings,
given text.

Every command is a ``Command`` (``@command()``): an ImgwarmError that ends it is shown as one
line and ends the process with the error class's exit code (imgwarm/exceptions.py: 2 for what
the user gave, with the usage; 1 for work that failed). Commands that go on after a failure (a
batch of sources, of keys) show each with ``failure_line``.

Light on purpose: pydantic and the rest are imported when a command runs, not when ``imgwarm
--help`` lists the commands.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click

from imgwarm.exceptions import EXIT_FAILED, EXIT_USAGE, FormatTooNew, ImgwarmError
from imgwarm.text import printable

if TYPE_CHECKING:
    from imgwarm.config import Settings
    from imgwarm.manifest import Credits

EXIT_OK = 0
__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "Command", "check_keys", "command",
           "credit_options", "end", "failure_line", "given_credits", "json_text", "load"]


def failure_line(command: str, error: ImgwarmError) -> str:
    """``warm FAILED: <the error's line>``: a command, or one item of a batch, that failed;
    one line whatever the message holds (a file name may hold anything)."""
    return printable(f"{command} FAILED: {error}")


def end(error: ImgwarmError, ctx: click.Context) -> NoReturn:
    """The one mapping from a domain error to how a command ends: with the class's exit code
    (imgwarm/exceptions.py), after its line on stderr; a usage error (2) shows the command's
    usage first, as click does for a wrong option (but for a store or index too new: its one
    line alone, the command was not used wrongly)."""
    if error.exit_code == EXIT_USAGE and not isinstance(error, FormatTooNew):
        # a line a setting that is wrong (several may be), each printable
        message = "\n".join(printable(line) for line in str(error).splitlines())
        raise click.UsageError(message, ctx)
    click.echo(failure_line(ctx.info_name or "imgwarm", error), err=True)
    raise click.exceptions.Exit(error.exit_code)


class Command(click.Command):
    """An imgwarm command: an ImgwarmError that ends it ends it through ``end``."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ImgwarmError as error:
            end(error, ctx)


def command(name: str | None = None, **attrs: Any) -> Callable[[Callable[..., Any]], Command]:
    """``click.command`` for an imgwarm command (a ``Command``)."""
    made: Callable[[Callable[..., Any]], Command] = click.command(name, cls=Command, **attrs)
    return made


def json_text(value: Any) -> str:
    """One JSON line for stdout: UTF-8 text, or ASCII with escapes where stdout is not UTF-8
    (so a script always reads valid JSON, and the run never dies on a character)."""
    from imgwarm.manifest import to_json

    encoding = (sys.stdout.encoding or "").lower().replace("-", "").replace("_", "")
    return to_json(value, ascii_only=encoding != "utf8")


def load(ctx: click.Context, **overrides: Any) -> Settings:
    """The settings (--config file, IMGWARM_*, these options); SettingsError naming the
    setting that is wrong."""
    from imgwarm.config import load_settings

    return load_settings(ctx.obj.get("config"), **overrides)


def given_credits(description: str | None, copyright_: str | None,
                  artist: str | None) -> Credits:
    """The given EXIF text; SettingsError naming the one that cannot be used."""
    from imgwarm.manifest import Credits

    return Credits.given(description=description, copyright=copyright_, artist=artist)


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
    """Origin keys, each checked before any is used: LayoutError names the first unsafe."""
    from imgwarm.store import check_source_key

    for key in keys:
        check_source_key(key)
