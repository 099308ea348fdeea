"""The base of every settings group: a true or false where a setting takes no boolean is
refused by the setting's name (pydantic's lax mode would take a TOML ``widths = [true]`` for
width 1, and ``workers = true`` for one worker)."""

from __future__ import annotations

import typing
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationInfo, field_validator


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's type has bool anywhere in it (``bool``, ``bool | None``...)."""
    return annotation is bool or any(_takes_bool(a) for a in typing.get_args(annotation))


def _holds_bool(value: Any) -> bool:
    return isinstance(value, bool) or (
        isinstance(value, list | tuple) and any(isinstance(v, bool) for v in value))


# An earlier default of a setting that did not exist then (its digest did not hold it).
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()


class Group(BaseModel):
    """A group of settings (``image``, ``store``...)."""

    # The defaults earlier versions had, by setting (oldest first): a manifest made with one
    # of them while the setting is now at its default is still current (Settings.digests).
    EARLIER_DEFAULTS: ClassVar[dict[str, tuple[Any, ...]]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool(cls, value: Any, info: ValidationInfo) -> Any:
        # (strings from the environment and options are untouched: "640" is still 640)
        name = info.field_name
        if name is not None and _holds_bool(value) and \
                not _takes_bool(cls.model_fields[name].annotation):
            raise ValueError("true or false is not a value of this setting")
        return value
