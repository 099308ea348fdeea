"""Decode: damaged data is refused on every decode path; benign warnings are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import CorruptImage
from imgwarm.pipeline.decode import jpeg_shrink
from tests.conftest import all_files
from tests.images import mean_abs_diff, photo, stray_bytes_jpeg
from tests.pipeline.helpers import decoded, run

BIG = photo(2400, 1600, seed=5)


@pytest.mark.parametrize("interlace", [False, True], ids=["baseline", "progressive"])
@pytest.mark.parametrize("widths", [[2400], [320]], ids=["full-decode", "shrink-on-load"])
def test_truncated_jpeg_is_refused(settings: Settings, interlace: bool, widths: list[int]) -> None:
    data = bytes(BIG.jpegsave_buffer(Q=90, interlace=interlace))
    cut = data[: len(data) * 2 // 3]
    config = load_settings(**{**settings.model_dump(), "widths": widths})
    with pytest.raises(CorruptImage, match=r"cut\.jpg: truncated JPEG data"):
        run(cut, "cut.jpg", config)
    assert all_files(settings.origin_root) == []
    assert all_files(settings.manifest_root) == []


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
    config = load_settings(**{**settings.model_dump(), "widths": widths})
    with pytest.raises(CorruptImage, match=r"corrupt JPEG data"):
        run(data, "marker.jpg", config)
    assert all_files(settings.origin_root) == []


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
    config = load_settings(**{**settings.model_dump(), "widths": [300]})  # 8x: shrink 8
    manifest = run(data, "big.jpg", config)
    out = decoded(config, manifest)
    assert (out.width, out.height) == (300, 200)
    assert mean_abs_diff(out, BIG) < 3.0
