"""Orientation: all eight EXIF orientations give the same upright picture."""

from __future__ import annotations

import pytest

from imgwarm.config import Settings
from tests.support.images import jpeg_with_exif, mean_abs_diff, photo, stored_for_orientation
from tests.support.pipeline import decoded, run

UPRIGHT = photo(600, 400, seed=3)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_each_orientation_comes_out_upright(settings: Settings, orientation: int) -> None:
    stored = stored_for_orientation(UPRIGHT, orientation)
    manifest = run(jpeg_with_exif(stored, orientation=orientation), f"o{orientation}.jpg",
                   settings)
    assert (manifest.width, manifest.height) == (600, 400)
    for fmt in ("webp", "jpeg"):
        out = decoded(settings, manifest, fmt)
        assert (out.width, out.height) == (600, 400)
        assert not out.get_typeof("orientation") or out.get("orientation") == 1
        assert mean_abs_diff(out, UPRIGHT) < 3.0
        # The test can fail: the picture unrotated or mirrored is far from upright.
        assert mean_abs_diff(out.fliphor(), UPRIGHT) > 10.0


@pytest.mark.parametrize("tag", [0, 9, 255])
def test_out_of_range_orientation_is_treated_as_1(settings: Settings, tag: int) -> None:
    manifest = run(jpeg_with_exif(UPRIGHT, orientation=tag), f"bad{tag}.jpg", settings)
    out = decoded(settings, manifest)
    assert (out.width, out.height) == (600, 400)
    assert mean_abs_diff(out, UPRIGHT) < 3.0
