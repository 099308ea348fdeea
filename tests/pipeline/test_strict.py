"""Every source format decoded strictly (issue 38): a damaged GIF, TIFF or PNG is refused with
one line, never published with damage; a clean file of each format still makes the same
picture. Also each refusal says the decoder's own reason (libheif's, not libvips' probing; a
FourCC's raw bytes included), animated AVIF is refused as animated GIF and WebP are, a name
that claims any other format is a mislabel, and a TIFF's Windows-1252 description is read."""

from __future__ import annotations

import io
import struct
import time
import zlib

import numpy
import pytest
import pyvips
from PIL import Image

from imgwarm.config import Settings
from imgwarm.samples import photo
from tests.support.files import REPO
from tests.support.hostile import ifd_end, tiff
from tests.support.images import mean_delta_e
from tests.support.pipeline import decoded, refused, run

SAMPLES = REPO / "tests" / "formats"

PHOTO = photo(600, 400, seed=7)


def _lenient(load: str, data: bytes) -> pyvips.Image:
    """The picture as the loader gives it when only its errors count (before issue 38)."""
    return getattr(pyvips.Image, load)(data, fail_on="error").copy_memory()


def gif_with_a_zeroed_run() -> bytes:
    data = bytearray(PHOTO.gifsave_buffer())
    middle = len(data) // 2
    data[middle:middle + 200] = bytes(200)  # a run of the LZW data zeroed
    return bytes(data)


def gif_cut_short(blocks: int = 5) -> bytes:
    """The GIF with its frame's LZW data ending after ``blocks`` sub-blocks, then the frame's
    terminator and the trailer, as if its middle were lost: libnsgif says nothing, even with
    fail_on="warning", and leaves the rest of the frame blank."""
    data = bytes(PHOTO.gifsave_buffer())
    pos = 13 + (3 << ((data[10] & 7) + 1) if data[10] & 0x80 else 0)
    while data[pos] == 0x21:  # extensions: label, then sub-blocks
        pos += 2
        while data[pos]:
            pos += data[pos] + 1
        pos += 1
    assert data[pos] == 0x2C  # the image descriptor
    flags = data[pos + 9]
    pos += 10 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0) + 1  # past the code size
    for _ in range(blocks):
        pos += data[pos] + 1
    return data[:pos] + b"\x00\x3b"


def strip_tiff(count_fraction: float) -> bytes:
    """A 64x64 uncompressed strip TIFF whose StripByteCounts says ``count_fraction`` of the
    strip (the file itself whole): libtiff reads so much and warns that the rest is missing."""
    pixels = bytes(PHOTO.crop(0, 0, 64, 64).write_to_memory())
    entries = [(256, 3, 1, struct.pack("<H", 64)), (257, 3, 1, struct.pack("<H", 64)),
               (258, 3, 1, struct.pack("<H", 8)), (259, 3, 1, struct.pack("<H", 1)),
               (262, 3, 1, struct.pack("<H", 2)), (273, 4, 1, struct.pack("<L", ifd_end(9))),
               (277, 3, 1, struct.pack("<H", 3)), (278, 3, 1, struct.pack("<H", 64)),
               (279, 4, 1, struct.pack("<L", int(len(pixels) * count_fraction)))]
    return tiff(entries, tail=pixels)


def sparse_tiled_tiff() -> bytes:
    """12000x8000 in 16x16 tiles (375,000 of them), one present: under 1 KB."""
    tile = bytes(16 * 16 * 3)
    entries = [(256, 4, 1, struct.pack("<L", 12000)), (257, 4, 1, struct.pack("<L", 8000)),
               (258, 3, 1, struct.pack("<H", 8)), (259, 3, 1, struct.pack("<H", 1)),
               (262, 3, 1, struct.pack("<H", 2)), (277, 3, 1, struct.pack("<H", 3)),
               (322, 3, 1, struct.pack("<H", 16)), (323, 3, 1, struct.pack("<H", 16)),
               (324, 4, 1, struct.pack("<L", ifd_end(10))),
               (325, 4, 1, struct.pack("<L", len(tile)))]
    return tiff(entries, tail=tile)


def test_a_gif_with_damaged_frame_data_is_refused(settings: Settings) -> None:
    data = gif_with_a_zeroed_run()
    assert mean_delta_e(_lenient("gifload_buffer", data), PHOTO) > 3  # what was published
    said = refused(data, "damaged.gif", settings)
    assert "damaged.gif: corrupt or truncated GIF data (" in said


def test_a_gif_whose_frame_data_ends_early_is_refused(settings: Settings) -> None:
    data = gif_cut_short()
    lenient = pyvips.Image.gifload_buffer(data, fail_on="warning").copy_memory()
    assert mean_delta_e(lenient, PHOTO) > 3  # libnsgif's strictest read: published before
    said = refused(data, "short.gif", settings)
    assert "corrupt or truncated GIF data (image file is truncated" in said


def test_a_tiff_strip_shorter_than_its_rows_is_refused(settings: Settings) -> None:
    assert _lenient("tiffload_buffer", strip_tiff(1.0)).width == 64  # whole: made (below)
    _lenient("tiffload_buffer", strip_tiff(0.5))  # passed before
    said = refused(strip_tiff(0.5), "short.tif", settings)
    assert "corrupt or truncated TIFF data" in said
    made = run(strip_tiff(1.0), "whole.tif", settings)
    assert mean_delta_e(decoded(settings, made, "webp"), PHOTO.crop(0, 0, 64, 64)) < 2.0


def test_a_tiled_tiff_with_most_tiles_missing_is_refused_fast(settings: Settings) -> None:
    data = sparse_tiled_tiff()
    assert len(data) < 1024
    start = time.monotonic()
    said = refused(data, "sparse.tif", settings)
    assert time.monotonic() - start < 5  # (0.1 s; the lenient decode wrote 100 MP of black)
    assert "corrupt or truncated TIFF data" in said and "Invalid tile byte count" in said


def test_a_truncated_png_is_refused_as_truncated(settings: Settings) -> None:
    data = bytes(PHOTO.pngsave_buffer())
    said = refused(data[:len(data) * 2 // 3], "cut.png", settings)
    assert "corrupt or truncated PNG data" in said and "unable to copy" not in said


def test_a_png_whose_ancillary_chunk_is_damaged_is_still_made(settings: Settings) -> None:
    data = bytes(PHOTO.pngsave_buffer())
    text = b"tEXt" + b"Comment\x00hello"
    chunk = struct.pack(">I", len(text) - 4) + text + struct.pack(">I", zlib.crc32(text) ^ 1)
    made = run(data[:33] + chunk + data[33:], "crc.png", settings)
    assert mean_delta_e(decoded(settings, made, "webp"), PHOTO) < 2.0


@pytest.mark.parametrize("name", ["clean.gif", "clean.tif", "clean.webp", "clean.avif",
                                  "clean.png"])
def test_a_clean_file_of_each_format_makes_the_same_picture(name: str, settings: Settings) -> None:
    suffix = name.rsplit(".", 1)[1]
    data = bytes(PHOTO.gifsave_buffer() if suffix == "gif" else PHOTO.tiffsave_buffer(
        compression="lzw") if suffix == "tif" else PHOTO.webpsave_buffer(Q=95) if
        suffix == "webp" else PHOTO.heifsave_buffer(compression="av1", Q=90) if
        suffix == "avif" else PHOTO.pngsave_buffer())
    made = run(data, name, settings)
    assert made.warnings == []
    assert mean_delta_e(decoded(settings, made, "webp"), PHOTO) < (4.0 if suffix == "gif"
                                                                   else 2.0)


def test_a_small_or_truncated_heif_says_libheifs_reason(settings: Settings) -> None:
    small = bytes(PHOTO.crop(0, 0, 16, 16).heifsave_buffer(compression="av1"))
    assert len(small) < 1024
    damaged = small.replace(b"iloc", b"ilox")
    said = refused(damaged, "small.avif", settings)
    assert "No 'iloc' box" in said and "bad seek" not in said
    whole = bytes(PHOTO.heifsave_buffer(compression="av1", Q=90))
    said = refused(whole[:len(whole) * 2 // 3], "cut.avif", settings)
    assert "Unexpected end of file" in said and "bad seek" not in said


def test_raw_bytes_in_libheifs_error_are_one_line(settings: Settings) -> None:
    """A brand with a non-UTF-8 byte, which libheif quotes: pyvips cannot decode the error
    text (UnicodeDecodeError) and left it in libvips' buffer for the next source."""
    data = bytearray((SAMPLES / "simple_osm_tile_alpha.avif").read_bytes())
    data[12] = 0xE9  # the 'avif' brand of its compact ('mini') form
    said = refused(bytes(data), "brand.avif", settings)
    assert "header: heif: Unsupported file-type" in said and "brand \\xe9vif" in said
    assert "internal error" not in said
    after = (SAMPLES / "simple_osm_tile_alpha.avif").read_bytes()
    assert run(after, "after.avif", settings).width == 256  # the next source is not hit


def animated_avif(frames: int = 3) -> bytes:
    pictures = [Image.fromarray(numpy.full((64, 64, 3), 40 + 80 * n, numpy.uint8))
                for n in range(frames)]
    out = io.BytesIO()
    pictures[0].save(out, "AVIF", save_all=True, append_images=pictures[1:], duration=100)
    return out.getvalue()


def test_an_animated_avif_is_refused(settings: Settings) -> None:
    data = animated_avif()
    assert data[8:12] == b"avis" and pyvips.Image.heifload_buffer(data).width == 64
    said = refused(data, "moving.avif", settings)
    assert "an animated AVIF (3 frames)" in said


@pytest.mark.parametrize(("name", "data"), [
    ("photo.bmp", lambda: PHOTO.pngsave_buffer()), ("photo.svg", lambda: PHOTO.webpsave_buffer()),
    ("photo.jxl", lambda: PHOTO.gifsave_buffer()), ("photo.pdf", lambda: PHOTO.tiffsave_buffer())])
def test_a_name_that_claims_any_other_format_is_refused(name: str, data: object,
                                                        settings: Settings) -> None:
    assert callable(data)
    said = refused(bytes(data()), name, settings)
    assert "refusing a mislabelled file" in said


def test_a_windows_1252_tiff_description_is_read_as_such(settings: Settings) -> None:
    image = PHOTO.copy()
    image.set_type(pyvips.GValue.gstr_type, "image-description", "cafX")
    data = bytes(image.tiffsave_buffer()).replace(b"cafX\x00", b"caf\xe9\x00")
    assert data.count(b"caf\xe9\x00") == 1
    assert run(data, "cafe.tif", settings).description == "café"
