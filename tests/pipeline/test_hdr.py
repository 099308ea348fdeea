"""Ultra HDR in, Ultra HDR out (issue 25): every JPEG variant of a source with a gain map
carries it, resized with the picture and turned with it, and its HDR rendition (libvips'
uhdr2scRGB) matches the source's; WebP stays SDR; an SDR source is made exactly as before (a
pinned test); a bogus or damaged gain map leaves the photo SDR, with a warning where there was
one to read.

Sources: the corpus's real Ultra HDR photo (libvips' test image, 3840x2160), and ones made
here by libvips' uhdrsave from an HDR picture (linear light, scRGB)."""

from __future__ import annotations

import io
import math
import struct
from pathlib import Path

import numpy
import piexif
import pytest
import pyvips
import simplejpeg

from imgwarm.config import Settings
from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.gainmap import metadata_problem
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.pipeline.probe import probe
from imgwarm.store import Stores
from tests.support.files import REPO
from tests.support.hostile import scan_start
from tests.support.images import jpeg_with_exif, photo

ULTRA_HDR = REPO / "tests" / "corpus" / "ultra-hdr.jpg"
BRIGHT, DIM = (4.0, 3.0, 2.0), (0.4, 0.3, 0.2)  # linear light: 1.0 is SDR white


def luminance(image: pyvips.Image) -> float:
    """Mean linear luminance (Rec. 709) of an scRGB picture."""
    return float((image[0] * 0.2126 + image[1] * 0.7152 + image[2] * 0.0722).avg())


def luminance_plane(image: pyvips.Image) -> numpy.ndarray:
    plane = (image[0] * 0.2126 + image[1] * 0.7152 + image[2] * 0.0722).cast("float")
    return numpy.ndarray(buffer=plane.write_to_memory(), dtype=numpy.float32,
                         shape=(plane.height, plane.width))


def median_relative_error(found: pyvips.Image, reference: pyvips.Image) -> float:
    """The median, over pixels, of |found - reference| / reference in linear luminance."""
    a, b = luminance_plane(found), luminance_plane(reference)
    return float(numpy.median(numpy.abs(a - b) / (b + 0.05)))


def synthetic(orientation: int = 1) -> bytes:
    """An Ultra HDR JPEG, 800x400 as stored: a bright (HDR) band on the left 300 pixels, the
    rest dim; with EXIF Orientation when asked."""
    bright = pyvips.Image.black(300, 400, bands=3) + list(BRIGHT)
    dim = pyvips.Image.black(500, 400, bands=3) + list(DIM)
    hdr = bright.join(dim, "horizontal").cast("float").copy(interpretation="scrgb")
    data = bytes(hdr.uhdrsave_buffer(Q=92))
    if orientation == 1:
        return data
    out = io.BytesIO()
    piexif.insert(piexif.dump({"0th": {piexif.ImageIFD.Orientation: orientation}}), data, out)
    return out.getvalue()


def make(tmp_path: Path, settings: Settings, name: str, data: bytes) -> Manifest:
    source = tmp_path / "in" / name
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(data)
    return optimize_file(source, settings=settings, stores=Stores.local(settings.store)).manifest


def opened(settings: Settings, variant: Variant) -> pyvips.Image:
    return pyvips.Image.new_from_file(str(settings.store.origin_root / variant.path))


def gain_of(image: pyvips.Image) -> pyvips.Image | None:
    if not image.get_typeof("gainmap-data"):
        return None
    return pyvips.Image.jpegload_buffer(image.get("gainmap-data"))


def test_every_jpeg_variant_of_an_ultra_hdr_photo_carries_its_gain_map(
        settings: Settings, tmp_path: Path) -> None:
    data = ULTRA_HDR.read_bytes()
    source = pyvips.Image.uhdrload_buffer(data)
    source_gain = gain_of(source)
    assert source_gain is not None
    source_hdr = luminance(source.uhdr2scRGB())
    manifest = make(tmp_path, settings, "phone.jpg", data)
    jpegs = [v for v in manifest.variants if v.format == "jpeg"]
    assert [v.width for v in jpegs] == [320, 680, 860, 1080, 1290, 1920]  # every width: HDR
    for variant in jpegs:
        image = opened(settings, variant)
        gain = gain_of(image)
        assert variant.hdr and gain is not None, variant
        assert (gain.width, gain.height) == (round(source_gain.width * variant.width / 3840),
                                             round(source_gain.height * variant.height / 2160))
        for name in ("gainmap-max-content-boost", "gainmap-min-content-boost", "gainmap-gamma"):
            assert image.get(name) == pytest.approx(source.get(name), rel=1e-3), name
        rendition = image.uhdr2scRGB()
        assert luminance(rendition) == pytest.approx(source_hdr, rel=0.05)
        # per pixel: the source's rendition at this size (median error measured 1.0-2.3%;
        # fine detail differs more, JPEG-compressed at 320 px: 95th percentile 7-26%)
        reference = source.uhdr2scRGB().resize(variant.width / 3840,
                                               vscale=variant.height / 2160)
        assert median_relative_error(rendition, reference) < 0.05, variant.width
        # the SDR picture is the source's, resized: an SDR screen sees what it saw before
        sdr = source.resize(variant.width / 3840, vscale=variant.height / 2160)
        assert abs(image.avg() - sdr.avg()) < 2.0
    for variant in (v for v in manifest.variants if v.format == "webp"):
        assert not variant.hdr and gain_of(opened(settings, variant)) is None
    assert "hdr" in manifest.model_dump()["variants"][1]  # the JPEG's, in the manifest
    assert "hdr" not in manifest.model_dump()["variants"][0]  # an SDR variant as before


def test_the_gain_map_is_turned_with_the_picture(settings: Settings, tmp_path: Path) -> None:
    """Orientation 6 (a quarter turn clockwise): the bright band, on the left as stored, is on
    top once upright, in the SDR picture and in the HDR rendition alike."""
    manifest = make(tmp_path, settings, "turned.jpg", synthetic(orientation=6))
    assert (manifest.width, manifest.height) == (400, 800)
    variant = max((v for v in manifest.variants if v.format == "jpeg"), key=lambda v: v.width)
    image = opened(settings, variant)
    gain = gain_of(image)
    assert gain is not None and gain.width < gain.height  # turned too
    hdr = image.uhdr2scRGB()
    band = round(300 * variant.height / 800)
    top = luminance(hdr.crop(0, 0, hdr.width, band - 8))
    bottom = luminance(hdr.crop(0, band + 8, hdr.width, hdr.height - band - 8))
    bright = 0.2126 * BRIGHT[0] + 0.7152 * BRIGHT[1] + 0.0722 * BRIGHT[2]
    dim = 0.2126 * DIM[0] + 0.7152 * DIM[1] + 0.0722 * DIM[2]
    assert top == pytest.approx(bright, rel=0.1) and bottom == pytest.approx(dim, rel=0.1)


def test_an_sdr_source_is_made_exactly_as_before(settings: Settings, tmp_path: Path) -> None:
    """Pinned: the names (content hashes) of an SDR photo's variants, as the code before gain
    maps made them (with this wheel's libvips 8.18 and Pillow: a new encoder changes them)."""
    data = jpeg_with_exif(photo(1200, 800, seed=5), quality=90)
    manifest = make(tmp_path, settings.updated(widths="320,640,1280,1920"), "pinned.jpg", data)
    assert sorted(Path(v.path).name for v in manifest.variants) == [
        "pinned.15283104fad9a20e.webp", "pinned.50e173a2133e7a0a.webp",
        "pinned.5840e6fe72a5ff75.jpg", "pinned.620d42bfe99550a2.webp",
        "pinned.d8a1bd9b1862ecdf.jpg", "pinned.f556f513c6e5ad3e.jpg"]
    assert not any(v.hdr for v in manifest.variants)
    assert all(gain_of(opened(settings, v)) is None for v in manifest.variants)


def test_a_bogus_gain_map_tag_is_made_sdr(settings: Settings, tmp_path: Path) -> None:
    """An SDR JPEG whose XMP claims a gain map (hdrgm), with no second picture."""
    data = jpeg_with_exif(photo(800, 500, seed=3), quality=90)
    xmp = (b'http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
           b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description '
           b'xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0" '
           b'hdrgm:GainMapMax="2.0"/></rdf:RDF></x:xmpmeta>')
    segment = b"\xff\xe1" + (len(xmp) + 2).to_bytes(2, "big") + xmp
    manifest = make(tmp_path, settings, "claims.jpg", data[:2] + segment + data[2:])
    assert not any(v.hdr for v in manifest.variants) and manifest.warnings == []


def without_segment(data: bytes, marker: int, start: bytes) -> bytes:
    """The JPEG without its first header segment of ``marker`` whose data starts so."""
    at = 2
    while data[at + 1] != 0xDA:
        length = int.from_bytes(data[at + 2:at + 4], "big")
        if data[at + 1] == marker and data[at + 4:at + 4 + len(start)] == start:
            return data[:at] + data[at + 2 + length:]
        at += 2 + length
    raise AssertionError("no such segment")


def test_a_second_picture_that_is_no_gain_map_is_left_alone(settings: Settings,
                                                            tmp_path: Path) -> None:
    """Cameras put previews after the picture, found through MPF as a gain map is; without
    the picture's own gain-map tag (ISO 21496-1's APP2, or hdrgm XMP) it is not read as one,
    and no warning is given."""
    data = synthetic()
    plain = without_segment(data, 0xE2, b"urn:iso:std:iso:ts:21496:-1")
    assert b"MPF\x00" in plain[:2000] and pyvips.Image.new_from_buffer(plain, "").get(
        "vips-loader") == "uhdrload_buffer"  # libvips alone would still take it for HDR
    manifest = make(tmp_path, settings, "preview.jpg", plain)
    assert not any(v.hdr for v in manifest.variants) and manifest.warnings == []
    assert all(gain_of(opened(settings, v)) is None for v in manifest.variants)


def _cut_gain_map(data: bytes) -> bytes:
    """The file cut in the middle of its second picture (the gain map, right after the first
    picture's end marker): the first is whole."""
    second = data.index(b"\xff\xd9\xff\xd8") + 2
    return data[:second + (len(data) - second) // 2]


def test_a_gain_map_cut_short_leaves_the_photo_sdr_with_a_warning(
        settings: Settings, tmp_path: Path) -> None:
    cut = _cut_gain_map(synthetic())
    manifest = make(tmp_path, settings, "cut.jpg", cut)
    assert (manifest.width, manifest.height) == (800, 400)
    assert not any(v.hdr for v in manifest.variants)
    assert any("HDR gain map cannot be read" in w and "made SDR only" in w
               for w in manifest.warnings), manifest.warnings
    assert all(gain_of(opened(settings, v)) is None for v in manifest.variants)


def test_the_gain_map_counts_in_the_memory_estimate(settings: Settings) -> None:
    data = ULTRA_HDR.read_bytes()
    found = probe(data, "phone.jpg", settings.image)
    assert found.gainmap is not None and (found.gainmap.width, found.gainmap.height) == (960, 540)
    sdr = probe(jpeg_with_exif(photo(64, 64), quality=90), "sdr.jpg", settings.image)
    assert sdr.gainmap is None
    assert found.buffered >= 960 * 540 * found.gainmap.bands


# Issue 38: the gain map is read as strictly as the picture, and its metadata is checked
# against what libultrahdr's encoder takes; either failing leaves the photo SDR, warned.

def _split(data: bytes) -> tuple[bytes, bytes]:
    """The primary picture (with its MPF segment) and the gain map's JPEG after it."""
    second = data.index(b"\xff\xd9\xff\xd8") + 2
    return data[:second], data[second:]


def _with_gain_map(data: bytes, gain: bytes) -> bytes:
    """``data`` with another gain map JPEG, its size in the MPF index made to match."""
    primary, _ = _split(data)
    out = bytearray(primary + gain)
    mpf = out.index(b"MPF\x00") + 4  # a big-endian TIFF block: the MP Entry tag's value
    for entry in range(mpf + 10, mpf + 10 + 12 * int.from_bytes(out[mpf + 8:mpf + 10], "big"),
                       12):
        if out[entry:entry + 2] == b"\xb0\x02":
            second = mpf + int.from_bytes(out[entry + 8:entry + 12], "big") + 16
            struct.pack_into(">I", out, second + 4, len(gain))
    return bytes(out)


def _sdr_with_warning(manifest: Manifest, settings: Settings, wanted: str) -> None:
    assert not any(v.hdr for v in manifest.variants)
    assert all(gain_of(opened(settings, v)) is None for v in manifest.variants)
    assert any(wanted in w and "made SDR only" in w for w in manifest.warnings), \
        manifest.warnings


def test_a_gain_map_relabelled_sof9_leaves_the_photo_sdr(settings: Settings,
                                                         tmp_path: Path) -> None:
    """Huffman data read as arithmetic-coded: jpegload decoded it into noise, warning-free."""
    data = synthetic()
    _, gain = _split(data)
    relabelled = gain.replace(b"\xff\xc0", b"\xff\xc9", 1)
    pyvips.Image.jpegload_buffer(relabelled, fail_on="warning").avg()  # what passed before
    manifest = make(tmp_path, settings, "sof9.jpg", _with_gain_map(data, relabelled))
    _sdr_with_warning(manifest, settings, "HDR gain map cannot be read (a SOF9 frame")


def _flipped_scan(gain: bytes) -> bytes:
    """The first bit flip in the gain map's scan that jpegload (fail_on="warning") passes and
    TurboJPEG's strict decode refuses."""
    for at in range(scan_start(gain) + 16, len(gain) - 2):
        if gain[at] == 0xFF or gain[at - 1] == 0xFF:
            continue  # not a marker or a stuffed byte: a flip in the coded data itself
        for bit in range(8):
            flipped = bytearray(gain)
            flipped[at] ^= 1 << bit
            try:
                pyvips.Image.jpegload_buffer(bytes(flipped), fail_on="warning").avg()
                simplejpeg.decode_jpeg(bytes(flipped), colorspace="GRAY", strict=True)
            except pyvips.Error:
                continue
            except ValueError:
                return bytes(flipped)
    raise AssertionError("no such flip")


def test_a_gain_map_with_flipped_scan_bits_leaves_the_photo_sdr(settings: Settings,
                                                                tmp_path: Path) -> None:
    data = synthetic()
    flipped = _flipped_scan(_split(data)[1])
    manifest = make(tmp_path, settings, "flipped.jpg", _with_gain_map(data, flipped))
    assert (manifest.width, manifest.height) == (800, 400)
    _sdr_with_warning(manifest, settings, "HDR gain map cannot be read (corrupt JPEG data")


ISO = b"urn:iso:std:iso:ts:21496:-1\x00"
LOG2_BOOST = (0x59F541, 0x100000)  # what uhdrsave wrote for the synthetic photo: 5.6


def _iso(flags: int = 0x40, base: tuple[int, int] = (0, 1),
         alternate: tuple[int, int] = LOG2_BOOST,
         channels: tuple[tuple[tuple[int, int], ...], ...] = (
             ((0, 1), LOG2_BOOST, (1, 1), (0, 1), (0, 1)),)) -> bytes:
    """An ISO 21496-1 gain map metadata block (no common denominator): versions, flags, the
    base and alternate HDR headrooms, then a channel's min, max, gamma, base and alternate
    offsets, each a fraction (log2 for the headrooms and boosts)."""
    block = b"\x00\x00\x00\x00" + bytes([flags]) + struct.pack(">iI", *base) + struct.pack(
        ">iI", *alternate)
    return block + b"".join(struct.pack(">iI", *f) for channel in channels for f in channel)


def _with_iso(data: bytes, block: bytes) -> bytes:
    """The photo with its gain map's ISO 21496-1 metadata replaced by ``block``."""
    _, gain = _split(data)
    at = gain.index(b"\xff\xe2" + b"\x00")
    while gain[at + 4:at + 4 + len(ISO)] != ISO:
        at = gain.index(b"\xff\xe2", at + 2)
    length = int.from_bytes(gain[at + 2:at + 4], "big")
    body = ISO + block
    segment = b"\xff\xe2" + (len(body) + 2).to_bytes(2, "big") + body
    return _with_gain_map(data, gain[:at] + segment + gain[at + 2 + length:])


def _channel(minimum: tuple[int, int] = (0, 1), maximum: tuple[int, int] = LOG2_BOOST,
             gamma: tuple[int, int] = (1, 1), offset: tuple[int, int] = (0, 1)
             ) -> tuple[tuple[tuple[int, int], ...], ...]:
    return ((minimum, maximum, gamma, offset, (0, 1)),)


BAD_METADATA = {  # what libultrahdr's decoder reads and its encoder refuses
    "gamma 0": _iso(channels=_channel(gamma=(0, 1))),
    "gamma -1": _iso(channels=_channel(gamma=(-1, 1))),  # read unsigned: 2^32
    "max below min": _iso(channels=_channel(minimum=(3, 1), maximum=(1, 1))),
    "capacity max below min": _iso(base=(2, 1), alternate=(1, 1)),
    "capacity max at min": _iso(base=(2, 1), alternate=(2, 1)),
    "infinite boost": _iso(channels=_channel(maximum=(2 ** 31 - 1, 1))),
    "infinite capacity": _iso(alternate=(2 ** 31 - 1, 1)),
    "negative offset": _iso(channels=_channel(offset=(-1, 64))),
    "offset of 2^31": _iso(channels=_channel(offset=(2 ** 31 - 1, 1))),
    "alternate space": _iso(flags=0x00),
}


@pytest.mark.parametrize("case", list(BAD_METADATA))
def test_gain_map_metadata_the_encoder_refuses_leaves_the_photo_sdr(
        case: str, settings: Settings, tmp_path: Path) -> None:
    data = _with_iso(synthetic(), BAD_METADATA[case])
    assert pyvips.Image.uhdrload_buffer(data).get_typeof("gainmap-data")  # read as HDR
    manifest = make(tmp_path, settings, "metadata.jpg", data)
    assert (manifest.width, manifest.height) == (800, 400)
    _sdr_with_warning(manifest, settings, "HDR gain map's metadata cannot be written")


def test_multichannel_gain_map_metadata_is_made_or_left_sdr(settings: Settings,
                                                            tmp_path: Path) -> None:
    """ISO 21496-1's multichannel flag, three channels told apart: never refused."""
    one = _channel()[0]
    other = _channel(maximum=(3, 1))[0]
    data = _with_iso(synthetic(), _iso(flags=0xC0, channels=(one, other, one)))
    manifest = make(tmp_path, settings, "channels.jpg", data)
    jpegs = [v for v in manifest.variants if v.format == "jpeg"]
    if all(v.hdr for v in jpegs):
        assert all(gain_of(opened(settings, v)) is not None for v in jpegs)
    else:
        _sdr_with_warning(manifest, settings, "HDR gain map")


@pytest.mark.parametrize("field", ["gainmap-gamma", "gainmap-hdr-capacity-max"])
def test_undefined_gain_map_metadata_is_refused_by_the_check(field: str,
                                                            settings: Settings) -> None:
    """NaN, which the ISO fractions cannot carry but hdrgm XMP text can."""
    gain = probe(ULTRA_HDR.read_bytes(), "phone.jpg", settings.image).gainmap
    assert gain is not None
    fields = {name: value for name, _, value in gain.fields}
    assert metadata_problem(fields) is None
    fields[field] = [math.nan] * 3 if isinstance(fields[field], list) else math.nan
    assert metadata_problem(fields) == "an infinite or undefined value"
