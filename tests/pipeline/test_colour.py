"""Colour: outputs are sRGB, converted through the embedded profile; measured in CIEDE2000."""

from __future__ import annotations

import pytest
import pyvips

from imgwarm.config import Settings
from imgwarm.pipeline.colour import profile_is_srgb
from tests.support.hostile import adobe_rgb_profile, damaged_profile, with_icc
from tests.support.images import (
    builtin_cmyk_profile,
    mean_delta_e,
    photo,
    pillow_reference,
    with_profile,
)
from tests.support.pipeline import decoded, run

# Mean CIEDE2000 against LittleCMS (through Pillow) below 2: a difference few people can see.
MAX_MEAN_DELTA_E = 2.0


def saturated(width: int = 480, height: int = 320) -> pyvips.Image:
    """Strong colours, where a wrong or missing conversion shows most."""
    x = pyvips.Image.xyz(width, height)
    red = (x[0] * 255 / width)
    green = 255 - red
    blue = (x[1] * 255 / height)
    return red.bandjoin([green, blue]).cast("uchar").copy(interpretation="srgb")


@pytest.mark.parametrize("profile", ["p3", "cmyk"])
def test_profiled_source_matches_reference(settings: Settings, profile: str) -> None:
    data = with_profile(saturated(), profile)
    manifest = run(data, f"{profile}.jpg", settings)
    reference = pillow_reference(data)
    untransformed = pyvips.Image.new_from_buffer(data, "")
    for fmt in ("webp", "jpeg"):
        out = decoded(settings, manifest, fmt)
        assert out.interpretation == "srgb" and out.bands == 3
        assert not out.get_typeof("icc-profile-data")
        error = mean_delta_e(out, reference)
        assert error < MAX_MEAN_DELTA_E
        if profile == "p3":
            # Dropping the profile would fail the check above: it is not vacuous.
            assert mean_delta_e(untransformed, reference) > max(MAX_MEAN_DELTA_E, 3 * error)


def test_cmyk_without_profile_uses_a_default_cmyk_profile(settings: Settings) -> None:
    cmyk = saturated().icc_transform("cmyk", input_profile="srgb")
    bare = cmyk.copy()
    bare.remove("icc-profile-data")
    data = bytes(bare.jpegsave_buffer(Q=92, keep="none"))
    manifest = run(data, "bare-cmyk.jpg", settings)
    out = decoded(settings, manifest)
    assert mean_delta_e(out, pillow_reference(data)) < MAX_MEAN_DELTA_E
    # and it is close to the picture the CMYK was made from (nothing inverted)
    assert mean_delta_e(out, saturated()) < 10


def test_grey_source_becomes_srgb(settings: Settings) -> None:
    grey = photo(300, 200).colourspace("b-w")
    manifest = run(bytes(grey.jpegsave_buffer(Q=90)), "grey.jpg", settings)
    out = decoded(settings, manifest, "jpeg")
    assert out.bands == 3 and out.interpretation == "srgb"
    assert mean_delta_e(out, grey) < MAX_MEAN_DELTA_E


def test_srgb_profiles_are_recognised() -> None:
    srgb = photo(8, 8).icc_transform("srgb", input_profile="srgb").get("icc-profile-data")
    assert profile_is_srgb(bytes(srgb))
    assert not profile_is_srgb(builtin_cmyk_profile())
    p3 = photo(8, 8).icc_transform("p3", input_profile="srgb").get("icc-profile-data")
    assert not profile_is_srgb(bytes(p3))
    assert not profile_is_srgb(b"not a profile")


@pytest.mark.parametrize("field", ["pcs", "space", "class", "tags"])
def test_a_damaged_profile_is_converted_as_if_absent(settings: Settings, field: str) -> None:
    """The pixels are fine: made, as sRGB, with the fallback said in the manifest."""
    picture = saturated(240, 160)
    plain = bytes(picture.jpegsave_buffer(Q=92, keep="none"))
    manifest = run(with_icc(plain, damaged_profile(field)), f"{field}.jpg", settings)
    assert len(manifest.warnings) == 1
    assert manifest.warnings[0].startswith("embedded ICC profile not used (")
    reference = run(plain, "plain.jpg", settings)
    assert [v.bytes for v in manifest.variants] == [v.bytes for v in reference.variants]
    assert mean_delta_e(decoded(settings, manifest), picture) < MAX_MEAN_DELTA_E


def test_a_usable_profile_gives_no_warning(settings: Settings) -> None:
    manifest = run(with_icc(bytes(saturated(240, 160).jpegsave_buffer(keep="none")),
                            adobe_rgb_profile()), "p3.jpg", settings)
    assert manifest.warnings == []


def test_a_cmyk_file_with_a_damaged_profile_uses_the_builtin_one(settings: Settings) -> None:
    cmyk = saturated(240, 160).icc_transform("cmyk", input_profile="srgb")
    data = with_icc(bytes(cmyk.jpegsave_buffer(Q=92, keep="none")), damaged_profile("pcs"))
    manifest = run(data, "cmyk.jpg", settings)
    assert manifest.warnings and "not used" in manifest.warnings[0]
    expected = pillow_reference(bytes(cmyk.jpegsave_buffer(Q=92, keep="none")))
    assert mean_delta_e(decoded(settings, manifest), expected) < MAX_MEAN_DELTA_E


def test_profiles_are_remembered_by_their_hash_not_kept(settings: Settings) -> None:
    """A worker sees thousands of profiles: what it learnt of each must not keep it alive."""
    from imgwarm.pipeline.colour import _VERDICTS

    plain = bytes(saturated(64, 48).jpegsave_buffer(keep="none"))
    for i in range(5):
        junk = damaged_profile("pcs") + bytes([i]) * 200_000  # each one different and large
        run(with_icc(plain, junk), f"p{i}.jpg", settings)
    parts = [part for key in _VERDICTS.found for part in key]
    assert parts and all(not isinstance(p, bytes) or len(p) == 32 for p in parts)
