"""Settings: defaults, file, environment, overrides; errors that name the setting."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import SettingsError


def test_defaults(settings: Settings) -> None:
    plain = load_settings()
    assert plain.image.widths == [320, 680, 860, 1080, 1290, 1920]
    assert plain.image.fallback_widths == [320, 640, 1920]
    assert plain.image.formats == ["webp", "jpeg"]
    image = plain.image
    assert (image.webp_quality, image.webp_effort, image.jpeg_quality) == (80, 4, 82)
    assert (plain.image.max_pixels, plain.image.max_bytes) == (100_000_000, 64 * 1024 * 1024)
    assert plain.store.origin_root == Path("var/origin")


def test_precedence(settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "custom.toml"
    config.write_text('webp_quality = 60\njpeg_quality = 60\nwidths = "100,200"\n')
    monkeypatch.setenv("IMGWARM_JPEG_QUALITY", "70")
    loaded = load_settings(config, avif_quality=None, webp_effort=6)
    assert loaded.image.webp_quality == 60  # file
    assert loaded.image.jpeg_quality == 70  # environment over file
    assert loaded.image.webp_effort == 6  # override over everything
    assert loaded.image.widths == [100, 200]
    monkeypatch.setenv("IMGWARM_CONFIG", str(config))
    assert load_settings().image.webp_quality == 60


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"webp_quality": 0}, r"setting webp_quality = 0 \(.*IMGWARM_WEBP_QUALITY.*\): .*1\.\.100"),
        ({"jpeg_quality": 101}, r"jpeg_quality .*a quality is 1\.\.100, or auto"),
        ({"widths": "320,abc"}, r"widths"),
        ({"widths": ""}, r"at least one width"),
        ({"formats": "webp,gif"}, r"IMGWARM_FORMATS"),
        ({"max_pixels": 0}, r"max_pixels .*allowed: 1 or more"),
        ({"max_dir_entries": 65536, "shard_levels": 8}, r"raise hash_length"),
        ({"bogus": 1}, r"unknown setting 'bogus'"),
    ],
)
def test_errors_name_the_setting(settings: Settings, overrides: dict[str, object],
                                 message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(**overrides)


def test_bad_config_file(settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("webp_quality = = 3\n")
    with pytest.raises(SettingsError, match=r"broken\.toml"):
        load_settings(broken)


def test_a_bad_value_is_one_line_naming_the_setting_its_variable_and_what_is_allowed() -> None:
    for given, said in (({"max_bytes": "64Q"}, "max_bytes = '64Q'"),
                        ({"gc_grace": "a week"}, "gc_grace = 'a week'"),
                        ({"ram_budget": "200%"}, "ram_budget = '200%'"),
                        ({"webp_effort": 9}, "webp_effort = 9")):
        with pytest.raises(SettingsError) as refused:
            load_settings(**given)
        (line,) = str(refused.value).splitlines()
        name = next(iter(given))
        assert line.startswith(f"invalid setting {said} ") and f"IMGWARM_{name.upper()}" in line
        assert "allowed: " in line or "give " in line


def test_digests_do_not_change_for_the_same_values_in_another_form() -> None:
    plain = load_settings()
    # pinned since issue 42 changed the widths; 0.3.0's (and every version's since sizes were
    # typed) is still current: every manifest made before is reused as it is
    assert plain.digest("output") == "f0b81b0ae6f64c74"
    assert "17035c475bf72dd2" in plain.digests("output")
    # the refusals recorded before (with other widths) are tried again, once
    assert plain.digest("output", "refusal") == "57f7bae8114efba6"
    for given in ({"max_bytes": "64M"}, {"max_bytes": 64 << 20}, {"max_memory": "1G"},
                  {"max_memory": "1024M"}, {"hot_half_life": "240m"}, {"gc_grace": "168h"},
                  {"ram_budget": "80%"}, {"visibility_timeout": "600"}):
        same = load_settings(**given)
        assert same.flat() == plain.flat(), given
        assert same.digest("output", "refusal") == plain.digest("output", "refusal"), given
    assert load_settings(max_bytes="63M").digest("output", "refusal") != \
        plain.digest("output", "refusal")


def _no_bool_settings() -> list[str]:
    from imgwarm.config.settings import GROUPS

    def takes_bool(annotation: object) -> bool:
        return annotation is bool or any(takes_bool(a) for a in typing.get_args(annotation))

    return [name for model in GROUPS.values() for name, info in model.model_fields.items()
            if not takes_bool(info.annotation)]


@pytest.mark.parametrize("name", _no_bool_settings())
def test_a_toml_boolean_is_refused_where_a_setting_takes_none(tmp_path: Path,
                                                               name: str) -> None:
    """TOML true/false are not numbers: pydantic's lax mode would take true for 1."""
    config = tmp_path / "imgwarm.toml"
    for value in ("true", "false", "[true]", "[640, true]"):
        config.write_text(f"{name} = {value}\n")
        with pytest.raises(SettingsError) as caught:
            load_settings(config)
        said = str(caught.value)
        assert said.startswith(f"invalid setting {name} = ") and "\n" not in said, said
        assert f"IMGWARM_{name.upper()}" in said


def test_numbers_from_the_environment_and_options_are_still_taken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IMGWARM_WIDTHS", "640,320")
    monkeypatch.setenv("IMGWARM_WORKERS", "3")
    monkeypatch.setenv("IMGWARM_QUALITY_TARGET", "70")
    settings = load_settings(max_widths="4", fsync="false")
    assert settings.image.widths == [320, 640] and settings.image.workers == 3
    assert settings.image.quality_target == 70.0 and settings.image.max_widths == 4
    assert settings.store.fsync is False
