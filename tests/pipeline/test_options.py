"""The image settings as worker processes get them (imageoptions.py): every value, as plain
Python, with the same rules, and a worker that never loads pydantic."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.config.image import ImageSettings
from imgwarm.formats import ORDER, SOURCES
from imgwarm.manifest import Credits
from imgwarm.pipeline import make
from imgwarm.pipeline.isolate import Isolated
from tests.support.images import photo

VARIED = [{}, {"webp_quality": "auto", "quality_check_width": 0},
          {"jpeg_quality": "auto", "accept_png": False}, {"formats": "webp,jxl,jpeg"},
          {"width_step_bytes": "20K", "fallback_widths": ""}, {"source_formats": "jpeg,png"}]


@pytest.mark.parametrize("given", VARIED)
def test_options_hold_every_setting_as_plain_values_with_the_same_rules(given: dict) -> None:
    settings = Settings().image.model_copy(update={}) if not given else \
        ImageSettings.model_validate({**Settings().image.model_dump(), **given})
    options = settings.options()
    for name in ImageSettings.model_fields:
        value = getattr(options, name)
        assert value == getattr(settings, name), name
        assert type(value).__module__ == "builtins", (name, type(value))
    assert [options.quality(f) for f in ORDER] == [settings.quality(f) for f in ORDER]
    assert [options.accepts(s) for s in SOURCES] == [settings.accepts(s) for s in SOURCES]
    for rule in ("auto_quality", "thins_fallback", "makes_jxl", "predicts_quality",
                 "byte_ladder"):
        assert getattr(options, rule)() == getattr(settings, rule)(), rule
    with pytest.raises(AttributeError, match="read-only"):
        options.widths = [1]  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no 'nothing'"):
        _ = options.nothing


def test_unpickled_options_need_nothing_of_the_settings_package() -> None:
    """What a worker receives names only built-in types and imageoptions.py."""
    text = pickle.dumps(Settings().image.options())
    assert b"imgwarm.config" not in text and b"pydantic" not in text
    assert b"imgwarm.imageoptions" in text


def test_the_same_source_makes_the_same_files_from_options_and_from_settings() -> None:
    data = bytes(photo(900, 600).jpegsave_buffer())
    settings = Settings().image
    by_settings = make.make(data, "same.jpg", settings, Credits(description="a photo"))
    by_options = make.make(data, "same.jpg", settings.options(), Credits(description="a photo"))
    assert [f.name for f in by_options.files] == [f.name for f in by_settings.files]
    assert by_options.placeholder == by_settings.placeholder


def _mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
def test_a_worker_process_never_loads_pydantic() -> None:
    """Its memory maps, after it made a source and its placeholder: no pydantic_core (the
    compiled half of pydantic, 20 MB of a worker's resident memory), but libvips."""
    settings = Settings().image
    with Isolated(1) as pixels:
        made = pixels.make(bytes(photo(640, 480).jpegsave_buffer()), "one.jpg", settings,
                           Credits())
        pixels.preview(bytes(photo(64, 48).jpegsave_buffer()), "two.jpg", settings)
        assert made.width == 640
        (worker,) = pixels.pids()
        maps = _mapped(worker)
    assert "libvips" in maps
    assert "pydantic_core" not in maps
