"""The Settings root: its groups, where values come from, and the errors that name them.

Groups are internal: every setting keeps one flat public name, used alike as the TOML key, the
keyword of ``load_settings`` and of every ``imgwarm`` call's ``**options`` and, upper-cased
after ``IMGWARM_``, the environment variable (``webp_quality``, ``IMGWARM_WEBP_QUALITY``). A
subsystem takes its group (``settings.image``, ``settings.store``...); a new subsystem adds a
group here.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tomllib
import typing
from pathlib import Path
from typing import Any, ClassVar

from pydantic import ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from imgwarm.config.cache import CacheSettings
from imgwarm.config.events import EventsSettings
from imgwarm.config.group import ABSENT, Group
from imgwarm.config.image import ImageSettings
from imgwarm.config.marks import Affects, marked
from imgwarm.config.queue import QueueSettings
from imgwarm.config.store import StoreSettings
from imgwarm.config.units import shown
from imgwarm.exceptions import SettingsError
from imgwarm.nesting import check_nesting

ENV_PREFIX = "IMGWARM_"
DEFAULT_CONFIG_FILE = Path("imgwarm.toml")
SETTINGS_DEPTH = 8  # a config file needs 2: a group's table, a list
GROUPS: dict[str, type[Group]] = {
    "image": ImageSettings, "store": StoreSettings, "queue": QueueSettings,
    "cache": CacheSettings, "events": EventsSettings,
}


def group_of(name: str) -> str | None:
    """The group a public setting name belongs to."""
    return next((g for g, model in GROUPS.items() if name in model.model_fields), None)


def nest(flat: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """Flat public names -> {group: {name: value}}; an unknown name is a SettingsError."""
    nested: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        group = group_of(name)
        if group is None:
            raise SettingsError(f"unknown setting {name!r} ({where})")
        nested.setdefault(group, {})[name] = value
    return nested


class _FlatEnvironment(PydanticBaseSettingsSource):
    """``IMGWARM_<NAME>`` for every setting of every group."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads everything at once

    def __call__(self) -> dict[str, Any]:
        flat = {name: os.environ[f"{ENV_PREFIX}{name.upper()}"]
                for model in GROUPS.values() for name in model.model_fields
                if f"{ENV_PREFIX}{name.upper()}" in os.environ}
        return nest(flat, "environment")


class _FlatToml(PydanticBaseSettingsSource):
    """The TOML file: flat ``name = value`` lines, as ``imgwarm config`` prints them."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self.path = path

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if self.path is None:
            return {}
        try:
            raw = self.path.read_bytes()
            check_nesting(raw, SETTINGS_DEPTH)
            flat = tomllib.loads(raw.decode("utf-8"))
        except (OSError, ValueError) as error:  # (TOMLDecodeError, TooDeep, UnicodeError)
            raise SettingsError(f"config file {self.path}: {error}") from None
        return nest(flat, f"config file {self.path}")


class Settings(BaseSettings):
    """Everything imgwarm can be told, in groups. Loaded once at an entry point
    (``load_settings``) and passed down."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, validate_default=True)
    config_file: ClassVar[Path | None] = None  # set on a subclass by load_settings

    image: ImageSettings = ImageSettings()
    store: StoreSettings = StoreSettings()
    queue: QueueSettings = QueueSettings()
    cache: CacheSettings = CacheSettings()
    events: EventsSettings = EventsSettings()

    @model_validator(mode="after")
    def _webhook_is_signed(self) -> Settings:
        if self.events.notify_url and not self.events.notify_secret:
            raise ValueError("notify_url needs notify_secret (IMGWARM_NOTIFY_SECRET): every "
                             "webhook is signed")
        return self

    @model_validator(mode="after")
    def _shards_fit_the_hash(self) -> Settings:
        # Shard folders come from the hash in the file name, so anyone can check them.
        bits = ((self.store.max_dir_entries - 1).bit_length() - 1) * self.store.shard_levels
        if bits > 4 * self.image.hash_length:
            raise ValueError(
                f"shard_levels={self.store.shard_levels} with max_dir_entries="
                f"{self.store.max_dir_entries} needs {bits} bits of hash; hash_length="
                f"{self.image.hash_length} gives {4 * self.image.hash_length}: raise "
                "hash_length or lower shard_levels")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # First wins: explicit overrides, environment, then the TOML file if one is set.
        path = getattr(settings_cls, "config_file", None)
        return init_settings, _FlatEnvironment(settings_cls), _FlatToml(settings_cls, path)

    def flat(self) -> dict[str, Any]:
        """Every setting by its public name (JSON-able values), in group order."""
        return {name: value for group in GROUPS
                for name, value in getattr(self, group).model_dump(mode="json").items()}

    def updated(self, **changes: Any) -> Settings:
        """These settings with some changed (public names), validated again."""
        return _validated(type(self), nest({**self.flat(), **changes}, "an option"))

    def digest(self, *kinds: Affects) -> str:
        """A fingerprint of every setting marked as affecting one of ``kinds``."""
        return _fingerprint(self._marked(*kinds))

    def digests(self, *kinds: Affects) -> list[str]:
        """``digest(*kinds)`` first, then the digests these settings had under every earlier
        version's defaults of the settings now at their default (a group's EARLIER_DEFAULTS):
        what was made with the defaults of its day is not made again because a default
        changed, unless remake_earlier_defaults says so."""
        values = self._marked(*kinds)
        found = [_fingerprint(values)]
        if self.image.remake_earlier_defaults:
            return found
        earlier: dict[str, tuple[Any, ...]] = {}
        for group in GROUPS.values():
            for name, before in group.EARLIER_DEFAULTS.items():
                if name in values and values[name] == group.model_fields[name].default:
                    earlier[name] = (values[name], *before)
        for choice in itertools.product(*earlier.values()):
            then = {**values, **dict(zip(earlier, choice, strict=True))}
            digest = _fingerprint({k: v for k, v in then.items() if v is not ABSENT})
            if digest not in found:
                found.append(digest)
        return found

    def _marked(self, *kinds: Affects) -> dict[str, Any]:
        return {name: value for group in GROUPS
                for name, value in marked(getattr(self, group), *kinds).items()}


def _fingerprint(values: dict[str, Any]) -> str:
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_field(name: str) -> FieldInfo | None:
    group = group_of(name)
    return GROUPS[group].model_fields[name] if group else None


_RANGE_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _unit(info: FieldInfo) -> Any:
    """The unit type of a field (Size, Duration, Budget...: they say their forms), or None."""
    types = typing.get_args(info.annotation) or (info.annotation,)
    return next((t for t in types if hasattr(t, "forms")), None)


def _allowed(info: FieldInfo, *, forms: bool = True) -> str:
    """The allowed range of a field, from its constraints, in its unit, for error messages
    (``; allowed: 64M or more``); a field with a unit also says the forms it is written in,
    unless ``forms`` is false (the error said them)."""
    unit = _unit(info)
    shown = getattr(unit, "text", str)
    low = high = None
    above = False
    for meta in info.metadata:
        if getattr(meta, "gt", None) is not None:
            low, above = meta.gt, True
        if getattr(meta, "ge", None) is not None:
            low, above = meta.ge, False
        high = getattr(meta, "le", high)
    written = f" ({unit.forms})" if unit is not None and forms else ""
    if low is not None and high is not None:
        span = f"above {shown(low)}, at most {shown(high)}" if above else \
            f"{shown(low)}..{shown(high)}"
        return f"; allowed: {span}{written}"
    if low is not None:
        return f"; allowed: {f'above {shown(low)}' if above else f'{shown(low)} or more'}{written}"
    if unit is not None:
        return f"; allowed: {unit.forms}" if forms else ""
    return f"; {info.description}" if info.description else ""


def _describe(error: ValidationError) -> str:
    """A line a setting that is wrong: its name, its variable, what was given, why, and what
    is allowed (most often one line: one wrong setting)."""
    lines = []
    for item in error.errors():
        detail = str(item["msg"]).removeprefix("Value error, ")
        names = [str(part) for part in item["loc"] if isinstance(part, str)]
        info = describe_field(names[-1]) if names else None
        if info is None:  # a rule about several settings together
            lines.append(f"invalid settings: {detail}")
            continue
        unit = _unit(info) is not None
        if unit and item["type"] in _RANGE_ERRORS:
            detail = "out of range"  # pydantic's bound is in bytes or seconds: _allowed says
        name = names[-1]
        lines.append(
            f"invalid setting {name} = {shown(item.get('input'))} (from an option, "
            f"{ENV_PREFIX}{name.upper()} or the config file): {detail}"
            f"{_allowed(info, forms=not (unit and item['type'] == 'value_error'))}"
        )
    return "\n".join(dict.fromkeys(lines))


def _validated(cls: type[Settings], nested: dict[str, Any]) -> Settings:
    try:
        return cls(**nested)
    except ValidationError as error:
        raise SettingsError(_describe(error)) from None


def _config_file(config_file: Path | None) -> Path | None:
    if config_file is not None:
        if not config_file.is_file():
            raise SettingsError(f"config file {config_file} does not exist")
        return config_file
    env_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
    if env_file:
        return _config_file(Path(env_file))
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from defaults, file, environment and overrides (public names; None
    overrides are unset). Raises SettingsError naming the setting and its allowed range."""
    given = {k: v for k, v in overrides.items() if v is not None}
    path = _config_file(config_file)
    cls: type[Settings] = Settings
    if path is not None:
        cls = type("Settings", (Settings,), {"config_file": path})
    return _validated(cls, nest(given, "an option"))
