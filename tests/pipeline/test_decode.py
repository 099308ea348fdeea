"""Decode: damaged data is refused on every decode path; benign warnings are not."""

from __future__ import annotations

from pathlib import Path

import pytest
import pyvips

from imgwarm.config import Settings
from imgwarm.exceptions import CorruptImage, LimitExceeded
from imgwarm.pipeline.decode import jpeg_shrink
from tests.support.files import all_files
from tests.support.hostile import (
    find_flip,
    flip_in_restart_interval,
    restart_jpeg,
    scan_start,
    segment,
    strict_reason,
    strip,
)
from tests.support.images import mean_abs_diff, photo, stray_bytes_jpeg
from tests.support.pipeline import decoded, run

BIG = photo(2400, 1600, seed=5)


@pytest.mark.parametrize("interlace", [False, True], ids=["baseline", "progressive"])
@pytest.mark.parametrize("widths", [[2400], [320]], ids=["full-decode", "shrink-on-load"])
def test_truncated_jpeg_is_refused(settings: Settings, interlace: bool, widths: list[int]) -> None:
    data = bytes(BIG.jpegsave_buffer(Q=90, interlace=interlace))
    cut = data[: len(data) * 2 // 3]
    config = settings.updated(widths=widths)
    with pytest.raises(CorruptImage, match=r"cut\.jpg: truncated JPEG data"):
        run(cut, "cut.jpg", config)
    assert all_files(settings.store.origin_root) == []
    assert all_files(settings.store.manifest_root) == []


def test_corrupt_entropy_data_is_refused(settings: Settings) -> None:
    data = bytearray(BIG.jpegsave_buffer(Q=90, restart_interval=4))
    start = data.find(b"\xff\xda") + 200
    for i in range(start, len(data) - 2, 997):  # scribble markers into the scan
        data[i:i + 2] = b"\xff\xd3"
    with pytest.raises(CorruptImage, match="corrupt"):
        run(bytes(data), "scribbled.jpg", settings)


def _mid_scan(data: bytes, marker: bytes) -> bytes:
    sos = data.find(b"\xff\xda")
    at = sos + (len(data) - sos) // 2
    return data[:at] + marker + data[at:]


@pytest.mark.parametrize("marker", [b"\xff\xd9", b"\xff\xd0", b"\xff\xc4"],
                         ids=["EOI", "RST0", "DHT"])
@pytest.mark.parametrize("interlace", [False, True], ids=["baseline", "progressive"])
@pytest.mark.parametrize("widths", [[2400], [320]], ids=["full-decode", "shrink-on-load"])
def test_marker_in_the_middle_of_the_scan_is_refused(
    settings: Settings, marker: bytes, interlace: bool, widths: list[int]
) -> None:
    """libjpeg only warns here, and a lenient decode would publish a grey-padded picture."""
    data = _mid_scan(bytes(BIG.jpegsave_buffer(Q=90, interlace=interlace)), marker)
    config = settings.updated(widths=widths)
    with pytest.raises(CorruptImage, match=r"corrupt JPEG data"):
        run(data, "marker.jpg", config)
    assert all_files(settings.store.origin_root) == []


def test_stray_bytes_and_damage_together_are_refused(settings: Settings) -> None:
    data = _mid_scan(stray_bytes_jpeg(), b"\xff\xd9")
    with pytest.raises(CorruptImage, match="corrupt JPEG data"):
        run(data, "both.jpg", settings)


def test_stray_bytes_before_a_marker_are_accepted(settings: Settings) -> None:
    manifest = run(stray_bytes_jpeg(), "stray.jpg", settings)
    out = decoded(settings, manifest)
    assert (out.width, out.height) == (200, 150)
    assert mean_abs_diff(out, photo(200, 150)) < 3.0


@pytest.mark.parametrize(("factor", "shrink"), [(1.0, 1), (1.99, 1), (2, 2), (3.9, 2), (4, 4),
                                                (7.9, 4), (8, 8), (200, 8)])
def test_shrink_never_goes_below_the_target(factor: float, shrink: int) -> None:
    assert jpeg_shrink(factor) == shrink


def test_shrink_on_load_gives_the_same_picture(settings: Settings, tmp_path: Path) -> None:
    data = bytes(BIG.jpegsave_buffer(Q=92))
    config = settings.updated(widths=[300])  # 8x: shrink 8
    manifest = run(data, "big.jpg", config)
    out = decoded(config, manifest)
    assert (out.width, out.height) == (300, 200)
    assert mean_abs_diff(out, BIG) < 3.0


# --- resynchronised entropy data (found by fuzzing) and harmless header junk ------------------

@pytest.mark.parametrize("widths", [[320], [160]], ids=["full-decode", "shrink-on-load"])
@pytest.mark.parametrize("which", [2, 4, 6])
def test_a_flip_inside_a_restart_interval_is_refused(
    settings: Settings, widths: list[int], which: int
) -> None:
    """libjpeg's only complaint is "extraneous bytes before marker 0xd?", and a lenient
    decode publishes shifted blocks."""
    damaged = flip_in_restart_interval(restart_jpeg(interval=8), which=which)
    assert strict_reason(damaged)
    config = settings.updated(widths=widths)
    with pytest.raises(CorruptImage, match=r"corrupt JPEG data .*before marker 0xd[0-7]"):
        run(damaged, "flipped.jpg", config)
    assert all_files(settings.store.origin_root) == []


def test_resync_at_the_end_of_a_progressive_scan_is_refused(settings: Settings) -> None:
    data = bytes(BIG.resize(0.25).jpegsave_buffer(Q=85, interlace=True, keep="none"))
    last = data.rfind(b"\xff\xda")  # the last scan: its damage shows at the EOI marker
    found = find_flip(data, last + 40, len(data) - 2, r"extraneous bytes before marker 0xd9")
    with pytest.raises(CorruptImage, match=r"before marker 0xd9"):
        run(found, "prog.jpg", settings)


def test_stray_bytes_before_a_later_scan_are_refused(settings: Settings) -> None:
    """Before the first scan they are harmless; once a scan has begun they mean lost data."""
    data = bytes(BIG.resize(0.25).jpegsave_buffer(Q=85, interlace=True, keep="none"))
    second = data.find(b"\xff\xda", scan_start(data))
    damaged = data[:second] + b"\x12\x34\x56" + data[second:]
    assert strict_reason(damaged)
    with pytest.raises(CorruptImage, match=r"extraneous bytes before marker 0xda"):
        run(damaged, "late.jpg", settings)


@pytest.mark.parametrize("marker", [0xDB, 0xC4, 0xC0, 0xDD, 0xDA, 0xE0, 0xFE],
                         ids=["DQT", "DHT", "SOF0", "DRI", "SOS", "APP0", "COM"])
def test_stray_bytes_before_any_header_marker_give_the_clean_picture(
    settings: Settings, marker: int
) -> None:
    clean = restart_jpeg(240, 160)
    if marker in (0xE0, 0xFE):
        clean = clean[:2] + segment(marker, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
                                    if marker == 0xE0 else b"hello") + clean[2:]
    at = clean.find(bytes((0xFF, marker)), 2)
    junk = clean[:at] + b"\x00\x01\xff\x00\x02" + clean[at:]
    assert strict_reason(junk)
    made = run(junk, "junk.jpg", settings)
    reference = run(clean, "clean.jpg", settings)
    assert [(v.width, v.height, v.bytes) for v in made.variants] == [
        (v.width, v.height, v.bytes) for v in reference.variants]
    assert [Path(v.path).name.split(".")[1] for v in made.variants] == [
        Path(v.path).name.split(".")[1] for v in reference.variants]  # the same bytes


def test_zeroed_scan_parameters_of_a_baseline_file_are_accepted(settings: Settings) -> None:
    """Some encoders write Ss=Se=0 in baseline files; libjpeg ignores them with a warning."""
    clean = restart_jpeg(240, 160)
    sos = clean.find(b"\xff\xda")
    end = scan_start(clean)
    zeroed = clean[:end - 3] + b"\x00\x00\x00" + clean[end:]
    assert strict_reason(zeroed) and sos < end
    made = run(zeroed, "zeroed.jpg", settings)
    assert [v.bytes for v in made.variants] == [
        v.bytes for v in run(clean, "clean.jpg", settings).variants]


@pytest.mark.parametrize("size", [(4000, 1), (17000, 2), (2, 17000), (1921, 1), (9, 7000)])
def test_strips_are_made(settings: Settings, size: tuple[int, int]) -> None:
    width, height = size
    manifest = run(strip(width, height), "strip.jpg", settings)
    assert (manifest.width, manifest.height) == (width, height)
    for variant in manifest.variants:
        image = pyvips.Image.new_from_file(str(settings.store.origin_root / variant.path))
        assert (image.width, image.height) == (variant.width, variant.height)
        assert max(image.width, image.height) <= 16383
        assert abs(image.avg() - (90 + 140 + 200) / 3) < 2


def test_a_strip_no_webp_can_hold_is_made_in_jpeg_only(settings: Settings) -> None:
    manifest = run(strip(1, 17000), "strip.jpg", settings)
    assert [(v.format, v.width, v.height) for v in manifest.variants] == [("jpeg", 1, 17000)]
    assert manifest.warnings == ["no webp: at 1x17000, even 1 pixel wide it would be over the "
                                 "16383 pixels a side it can hold"]
    with pytest.raises(LimitExceeded, match="too narrow for its height"):
        run(strip(1, 17000), "strip.jpg", settings.updated(formats="webp"))


def test_an_unknown_jfif_version_changes_nothing(settings: Settings) -> None:
    clean = restart_jpeg(240, 160)
    jfif = segment(0xE0, b"JFIF\x00\x02\x01\x00\x00\x01\x00\x01\x00\x00")
    newer = clean[:2] + jfif + clean[2:]
    assert "JFIF revision" in strict_reason(newer)
    made = run(newer, "v2.jpg", settings)
    assert [v.bytes for v in made.variants] == [
        v.bytes for v in run(clean, "clean.jpg", settings).variants]


def test_an_unknown_adobe_transform_is_refused_for_its_colours(settings: Settings) -> None:
    clean = restart_jpeg(240, 160)
    adobe = segment(0xEE, b"Adobe\x00\x64\x00\x00\x00\x00\x07")  # transform 7: no such one
    with pytest.raises(CorruptImage, match=r"unsupported JPEG coding \(an unknown Adobe colour"):
        run(clean[:2] + adobe + clean[2:], "adobe.jpg", settings)
