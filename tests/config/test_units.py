"""Sizes and durations as people write them, and as an attacker might: parsed once, into
bytes and seconds, by every size and every duration setting alike."""

from __future__ import annotations

from typing import Any

import pytest

from imgwarm.config import GROUPS, load_settings
from imgwarm.config.units import (
    Budget,
    Duration,
    Mebibytes,
    Size,
    parse_budget,
    parse_duration,
    parse_size,
)
from imgwarm.exceptions import SettingsError


def settings_of(kind: type) -> list[str]:
    """Every setting declared with this unit type (alone, or or-None)."""
    found = []
    for model in GROUPS.values():
        for name, info in model.model_fields.items():
            if info.annotation is kind or kind in getattr(info.annotation, "__args__", ()):
                found.append(name)
    return found


SIZES, DURATIONS = settings_of(Size), settings_of(Duration)
BUDGETS = settings_of(Budget)


def test_the_unit_settings_are_found() -> None:
    assert {"max_bytes", "max_memory"} <= set(SIZES)
    assert {"ram_budget", "nvme_budget"} <= set(BUDGETS)
    assert {"hot_half_life", "gc_grace", "visibility_timeout", "task_soft_time_limit",
            "task_time_limit", "retry_backoff_max", "result_expires", "broker_timeout",
            "s3_timeout"} <= set(DURATIONS)
    assert settings_of(Mebibytes) == ["worker_max_memory_mib"]
    # a count, not a size
    assert "max_pixels" not in SIZES + BUDGETS and "max_pixels" in GROUPS["image"].model_fields


def test_sizes_and_durations_people_write() -> None:
    assert parse_size("512K") == 512 << 10
    assert parse_size("2GiB") == parse_size("2g") == parse_size("2 GB") == 2 << 30
    assert parse_size("300") == parse_size("300B") == parse_size(300) == 300
    assert parse_size("1.5K") == 1536
    assert parse_budget("80%") == Budget(percent=80.0)
    assert parse_budget("2G") == parse_budget(2 << 30) == Budget(bytes=2 << 30)
    assert parse_duration("24h") == 86400.0 and parse_duration("90") == 90.0
    assert parse_duration("30m") == parse_duration("1800s") == parse_duration(1800) == 1800.0
    assert parse_duration("7D") == 7 * 86400.0 and parse_duration("1.5h") == 5400.0
    assert parse_duration("0", zero=True) == 0.0
    assert str(Size("64M")) == "64M" and str(Duration("36h")) == "36h"
    assert str(Budget(percent=80)) == "80%"


@pytest.mark.parametrize(("text", "size"), [
    ("4096", 4096), ("512K", 512 << 10), ("64M", 64 << 20), ("4G", 4 << 30), ("1T", 1 << 40),
    ("3m", 3 << 20), (" 2 GiB ", 2 << 30), (4 << 30, 4 << 30),
])
def test_every_size_setting_takes_bytes_and_k_m_g(text: Any, size: int) -> None:
    for name in SIZES + BUDGETS:
        group = next(g for g, model in GROUPS.items() if name in model.model_fields)
        if name == "max_memory" and size < 64 << 20:
            continue  # under its floor: refused for that (below)
        loaded = getattr(getattr(load_settings(**{name: text}), group), name)
        assert (loaded.bytes if isinstance(loaded, Budget) else loaded) == size, name
        assert isinstance(load_settings(**{name: text}).flat()[name], int)


def test_max_memory_takes_a_size_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMGWARM_MAX_MEMORY", "4G")  # refused before: bytes only
    assert load_settings().image.max_memory == 4 << 30
    monkeypatch.setenv("IMGWARM_WORKER_MAX_MEMORY_MIB", "2G")
    assert load_settings().queue.worker_max_memory_mib == 2048
    monkeypatch.setenv("IMGWARM_WORKER_MAX_MEMORY_MIB", "512")  # MiB, as its name says
    assert load_settings().queue.worker_max_memory_mib == 512


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("45s", 45.0), ("30m", 1800.0), ("2h", 7200.0), ("1d", 86400.0),
    (" 1.5 H ", 5400.0), (3600, 3600.0),
])
def test_every_duration_setting_takes_s_m_h_d(text: Any, seconds: float) -> None:
    for name in DURATIONS:
        group = next(g for g, model in GROUPS.items() if name in model.model_fields)
        if not in_range(GROUPS[group].model_fields[name], seconds):
            continue  # refused for that (test_out_of_range_is_said_in_the_unit)
        # the queue's limits hold together: the hard limit above the soft one, the visibility
        # timeout above both and the backoff
        given: dict[str, Any] = {"task_soft_time_limit": 1, "task_time_limit": 2,
                                 "retry_backoff_max": 1, "visibility_timeout": 86400}
        if name == "task_soft_time_limit":
            given["task_time_limit"] = seconds + 1
        if seconds + 1 >= 86400 and name in ("task_soft_time_limit", "task_time_limit"):
            continue
        loaded = load_settings(**{**given, name: text})
        assert getattr(getattr(loaded, group), name) == seconds, name
        assert loaded.flat()[name] == seconds


def in_range(info: Any, value: float) -> bool:
    """Within a field's own bounds (ge, gt, le)."""
    for meta in info.metadata:
        for bound, holds in (("ge", value.__ge__), ("gt", value.__gt__), ("le", value.__le__)):
            limit = getattr(meta, bound, None)
            if limit is not None and not holds(limit):
                return False
    return True


@pytest.mark.parametrize("text", [
    "2\u212a",  # the Kelvin sign, which a case-folding regex takes for K
    "1\u017f",  # the long s, which folds to s
    "\u0663",  # an Arabic-Indic three
    "9" * 400, "5i", "0%", "101%", "-1K", "1e9", "", " ", "1K;", "nan", "inf", "7d",
])
def test_hostile_sizes_are_one_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        parse_budget(text)
    for name in SIZES + BUDGETS:
        if name == "nvme_budget" and not text.strip():
            continue  # empty: no budget, every variant
        with pytest.raises(SettingsError, match=f"^invalid setting {name} = ") as refused:
            load_settings(**{name: text})
        message = str(refused.value)
        assert "\n" not in message and f"IMGWARM_{name.upper()}" in message
        assert "512K" in message and "2G" in message  # the forms it takes
    for bad in (float("nan"), float("inf"), -1, 1.5, True):
        with pytest.raises(ValueError, match="is not a size"):
            parse_size(bad)


@pytest.mark.parametrize("text", ["1\u017f", "9" * 400, "-5m", "1w", "nan", "inf", "", "5 K",
                                  "1h30m", "1e3"])
def test_hostile_durations_are_one_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)
    for name in DURATIONS:
        with pytest.raises(SettingsError, match=f"^invalid setting {name} = ") as refused:
            load_settings(**{name: text})
        message = str(refused.value)
        assert "\n" not in message and f"IMGWARM_{name.upper()}" in message
        assert "10m" in message and "7d" in message  # the forms it takes


def test_out_of_range_is_said_in_the_unit() -> None:
    with pytest.raises(SettingsError, match=r"^invalid setting max_memory = 1000 .*"
                                            r"allowed: 64M or more \(bytes, or a number"):
        load_settings(max_memory=1000)
    with pytest.raises(SettingsError, match=r"hot_half_life = '0' .*allowed: above 0s"):
        load_settings(hot_half_life="0")
    with pytest.raises(SettingsError, match=r"broker_timeout = '5m' .*at most 2m"):
        load_settings(broker_timeout="5m")
    assert load_settings(gc_grace="0").store.gc_grace == 0.0  # gc at once: allowed
    with pytest.raises(SettingsError, match=r"visibility_timeout=3m must be above"):
        load_settings(visibility_timeout="3m")


def test_a_value_is_parsed_once_and_kept_as_bytes_or_seconds() -> None:
    loaded = load_settings(ram_budget="2G", nvme_budget="50%", hot_half_life="30m",
                           gc_grace="36h", max_bytes="10M")
    assert loaded.cache.ram_budget == Budget(bytes=2 << 30)
    assert loaded.cache.nvme_budget == Budget(percent=50.0)
    assert loaded.cache.nvme_budget.of(1000) == 500
    assert loaded.cache.hot_half_life == 1800.0 and loaded.store.gc_grace == 129600.0
    assert loaded.image.max_bytes == 10 << 20 and type(loaded.image.max_bytes) is int
    assert load_settings(nvme_budget="").cache.nvme_budget is None  # every variant
    again = loaded.updated(webp_quality=70)  # through flat(): the same values
    assert (again.cache, again.store, again.image.max_bytes) == (
        loaded.cache, loaded.store, loaded.image.max_bytes)


@pytest.mark.parametrize("given", [
    "0.5", "1.1B", "1.1K",  # a fraction of a byte: refused, not cut
    "999999999999999T", 10 ** 400, 2 ** 60 + 1,  # past 1 EiB (and past a float)
    1.5,
])
def test_a_size_is_whole_bytes_within_an_exbibyte(given: Any) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(given)
    assert parse_size(2 ** 60) == 2 ** 60 and parse_size(2 ** 53 + 1) == 2 ** 53 + 1  # exact
    assert parse_size("999999999999999") == 999_999_999_999_999


@pytest.mark.parametrize("given", ["5KB", "5b", "64.5", "1.5M"])
def test_mebibytes_are_whole(given: str) -> None:
    """5K was taken for 0 MiB, then refused as 'out of range' (64 or more)."""
    with pytest.raises(SettingsError, match="whole number of them"):
        load_settings(worker_max_memory_mib=given)


@pytest.mark.parametrize("given", ["999999999999999d", 10 ** 400, "36501d"])
def test_a_duration_is_at_most_a_century(given: Any) -> None:
    for name in DURATIONS:
        with pytest.raises(SettingsError, match=f"^invalid setting {name} = .*at most a"):
            load_settings(**{name: given})


def test_a_long_value_is_not_echoed_whole() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(max_bytes="9" * 5000)
    said = str(refused.value)
    assert len(said) < 400 and "\n" not in said and said.count("9") < 100
