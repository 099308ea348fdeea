"""A width ladder by bytes (issue 27): each source's widths chosen from its own files' bytes,
within the pixel slack, the same widths for every format, each file true to the source. The
browser's side (what Chromium takes from such a srcset) is tests/serve/test_ladder.py."""

from __future__ import annotations

import itertools
from pathlib import Path

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.pipeline.variants import MAX_RATIO, fallback_at
from imgwarm.store import Stores
from tests.support.files import REPO
from tests.support.images import decode, mean_delta_e, shrink_to
from tests.support.pipeline import run

PHOTO = REPO / "tests" / "corpus" / "42_IndexError.jpg"  # 4032x3024, orientation 1


def widths(manifest: Manifest, fmt: str) -> list[int]:
    return [v.width for v in manifest.variants if v.format == fmt]


def test_widths_follow_the_first_formats_bytes(settings: Settings) -> None:
    step = 20_000
    ladder = settings.updated(width_step_bytes="20K", max_widths=20)
    manifest = run(PHOTO.read_bytes(), "phone.jpg", ladder)
    webp = widths(manifest, "webp")
    assert webp[0] == 320 and webp[-1] == 1920
    # the JPEG fallback at the fallback widths (each the next made up), and the ends
    assert widths(manifest, "jpeg") == sorted(fallback_at(webp, ladder.image.fallback_widths))
    assert len(webp) > 4 and all(b / a <= MAX_RATIO for a, b in itertools.pairwise(webp))
    sizes = [v.bytes for v in manifest.variants if v.format == "webp"]
    gaps = [b - a for a, b in itertools.pairwise(sizes)]
    # (the model between the ends is a power law: 1.5x the step covers its error)
    assert all(0 < gap <= 1.5 * step for gap in gaps), gaps
    assert sum(gap >= step / 2 for gap in gaps) >= len(gaps) // 2, gaps  # not merely dense
    for variant in manifest.variants:
        image = decode(settings.store.origin_root / variant.path)
        assert (image.width, image.height) == (variant.width, variant.height)
        assert variant.height == round(3024 * variant.width / 4032)
    source = decode(PHOTO)
    for variant in manifest.variants[2:-2:3]:  # a few from between the two ends
        made = decode(settings.store.origin_root / variant.path)
        assert mean_delta_e(made, shrink_to(source, made.width)) < 2.5, variant.path


def test_max_widths_caps_the_ladder(settings: Settings) -> None:
    manifest = run(PHOTO.read_bytes(), "phone.jpg",
                   settings.updated(width_step_bytes="5K", max_widths=11))
    assert len(widths(manifest, "webp")) == 11 and widths(manifest, "jpeg")[-1] == 1920


def test_ladder_between_the_bounds_of_widths(settings: Settings) -> None:
    """The smallest and the largest of ``widths`` bound it; a narrow source ends at its own
    width, never upscaled; the placeholder is still made (from the smallest)."""
    manifest = run(PHOTO.read_bytes(), "phone.jpg",
                   settings.updated(width_step_bytes="20K", widths=[400, 1000]))
    assert widths(manifest, "webp")[0] == 400 and widths(manifest, "webp")[-1] == 1000
    assert manifest.placeholder is not None and manifest.placeholder.color
    small = decode(PHOTO).thumbnail_image(500)
    data = small.jpegsave_buffer(Q=90)
    narrow = run(data, "small.jpg", settings.updated(width_step_bytes="20K"))
    assert widths(narrow, "webp")[0] == 320 and widths(narrow, "webp")[-1] == 500


def test_the_same_source_and_settings_give_the_same_names(settings: Settings,
                                                          tmp_path: Path) -> None:
    ladder = settings.updated(width_step_bytes="30K")
    first = run(PHOTO.read_bytes(), "a/phone.jpg", ladder)
    again = ladder.updated(origin_root=tmp_path / "other", manifest_root=tmp_path / "m2")
    second = run(PHOTO.read_bytes(), "a/phone.jpg", again)
    assert [v.path for v in first.variants] == [v.path for v in second.variants]
    assert Stores.local(again.store).origin.exists(second.variants[3].path)


def test_the_ladder_changes_the_output_digest_only_when_on(settings: Settings) -> None:
    plain = settings.digest("output")
    assert settings.updated(max_widths=20).digest("output") == plain  # off: unchanged
    on = settings.updated(width_step_bytes="20K")
    assert on.digest("output") != plain
    assert on.updated(max_widths=20).digest("output") != on.digest("output")
