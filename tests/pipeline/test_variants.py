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
    assert plan_widths(source, source * 3 // 4 or 1, DEFAULT, 16383) == expected


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((4000, 1), [320, 640, 1280, 1920]),  # wide strips: every width, 1 pixel tall
        ((17000, 2), [320, 640, 1280, 1920]),
        ((1000, 60000), [273]),  # 273 x 16380: as tall as WebP allows
        ((2, 17000), [1]),
        ((200, 16383), [200]),
        ((1, 16384), []),  # not even one pixel wide fits
    ],
)
def test_plan_keeps_every_side_within_the_formats(size: tuple[int, int],
                                                  expected: list[int]) -> None:
    width, height = size
    planned = plan_widths(width, height, DEFAULT, 16383)
    assert planned == expected
    assert all(height_for(w, width, height) <= 16383 for w in planned)


def test_height_keeps_aspect_and_is_at_least_one() -> None:
    assert height_for(320, 4032, 3024) == 240
    assert height_for(320, 1600, 2400) == 480
    assert height_for(1, 5000, 10) == 1
