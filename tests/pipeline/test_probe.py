"""Probe: formats are sniffed from the bytes, limits are checked on the header."""

from __future__ import annotations

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import CorruptImage, LimitExceeded, UnsupportedFormat
from imgwarm.pipeline.probe import probe
from tests.support.images import bomb_jpeg, jpeg_with_exif, photo, without_scan_data


def test_jpeg_is_identified_whatever_its_name(settings: Settings) -> None:
    data = bytes(photo(120, 80).jpegsave_buffer())
    for name in ("a.jpg", "a.png", "noext", "a.webp"):
        info = probe(data, name, settings.image)
        assert (info.format, info.width, info.height) == ("jpeg", 120, 80)


def test_png_accepted_when_bytes_and_name_say_png(settings: Settings) -> None:
    data = bytes(photo(50, 40).pngsave_buffer())
    assert probe(data, "x.png", settings.image).format == "png"


@pytest.mark.parametrize("name", ["cogs.jpg", "cogs.jpeg", "cogs.webp"])
def test_png_renamed_is_refused_saying_what_it_is(settings: Settings, name: str) -> None:
    data = bytes(photo(50, 40).pngsave_buffer())
    with pytest.raises(UnsupportedFormat, match=r"content is a PNG image but the name says "):
        probe(data, name, settings.image)


def test_png_refused_when_not_accepted(settings: Settings) -> None:
    strict = load_settings(accept_png=False)
    data = bytes(photo(50, 40).pngsave_buffer())
    with pytest.raises(UnsupportedFormat, match=r"PNG image, not JPEG"):
        probe(data, "x.png", strict.image)


def test_webp_renamed_jpg_is_refused(settings: Settings) -> None:
    data = bytes(photo(50, 40).webpsave_buffer())
    with pytest.raises(UnsupportedFormat, match=r"x\.jpg: the content is a WebP image"):
        probe(data, "x.jpg", settings.image)


def test_empty_and_garbage(settings: Settings) -> None:
    with pytest.raises(UnsupportedFormat, match="empty file"):
        probe(b"", "e.jpg", settings.image)
    with pytest.raises(UnsupportedFormat, match="not a recognised image format"):
        probe(b"hello, this is text and not a picture", "t.jpg", settings.image)


def test_corrupt_header_is_refused(settings: Settings) -> None:
    data = bytes(photo(64, 64).jpegsave_buffer())
    sof = data.find(b"\xff\xc0")
    with pytest.raises(CorruptImage, match="corrupt JPEG header"):
        probe(data[:sof], "h.jpg", settings.image)


def test_bomb_refused_on_the_header(settings: Settings) -> None:
    data = bomb_jpeg(60000, 60000)
    with pytest.raises(LimitExceeded, match=r"60000x60000 is 3,600.0 megapixels.*max_pixels"):
        probe(data, "bomb.jpg", settings.image)
    # The same with no image data at all: refused before any pixel data is read.
    with pytest.raises(LimitExceeded, match="max_pixels"):
        probe(without_scan_data(data), "bomb.jpg", settings.image)


def test_pixel_and_byte_limits_are_settings() -> None:
    data = bytes(photo(100, 100).jpegsave_buffer())
    with pytest.raises(LimitExceeded, match="max_pixels"):
        probe(data, "a.jpg", load_settings(max_pixels=9_999).image)
    assert probe(data, "a.jpg", load_settings(max_pixels=10_000).image).width == 100
    with pytest.raises(LimitExceeded, match="max_bytes"):
        probe(data, "a.jpg", load_settings(max_bytes=len(data) - 1).image)


@pytest.mark.parametrize(("tag", "expected"), [(1, 1), (6, 6), (8, 8), (0, 1), (9, 1), (300, 1)])
def test_orientation_out_of_range_reads_as_1(settings: Settings, tag: int, expected: int) -> None:
    data = jpeg_with_exif(photo(60, 40), orientation=tag)
    info = probe(data, "o.jpg", settings.image)
    assert info.orientation == expected
    swapped = expected >= 5
    assert (info.displayed_width, info.displayed_height) == ((40, 60) if swapped else (60, 40))


@pytest.mark.parametrize("name", ["upload.tmp", "phpA1b2C3", "x.png", "x.PNG"])
def test_png_under_a_neutral_name_is_accepted(settings: Settings, name: str) -> None:
    data = bytes(photo(50, 40).pngsave_buffer())
    assert probe(data, name, settings.image).format == "png"


@pytest.mark.parametrize(
    ("make", "what"),
    [(lambda: photo(40, 30).gifsave_buffer(), "GIF"),
     (lambda: photo(40, 30).tiffsave_buffer(), "TIFF"),
     (lambda: b"<svg xmlns='http://www.w3.org/2000/svg'/>", "SVG"),
     (lambda: b"%PDF-1.4\n", "PDF")],
)
def test_other_formats_are_named_not_decoded(settings: Settings, make: object,
                                             what: str) -> None:
    data = bytes(make())  # type: ignore[operator]
    with pytest.raises(UnsupportedFormat, match=rf"the content is a {what}"):
        probe(data, "upload.jpg", settings.image)


def test_corrupt_png_header(settings: Settings) -> None:
    data = bytes(photo(50, 40).pngsave_buffer())
    with pytest.raises(CorruptImage, match="corrupt PNG header"):
        probe(data[:20], "cut.png", settings.image)
