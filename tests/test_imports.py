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


def test_test_modules_share_helpers_only_through_tests_support() -> None:
    """A test module imports no other test module nor a conftest: shared helpers live in
    tests/support (so that running one test file never runs another's module code)."""
    import ast
    from pathlib import Path

    here = Path(__file__).parent
    modules = [p for p in here.rglob("*.py") if "support" not in p.relative_to(here).parts]
    assert len(modules) > 20, "the test modules were not found"
    wrong = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            wrong += [f"{path.relative_to(here)}: {name}" for name in names
                      if name.startswith("tests.") and not name.startswith("tests.support")]
    assert not wrong, wrong
