"""Which widths a source gets."""

from __future__ import annotations

import pytest

from imgwarm.pipeline.variants import height_for, plan_widths

DEFAULT = [320, 640, 1280, 1920]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (4032, [320, 640, 1280, 1920]),
        (1920, [320, 640, 1280, 1920]),
        (1921, [320, 640, 1280, 1920]),
        (1800, [320, 640, 1280, 1800]),
        (1024, [320, 640, 1024]),
        (640, [320, 640]),
        (320, [320]),
        (100, [100]),
        (1, [1]),
    ],
)
def test_plan_never_upscales(source: int, expected: list[int]) -> None:
    assert plan_widths(source, DEFAULT) == expected


def test_height_keeps_aspect_and_is_at_least_one() -> None:
    assert height_for(320, 4032, 3024) == 240
    assert height_for(320, 1600, 2400) == 480
    assert height_for(1, 5000, 10) == 1
