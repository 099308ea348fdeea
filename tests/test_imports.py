"""Imports run one way and stay light: what does not decode an image does not load libvips."""

from __future__ import annotations

import pytest

import imgwarm
from tests.support.imports import HEAVY, loaded_by


@pytest.mark.parametrize("module", ["imgwarm", "imgwarm.config", "imgwarm.manifest",
                                    "imgwarm.formats", "imgwarm.store", "imgwarm.workers.app",
                                    "imgwarm.workers.client", "imgwarm.cli",
                                    "imgwarm.lifecycle.delete", "imgwarm.lifecycle.gc",
                                    "imgwarm.cache.collect"])
def test_no_image_library_is_loaded(module: str) -> None:
    assert loaded_by(module).isdisjoint(HEAVY)


@pytest.mark.parametrize("module", ["imgwarm", "imgwarm.config", "imgwarm.manifest",
                                    "imgwarm.store", "imgwarm.lifecycle.delete"])
def test_no_queue_or_s3_library_is_loaded(module: str) -> None:
    assert loaded_by(module).isdisjoint({"boto3", "botocore", "celery", "kombu"})


def test_the_command_line_loads_no_settings_library_to_list_its_commands() -> None:
    assert loaded_by("imgwarm.cli.main").isdisjoint({"pydantic", "pydantic_settings", *HEAVY})


def test_the_public_api_is_sorted_and_every_name_resolves() -> None:
    assert imgwarm.__all__ == sorted(imgwarm.__all__)
    for name in imgwarm.__all__:
        assert getattr(imgwarm, name) is not None
    with pytest.raises(AttributeError):
        _ = imgwarm.nothing_like_this  # type: ignore[attr-defined]
