"""Options that set a setting: their help is the setting's own description and default, read
from its Field (imgwarm/config) when help is shown, so each setting is described once.

Light on purpose: pydantic is imported only when a command's help is printed, never when
``imgwarm --help`` lists the commands. The settings page of the docs renders defaults with
``shown_default`` too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo


def shown_default(info: FieldInfo) -> str:
    """A setting's default as one would write it in its ``IMGWARM_*`` variable ("" for none)."""
    value = info.get_default(call_default_factory=True)
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        text = ",".join(str(item) for item in value)
    elif isinstance(value, Path):
        text = str(value)
    else:
        text = str(value)
    # a default made from the running user's id (the RAM root) is shown for any user
    return text.replace(f"imgwarm-{os.geteuid()}", "imgwarm-<uid>")


def setting_help(name: str) -> str:
    """The help of an option that sets ``name``: the Field's description and its default."""
    from imgwarm.config import describe_field

    info = describe_field(name)
    if info is None:  # a setting renamed without its option: say so rather than fail --help
        return f"The {name} setting."
    default = shown_default(info)
    return f"{info.description or ''} [setting {name}; default: {default or 'none'}]"


class SettingOption(click.Option):
    """``@click.option("--webp-quality", cls=SettingOption)``: a setting as an option. Its help
    comes from the setting (``setting=`` names it when the option's own name differs)."""

    def __init__(self, *args: Any, setting: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setting = setting or self.name or ""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        if self.help is None:
            self.help = setting_help(self.setting)
        return super().get_help_record(ctx)
