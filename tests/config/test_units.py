"""Sizes and durations as people write them, and as an attacker might."""

from __future__ import annotations

import pytest

from imgwarm.config import load_settings
from imgwarm.config.units import Size, parse_duration, parse_size
from imgwarm.exceptions import SettingsError


def test_sizes_and_durations_people_write() -> None:
    assert parse_size("512K") == Size(bytes=512 << 10)
    assert parse_size("2GiB") == parse_size("2g") == Size(bytes=2 << 30)
    assert parse_size("300") == parse_size("300B") == Size(bytes=300)
    assert parse_size("80%") == Size(percent=80.0)
    assert parse_duration("24h") == 86400.0 and parse_duration("90") == 90.0


@pytest.mark.parametrize("text", [
    "2\u212a",  # the Kelvin sign, which a case-folding regex takes for K
    "1\u017f",  # the long s, which folds to s
    "\u0663",  # an Arabic-Indic three
    "9" * 400, "5i", "0%", "101%", "-1K", "1e9", "", " ", "1K;", "nan", "inf",
])
def test_hostile_sizes_are_one_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(text)
    with pytest.raises(SettingsError, match="ram_budget"):
        load_settings(ram_budget=text)


@pytest.mark.parametrize("text", ["1\u017f", "9" * 400, "0", "-5m", "1w", "nan"])
def test_hostile_durations_are_one_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)
    with pytest.raises(SettingsError, match="hot_half_life"):
        load_settings(hot_half_life=text)
