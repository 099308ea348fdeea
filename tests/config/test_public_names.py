"""Every documented setting works by its public name: as IMGWARM_* variable, TOML key and
keyword; the groups are internal. The digests come from the marks on the fields."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import GROUPS, Settings, load_settings
from tests.support.files import REPO


def settings_page() -> str:
    """The docs' settings page, as docs/hooks.py generates it from the Fields (no MkDocs)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page: str = hooks.settings_page()
    return page


ROW = re.compile(r"^### `([a-z_0-9]+)` \{#[a-z_0-9]+\}\n\n`(IMGWARM_[A-Z_0-9]+)` · ",
                 re.MULTILINE)
DOCUMENTED = ROW.findall(settings_page())

# A valid value other than the default, as a string (how the environment gives it).
CHANGED: dict[str, tuple[str, Any]] = {
    "widths": ("100,200", [100, 200]), "formats": ("avif,jpeg", ["avif", "jpeg"]),
    "fallback_widths": ("100,300", [100, 300]), "jxl_quality": ("auto", "auto"),
    "ram_max_width": ("640", 640),
    "source_formats": ("png,jpeg", ["jpeg", "png"]),
    "origin": ("s3", "s3"), "s3_bucket": ("photos", "photos"), "s3_prefix": ("a/b", "a/b/"),
    "s3_endpoint_url": ("http://127.0.0.1:9", "http://127.0.0.1:9"),
    "s3_region": ("eu-west-1", "eu-west-1"), "broker_url": ("redis://h:1/2", "redis://h:1/2"),
    "result_backend": ("redis://h:1/3", "redis://h:1/3"),
    "origin_root": ("/srv/o", "/srv/o"), "manifest_root": ("/srv/m", "/srv/m"),
    "nvme_root": ("/srv/nvme", "/srv/nvme"), "ram_root": ("/dev/shm/r", "/dev/shm/r"),
    "cache_state": ("/srv/state", "/srv/state"), "ram_budget": ("2G", 2 << 30),
    "nvme_budget": ("50%", "50%"), "hot_half_life": ("7d", 7 * 86400.0),
    "access_logs": ("/var/log/a.log,/var/log/b*", ["/var/log/a.log", "/var/log/b*"]),
    "log_format": ("$request_method $uri $status", "$request_method $uri $status"),
    "image_prefix": ("img/", "/img/"),
    "gc_grace": ("36h", 36 * 3600.0), "max_memory": ("4G", 4 << 30),
    "originals_prefix": ("uploads", "uploads/"), "listen_token": ("t0ken", "t0ken"),
    "event_max_bytes": ("1M", 1 << 20), "events_redis_url": ("redis://h:1/4", "redis://h:1/4"),
    "events_stream": ("site:events", "site:events"), "notify_timeout": ("30s", 30.0),
    "notify_url": ("https://app.example/hook", "https://app.example/hook"),
    "notify_secret": ("s3cret", "s3cret"), "notify_give_up": ("1d", 86400.0),
    "follow_group": ("warm-box-a", "warm-box-a"),
}
NEEDS = {"origin": {"s3_bucket": "photos"},
         "notify_url": {"notify_secret": "s3cret"}}  # settings only valid together with another


def changed(name: str, default: Any) -> tuple[str, Any]:
    if name in CHANGED:
        return CHANGED[name]
    if isinstance(default, bool):
        return ("false" if default else "true"), not default
    if isinstance(default, int):
        value = default + 1 if name != "shard_levels" else 2
        if name == "visibility_timeout":
            value = default + 10_000
        return str(value), value
    if isinstance(default, float):
        return str(default + 1), default + 1
    raise AssertionError(f"no changed value for {name}")


def fields() -> dict[str, Any]:
    defaults = load_settings().flat()
    return {name: defaults[name] for model in GROUPS.values() for name in model.model_fields}


def test_every_setting_is_documented_once_and_every_documented_one_exists() -> None:
    documented = dict(DOCUMENTED)
    assert len(documented) == len(DOCUMENTED), "a setting is documented twice"
    assert set(documented) == set(fields())
    assert all(variable == f"IMGWARM_{name.upper()}" for name, variable in documented.items())
    for model in GROUPS.values():  # a default, a type and a description each
        for name, info in model.model_fields.items():
            assert info.description, f"setting {name} has no description"


@pytest.mark.parametrize(("name", "variable"), DOCUMENTED)
def test_each_documented_setting_works_by_its_public_names(
    name: str, variable: str, settings: Settings, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    text, expected = changed(name, fields()[name])
    expected = json.loads(json.dumps(expected))
    extra = NEEDS.get(name, {})
    monkeypatch.setenv(variable, text)
    for other, value in extra.items():
        monkeypatch.setenv(f"IMGWARM_{other.upper()}", value)
    assert load_settings().flat()[name] == expected  # environment
    monkeypatch.delenv(variable)
    toml = tmp_path / "imgwarm.toml"
    toml.write_text(f"{name} = {json.dumps(text)}\n")
    assert load_settings(toml).flat()[name] == expected  # TOML key
    assert load_settings(**{name: text}).flat()[name] == expected  # keyword (CLI, API)


def test_imgwarm_config_prints_toml_that_loads_back(run_cli: Any, tmp_path: Path) -> None:
    printed = run_cli("config", env={"IMGWARM_WEBP_QUALITY": "61"}).stdout
    saved = tmp_path / "saved.toml"
    saved.write_text(printed)
    assert load_settings(saved).flat() == load_settings(webp_quality=61).flat()
    assert printed.count("# IMGWARM_") == len(fields())


def test_digests_come_from_the_marks(settings: Settings) -> None:
    base = load_settings()
    # Pinned: manifests made before settings were grouped are still reused (the digest of
    # 0.3.0's defaults is still current: Settings.digests).
    assert "17035c475bf72dd2" in base.digests("output")
    for name in ("webp_quality", "widths", "keep_gps", "hash_length", "shard_levels"):
        text, _ = changed(name, fields()[name])
        assert base.updated(**{name: text}).digest("output") != base.digest("output"), name
    for name in ("workers", "origin_root", "broker_url", "fsync", "max_pixels"):
        text, _ = changed(name, fields()[name])
        assert base.updated(**{name: text}).digest("output") == base.digest("output"), name
    refusal = base.digest("output", "refusal")
    assert base.updated(max_pixels=5).digest("output", "refusal") != refusal
    assert base.updated(workers=3).digest("output", "refusal") == refusal


def test_every_variable_the_docs_name_exists() -> None:
    """The hand-written pages (README, docs/*.md) name only variables that are read: a
    setting's, or the tests' own knobs (a renamed setting must not live on in the prose)."""
    known = {f"IMGWARM_{name.upper()}" for name in fields()} | {
        "IMGWARM_CONFIG", "IMGWARM_CORPUS", "IMGWARM_FAULTS", "IMGWARM_FUZZ_CASES",
        "IMGWARM_RACE_YIELD", "IMGWARM_RACE_ROUNDS", "IMGWARM_UPGRADE_ROUNDS"}
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    named = {(page.name, found) for page in pages
             for found in re.findall(r"IMGWARM_[A-Z0-9_]*[A-Z0-9]\b", page.read_text())}
    assert len(named) >= 5, "no variable found in the docs: the pattern is wrong"
    assert not {(page, name) for page, name in named if name not in known}
