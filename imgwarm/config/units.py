"""Sizes and durations as people write them, parsed once, where a setting is validated.

- ``Size``: a number of bytes (an int): ``4096``, ``512K``, ``300M``, ``2G`` (K = 1024; ``B``,
  ``KB`` and ``KiB`` alike).
- ``Duration``: a length of time in seconds (a float): ``90``, ``30s``, ``10m``, ``24h``, ``7d``.
- ``Budget``: a size, or a share of a file system (``80%``), for a tier's budget.

Each is a pydantic type: a setting declared with one holds the parsed value, and a value that
is none of the forms is refused with the forms named (settings.py adds the setting's name).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

# ASCII only (re.ASCII: no other digits, no case folding of the Kelvin sign into K), at most
# 15 digits: a size or duration that fits a float exactly.
_NUMBER = r"([0-9]{1,15}(?:\.[0-9]{1,6})?)"
_SIZE = re.compile(rf"^\s*{_NUMBER}\s*(?:([KMGT])(?:i?B)?|B?)\s*$", re.IGNORECASE | re.ASCII)
_PERCENT = re.compile(rf"^\s*{_NUMBER}\s*%\s*$", re.ASCII)
_DURATION = re.compile(rf"^\s*{_NUMBER}\s*(s|m|h|d)?\s*$", re.IGNORECASE | re.ASCII)
_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SIZE = 1 << 60  # 1 EiB: more than any disk or memory; a bigger size is a typo
MAX_SECONDS = 100 * 365 * 86400.0  # a century: a longer time is a typo
SIZE_FORMS = "bytes, or a number with K, M, G or T (K = 1024): 4096, 512K, 64M, 2G"
DURATION_FORMS = "seconds, or a number with s, m, h or d: 90, 30s, 10m, 24h, 7d"
BUDGET_FORMS = f"{SIZE_FORMS}; or a percentage of the file system (1%..100%)"


def _number(value: Any) -> float | None:
    """A number given as a number (TOML, Python), not as text; None for text (an int too
    big for a float: infinity, refused as out of range)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def shown(value: Any) -> str:
    """A given value for a message: its repr, cut (a 5,000-character value is not echoed)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def parse_size(value: str | int) -> int:
    """``2G`` -> 2 GiB in bytes; an int is bytes already; a whole number of bytes, at most
    MAX_SIZE. ValueError names the forms."""
    size: Fraction | None = None
    number = _number(value)
    if number is not None:
        if math.isfinite(number):
            size = Fraction(value)
    elif isinstance(value, str):
        found = _SIZE.match(value)
        if found:  # exact: no float rounding of 15 digits times 2**40
            size = Fraction(found.group(1)) * _FACTORS[(found.group(2) or "").upper()]
    if size is not None and size.denominator == 1 and 0 <= size <= MAX_SIZE:
        return int(size)
    raise ValueError(f"{shown(value)} is not a size: give {SIZE_FORMS} (whole bytes, "
                     "at most 1 EiB)")


def parse_duration(value: str | float, *, zero: bool = False) -> float:
    """``24h`` -> 86400.0 seconds; a bare number is seconds. Zero only where ``zero`` (a grace
    period may be none; a setting's own bounds say whether it may). ValueError names the
    forms."""
    number = _number(value)
    if number is None and isinstance(value, str):
        found = _DURATION.match(value)
        if found:
            number = float(found.group(1)) * _SECONDS[(found.group(2) or "s").lower()]
    if number is None or not 0 <= number <= MAX_SECONDS or (number == 0 and not zero):
        raise ValueError(f"{shown(value)} is not a duration: give {DURATION_FORMS} (at most "
                         "a century)")
    return number


def size_text(size: float) -> str:
    """Bytes as people write them: the largest unit that divides them (``64M``), else bytes."""
    for unit in "TGMK":
        if size and size % _FACTORS[unit] == 0:
            return f"{int(size // _FACTORS[unit])}{unit}"
    return f"{size:g}"


def duration_text(seconds: float) -> str:
    """Seconds as people write them: ``7d``, ``36h``, ``10m``, ``90s``."""
    for unit in "dhm":
        if seconds and seconds % _SECONDS[unit] == 0:
            return f"{int(seconds // _SECONDS[unit])}{unit}"
    return f"{seconds:g}s"


class Size(int):
    """A number of bytes: 4096, 512K, 64M or 2G (K = 1024)."""

    forms = SIZE_FORMS

    def __new__(cls, value: str | int) -> Size:
        """``Size("64M")``: a default, written as people write it (and shown so)."""
        return super().__new__(cls, parse_size(value))

    def __str__(self) -> str:
        return size_text(self)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(parse_size, core_schema.int_schema())

    @staticmethod
    def text(value: float) -> str:
        return size_text(value)


class Duration(float):
    """A length of time in seconds: 90, 30s, 10m, 24h or 7d."""

    forms = DURATION_FORMS

    def __new__(cls, value: str | float) -> Duration:
        """``Duration("24h")``: a default, written as people write it (and shown so)."""
        return super().__new__(cls, parse_duration(value, zero=True))

    def __str__(self) -> str:
        return duration_text(self)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(
            lambda value: parse_duration(value, zero=True), core_schema.float_schema())

    @staticmethod
    def text(value: float) -> str:
        return duration_text(value)


def parse_mebibytes(value: str | int) -> int:
    """Mebibytes: a bare number is MiB (as the setting's name says), a size with its unit
    (``512M``, ``2G``) is converted. ValueError names the forms."""
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,15}\s*", value, re.ASCII):
        return int(value)
    try:
        if _number(value) is not None:
            return parse_size(value)
        size = parse_size(value)
        if size % (1 << 20) == 0:  # a whole number of MiB, not 5K taken for 0
            return size >> 20
    except ValueError:
        pass
    raise ValueError(f"{shown(value)} is not a size: give MiB, or a whole number of them "
                     "with M, G or T: 1024, 512M, 2G")


class Mebibytes(int):
    """A number of MiB: 1024, or a size with its unit: 512M, 2G."""

    forms = "MiB, or a number with M, G or T: 1024, 512M, 2G"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(parse_mebibytes,
                                                             core_schema.int_schema())

    @staticmethod
    def text(value: float) -> str:
        return f"{value:g}"


@dataclass(frozen=True)
class Budget:
    """A size (512K, 300M, 2G) or a percentage of the file system (80%)."""

    bytes: int | None = None
    percent: float | None = None
    forms = BUDGET_FORMS

    def of(self, total: int) -> int:
        """The bytes this stands for, on a file system of ``total`` bytes."""
        return self.bytes if self.bytes is not None else int(total * (self.percent or 0) / 100)

    def __str__(self) -> str:
        return f"{self.percent:g}%" if self.percent is not None else size_text(self.bytes or 0)

    def plain(self) -> int | str:
        """As JSON and TOML hold it: the bytes, or the percentage as text."""
        return self.bytes if self.bytes is not None else str(self)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            parse_budget, serialization=core_schema.plain_serializer_function_ser_schema(
                lambda budget: budget.plain(), when_used="json"))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"anyOf": [{"type": "integer"}, {"type": "string"}]}


def parse_budget(value: Any) -> Budget:
    """``2G`` -> 2 GiB; ``80%`` -> a share. ValueError names the forms."""
    if isinstance(value, Budget):
        return value
    if isinstance(value, str):
        found = _PERCENT.match(value)
        if found:
            if 0 < float(found.group(1)) <= 100:
                return Budget(percent=float(found.group(1)))
            raise ValueError(f"{shown(value)} is not a size: give {BUDGET_FORMS}")
    try:
        return Budget(bytes=parse_size(value))
    except ValueError:
        raise ValueError(f"{shown(value)} is not a size: give {BUDGET_FORMS}") from None
