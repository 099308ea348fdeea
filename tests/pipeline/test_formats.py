"""Sources in other formats (issue 25): WebP, AVIF (HEIF), TIFF and GIF are made as a JPEG is
(upright by their orientation, colours through their ICC profile, their description carried,
transparency kept or flattened, the same limits on the header), each from its bytes. HEIC
without a decoder in this build, JPEG XL, animations and mislabelled files are refused with
one line, and nothing of them is written.

The files are made by libvips' own savers, plus two real ones from libheif's test data
(tests/formats/SOURCES.md)."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import piexif
import pytest
import pyvips

from imgwarm.config import Settings
from imgwarm.exceptions import LimitExceeded, SourceError, UnsupportedFormat
from imgwarm.manifest import Manifest
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.pipeline.probe import probe
from imgwarm.store import Stores
from tests.support.cli import Cli
from tests.support.files import REPO, all_files
from tests.support.images import mean_delta_e
from tests.support.pipeline import decoded

SAMPLES = REPO / "tests" / "formats"
RED, BLUE = (200, 30, 30), (30, 30, 200)
DESCRIPTION = "Vélo rouge, côté bleu"


def scene() -> pyvips.Image:
    """600x400 as stored: red, with a blue strip down its left side (on top once turned by
    orientation 6, a quarter turn clockwise)."""
    red = (pyvips.Image.black(600, 400, bands=3) + list(RED)).cast("uchar")
    blue = (pyvips.Image.black(150, 400, bands=3) + list(BLUE)).cast("uchar")
    return red.insert(blue, 0, 0).copy(interpretation="srgb")


def tagged(image: pyvips.Image, orientation: int = 6) -> pyvips.Image:
    """``image`` with EXIF (Orientation, ImageDescription) and, for TIFF, its own tags."""
    image = image.copy()
    exif = piexif.dump({"0th": {piexif.ImageIFD.Orientation: orientation,
                                piexif.ImageIFD.ImageDescription: DESCRIPTION.encode()}})
    image.set_type(pyvips.GValue.blob_type, "exif-data", exif)
    image.set_type(pyvips.GValue.gint_type, "orientation", orientation)
    image.set_type(pyvips.GValue.gstr_type, "image-description", DESCRIPTION)
    return image


SAVERS: dict[str, tuple[str, Callable[[pyvips.Image], bytes]]] = {
    "webp": ("photo.webp", lambda im: bytes(im.webpsave_buffer(Q=95))),
    "avif": ("photo.avif", lambda im: bytes(im.heifsave_buffer(compression="av1", Q=90))),
    "tiff": ("photo.tif", lambda im: bytes(im.tiffsave_buffer())),
    "gif": ("photo.gif", lambda im: bytes(im.gifsave_buffer())),
}
ORIENTED = ("webp", "avif", "tiff")  # GIF holds no orientation, nor any EXIF


def make(tmp_path: Path, settings: Settings, name: str, data: bytes) -> Manifest:
    source = tmp_path / "in" / name
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(data)
    return optimize_file(source, settings=settings, stores=Stores.local(settings.store)).manifest


def pixel(image: pyvips.Image, x: float, y: float) -> list[float]:
    return list(image.flatten(background=[255, 255, 255]).getpoint(
        int(x * (image.width - 1)), int(y * (image.height - 1)))[:3] if image.hasalpha() else
        image.getpoint(int(x * (image.width - 1)), int(y * (image.height - 1)))[:3])


@pytest.mark.parametrize("fmt", list(SAVERS))
def test_each_format_is_made_upright_with_its_description(fmt: str, settings: Settings,
                                                          tmp_path: Path) -> None:
    name, save = SAVERS[fmt]
    manifest = make(tmp_path, settings, name, save(tagged(scene())))
    turned = fmt in ORIENTED
    assert (manifest.width, manifest.height) == ((400, 600) if turned else (600, 400))
    for output in ("webp", "jpeg"):
        image = decoded(settings, manifest, output)
        top, bottom = pixel(image, 0.5, 0.02), pixel(image, 0.5, 0.98)
        left, right = pixel(image, 0.02, 0.5), pixel(image, 0.98, 0.5)
        blue_at, red_at = (top, bottom) if turned else (left, right)
        assert blue_at[2] > 150 > blue_at[0] and red_at[0] > 150 > red_at[2], (output, fmt)
    jpeg = max((v for v in manifest.variants if v.format == "jpeg"), key=lambda v: v.width)
    ifd0 = piexif.load(str(settings.store.origin_root / jpeg.path))["0th"]
    if fmt == "gif":
        assert manifest.description is None
    else:
        assert manifest.description == DESCRIPTION
        assert ifd0[piexif.ImageIFD.ImageDescription].decode() == DESCRIPTION
    assert piexif.ImageIFD.Orientation not in ifd0  # upright now: nothing to turn again


@pytest.mark.parametrize("fmt", ["webp", "avif", "tiff"])
def test_colours_go_through_the_embedded_profile(fmt: str, settings: Settings,
                                                 tmp_path: Path) -> None:
    """The scene converted to Display P3 and tagged so: made back into sRGB, it matches the
    scene; read as if sRGB (the profile ignored) it would not."""
    green = pyvips.Image.black(200, 400).new_from_image([20, 220, 40]).cast("uchar")
    original = scene().insert(green, 400, 0)  # saturated: far apart in the two spaces
    p3 = original.icc_transform("p3", input_profile="srgb")
    name, save = SAVERS[fmt]
    manifest = make(tmp_path, settings, name, save(p3))
    made = decoded(settings, manifest, "webp")
    assert mean_delta_e(made, original) < 1.0  # (measured 0.3)
    assert mean_delta_e(p3.copy(interpretation="srgb"), original) > 2.5  # (3.0: it matters)


@pytest.mark.parametrize("fmt", ["webp", "avif", "gif"])
def test_transparency_is_kept_in_webp_and_flattened_on_white_in_jpeg(
        fmt: str, settings: Settings, tmp_path: Path) -> None:
    image = scene()
    alpha = (pyvips.Image.black(600, 400) + 255).insert(pyvips.Image.black(300, 400), 300, 0)
    name, save = SAVERS[fmt]
    manifest = make(tmp_path, settings, name, save(image.bandjoin(alpha.cast("uchar"))))
    webp = decoded(settings, manifest, "webp")
    assert webp.hasalpha() and webp.extract_band(3).getpoint(webp.width - 2, 10)[0] < 10
    jpeg = decoded(settings, manifest, "jpeg")
    assert jpeg.bands == 3 and min(jpeg.getpoint(jpeg.width - 2, 10)) > 240  # white
    assert pixel(jpeg, 0.4, 0.5)[0] > 150  # the opaque red half stays red


def animated(fmt: str) -> bytes:
    frames = [scene(), scene().flip("horizontal")]
    strip = pyvips.Image.arrayjoin(frames, across=1).copy()
    strip.set_type(pyvips.GValue.gint_type, "page-height", 400)
    return bytes(strip.gifsave_buffer() if fmt == "gif" else strip.webpsave_buffer())


def refused(tmp_path: Path, settings: Settings, name: str, data: bytes) -> str:
    """The one line a source is refused with; nothing of it written."""
    with pytest.raises(SourceError) as error:
        make(tmp_path, settings, name, data)
    origin = settings.store.origin_root
    assert not origin.exists() or all_files(origin) == []
    said = str(error.value)
    assert "\n" not in said and said.startswith(str(tmp_path / "in" / name))
    return said


def test_an_animation_is_refused_not_made_from_one_frame(settings: Settings,
                                                         tmp_path: Path) -> None:
    for fmt, name in (("gif", "moving.gif"), ("webp", "moving.webp")):
        said = refused(tmp_path, settings, name, animated(fmt))
        assert f"animated {fmt.upper() if fmt == 'gif' else 'WebP'} (2 frames)" in said


def test_a_tiff_of_several_pages_is_made_from_its_first(settings: Settings,
                                                        tmp_path: Path) -> None:
    first, second = scene(), (pyvips.Image.black(600, 400, bands=3) + 90).cast("uchar")
    pages = pyvips.Image.arrayjoin([first, second], across=1).copy()
    pages.set_type(pyvips.GValue.gint_type, "page-height", 400)
    manifest = make(tmp_path, settings, "pages.tif", bytes(pages.tiffsave_buffer()))
    assert (manifest.width, manifest.height) == (600, 400)
    assert "a TIFF of 2 pages: the first page made" in manifest.warnings
    assert mean_delta_e(decoded(settings, manifest, "webp"), first) < 2.0


def test_heic_without_its_decoder_and_jpeg_xl_are_refused_in_one_line(
        settings: Settings, tmp_path: Path) -> None:
    heic = (SAMPLES / "rainbow-451x461.heic").read_bytes()
    said = refused(tmp_path, settings, "phone.heic", heic)
    assert "HEVC-coded HEIC image" in said and "convert it to JPEG" in said
    jxl = b"\xff\x0a" + bytes(200)
    assert "the content is a JPEG XL image, not JPEG, PNG, WebP" in refused(
        tmp_path, settings, "x.jxl", jxl)


def test_a_real_avif_is_made(settings: Settings, tmp_path: Path) -> None:
    """libheif's own test file: an AVIF in the compact 'mini' box form, with alpha."""
    data = (SAMPLES / "simple_osm_tile_alpha.avif").read_bytes()
    manifest = make(tmp_path, settings, "tile.avif", data)
    source = pyvips.Image.heifload_buffer(data)
    assert (manifest.width, manifest.height) == (source.width, source.height) == (256, 256)
    assert mean_delta_e(decoded(settings, manifest, "webp"), source) < 2.0


@pytest.mark.parametrize(("fmt", "name"), [("webp", "photo.gif"), ("gif", "photo.webp"),
                                           ("tiff", "photo.png"), ("avif", "photo.tif")])
def test_a_name_that_says_another_format_is_refused(fmt: str, name: str, settings: Settings,
                                                    tmp_path: Path) -> None:
    data = SAVERS[fmt][1](scene())
    assert "refusing a mislabelled file" in refused(tmp_path, settings, name, data)


def test_avif_and_heic_names_are_one_family(settings: Settings, tmp_path: Path) -> None:
    data = SAVERS["avif"][1](scene())
    assert make(tmp_path, settings, "photo.heic", data).width == 600


def test_source_formats_says_which_are_taken(settings: Settings, tmp_path: Path) -> None:
    narrow = settings.updated(source_formats="jpeg,png")
    said = refused(tmp_path, narrow, "photo.tif", SAVERS["tiff"][1](scene()))
    assert said.endswith("the content is a TIFF image, not JPEG or PNG")


# Bombs: each format's header claims a huge picture; refused before decoding.

def _tiff_bomb() -> bytes:
    data = bytearray(scene().tiffsave_buffer())
    order = "<" if data[:2] == b"II" else ">"
    (ifd,) = struct.unpack_from(order + "I", data, 4)
    (count,) = struct.unpack_from(order + "H", data, ifd)
    for n in range(count):
        at = ifd + 2 + 12 * n
        tag, kind = struct.unpack_from(order + "HH", data, at)
        if tag in (256, 257):  # ImageWidth, ImageLength
            struct.pack_into(order + ("H" if kind == 3 else "I"), data, at + 8, 60000)
    return bytes(data)


def _gif_bomb() -> bytes:
    data = bytearray(scene().gifsave_buffer())
    struct.pack_into("<HH", data, 6, 60000, 60000)  # the logical screen
    table = 3 * 2 ** ((data[10] & 7) + 1) if data[10] & 0x80 else 0
    at = data.index(b"\x2c", 13 + table)  # the first image descriptor
    struct.pack_into("<HH", data, at + 5, 60000, 60000)
    return bytes(data)


def _webp_bomb() -> bytes:
    data = bytearray(scene().webpsave_buffer(Q=80))
    frame = data.index(b"\x9d\x01\x2a")  # a VP8 key frame's start code, then its size
    struct.pack_into("<HH", data, frame + 3, 16383, 16383)
    if data[12:16] == b"VP8X":
        data[24:30] = (16382).to_bytes(3, "little") * 2  # the canvas, minus one
    return bytes(data)


@pytest.mark.parametrize(("name", "bomb"), [("bomb.tif", _tiff_bomb), ("bomb.gif", _gif_bomb),
                                            ("bomb.webp", _webp_bomb)])
def test_a_bomb_is_refused_on_its_header(name: str, bomb: Callable[[], bytes],
                                         settings: Settings, tmp_path: Path) -> None:
    with pytest.raises(LimitExceeded, match=r"megapixels.*max_pixels\); refused before"):
        probe(bomb(), name, settings.image)
    assert "max_pixels" in refused(tmp_path, settings, name, bomb())


def test_an_avif_over_max_pixels_is_refused_on_its_header(settings: Settings) -> None:
    data = SAVERS["avif"][1](scene())
    with pytest.raises(LimitExceeded, match="max_pixels"):
        probe(data, "a.avif", settings.updated(max_pixels=239_999).image)
    assert probe(data, "a.avif", settings.updated(max_pixels=240_000).image).width == 600


@pytest.mark.parametrize("fmt", list(SAVERS))
def test_the_whole_decoded_image_counts_in_the_memory_estimate(fmt: str,
                                                               settings: Settings) -> None:
    found = probe(SAVERS[fmt][1](scene()), SAVERS[fmt][0], settings.image)
    # Bytes a pixel the decoder holds (pipeline/memory.py): libvips' two RGBA images for
    # WebP, 5 a channel and 2 a channel-byte through libheif, libnsgif's RGBA bitmap, and
    # a strip or tile as large as the image for TIFF (8-bit RGB here).
    held = {"webp": 8, "avif": 3 * (5 + 2), "gif": 4, "tiff": 3}[fmt]
    assert found.buffered == 600 * 400 * held
    with pytest.raises(UnsupportedFormat):
        probe(SAVERS[fmt][1](scene()), SAVERS[fmt][0],
              settings.updated(source_formats="jpeg").image)


def test_a_folder_of_every_format_is_made_by_the_command(settings: Settings,
                                                         tmp_path: Path) -> None:
    folder = tmp_path / "uploads"
    folder.mkdir()
    for name, save in SAVERS.values():
        (folder / name.replace("photo", f"photo-{name.rsplit('.', 1)[1]}")).write_bytes(
            save(tagged(scene())))
    env = {"IMGWARM_ORIGIN_ROOT": str(tmp_path / "o"), "IMGWARM_MANIFEST_ROOT": str(tmp_path / "m")}
    done = Cli()("optimize", "--json", str(folder), env=env)
    assert done.exit_code == 0, done.stderr
    made = {Path(r["source"]).name: r for r in map(json.loads, done.stdout.splitlines())}
    assert sorted(made) == sorted(p.name for p in folder.iterdir())
    assert all(r["ok"] and len(r["variants"]) == 4 for r in made.values()), made
