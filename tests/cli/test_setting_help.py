"""An option that sets a setting is described by the setting's Field alone: one description,
one default, shown by --help and by the docs' command line page alike."""

from __future__ import annotations

import re
from collections.abc import Iterator

import click

from imgwarm.cli.main import cli
from imgwarm.cli.setting import SettingOption, shown_default
from imgwarm.config import GROUPS, describe_field


def setting_options() -> Iterator[tuple[click.Command, SettingOption]]:
    for command in cli.commands.values():
        for param in command.params:
            if isinstance(param, SettingOption):
                yield command, param


def test_each_setting_option_shows_its_fields_description_and_default() -> None:
    found = list(setting_options())
    assert len(found) >= 15  # optimize's, show's, warm's, nginx's
    for command, option in found:
        info = describe_field(option.setting)
        assert info is not None, f"{command.name} {option.opts[0]}: no setting {option.setting}"
        record = option.get_help_record(click.Context(command, info_name=command.name))
        assert record is not None
        assert info.description and info.description in record[1]
        assert f"default: {shown_default(info) or 'none'}" in record[1]


def test_no_other_option_repeats_a_settings_default() -> None:
    """Help that says "(default 80)" of a setting would drift from the Field: options that are
    settings carry no help text of their own."""
    settings = {name for model in GROUPS.values() for name in model.model_fields}
    for command in cli.commands.values():
        for param in command.params:
            if not isinstance(param, click.Option) or isinstance(param, SettingOption):
                continue
            if param.name in settings:
                assert not re.search(r"\(default[: ]", param.help or ""), \
                    f"{command.name} {param.opts[0]}: declare it with cls=SettingOption"


def test_a_users_ram_root_is_shown_for_any_user() -> None:
    info = describe_field("ram_root")
    assert info is not None
    assert shown_default(info) == "/dev/shm/imgwarm-<uid>/ram"
