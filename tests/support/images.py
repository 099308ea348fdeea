"""Test images made with pyvips, and ways to compare decoded pictures."""

from __future__ import annotations

import io
from pathlib import Path

import pyvips
from PIL import Image, ImageCms, ImageOps

from imgwarm.manifest import Credits
from imgwarm.samples import jpeg_with_exif, photo, stored_for_orientation

__all__ = ["Credits", "jpeg_with_exif", "photo", "stored_for_orientation"]


def decode(path: Path | bytes) -> pyvips.Image:
    if isinstance(path, bytes):
        return pyvips.Image.new_from_buffer(path, "")
    return pyvips.Image.new_from_file(str(path))


def as_srgb8(image: pyvips.Image) -> pyvips.Image:
    if image.hasalpha():
        image = image.flatten(background=[255, 255, 255])
    if image.interpretation != "srgb":
        image = image.colourspace("srgb")
    if image.bands == 1:
        image = image.bandjoin([image, image])
    return image.cast("uchar")


def shrink_to(image: pyvips.Image, width: int) -> pyvips.Image:
    height = max(1, round(image.height * width / image.width))
    return image.resize(width / image.width, vscale=height / image.height)


def mean_delta_e(a: pyvips.Image, b: pyvips.Image, width: int = 96) -> float:
    """Mean CIEDE2000 between two pictures compared at a small common size (which keeps
    compression and resampling differences out of the colour comparison)."""
    a = shrink_to(as_srgb8(a), width)
    b = shrink_to(as_srgb8(b), width)
    assert (a.width, a.height) == (b.width, b.height), "pictures differ in shape"
    return float(a.colourspace("lab").dE00(b.colourspace("lab")).avg())


def mean_abs_diff(a: pyvips.Image, b: pyvips.Image, width: int = 96) -> float:
    a = shrink_to(as_srgb8(a), width)
    b = shrink_to(as_srgb8(b), width)
    assert (a.width, a.height) == (b.width, b.height), "pictures differ in shape"
    return float((a.cast("float") - b.cast("float")).abs().avg())


def pillow_reference(data: bytes) -> pyvips.Image:
    """An independent decode: Pillow reads and orients the file and LittleCMS converts it to
    sRGB through its embedded profile (CMYK without one: libvips' built-in CMYK profile)."""
    image: Image.Image = Image.open(io.BytesIO(data))
    image.load()
    icc = image.info.get("icc_profile")
    if image.mode == "CMYK" and not icc:
        icc = builtin_cmyk_profile()
    if icc:
        out_mode = "RGB"
        converted = ImageCms.profileToProfile(
            image, ImageCms.ImageCmsProfile(io.BytesIO(icc)), ImageCms.createProfile("sRGB"),
            renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC, outputMode=out_mode,
        )
        assert converted is not None  # None only when converting in place
        image = converted
    image = ImageOps.exif_transpose(image.convert("RGB"))
    return pyvips.Image.new_from_memory(image.tobytes(), image.width, image.height, 3, "uchar")


def builtin_cmyk_profile() -> bytes:
    probe = pyvips.Image.black(1, 1, bands=3).cast("uchar").copy(interpretation="srgb")
    return bytes(probe.icc_transform("cmyk", input_profile="srgb").get("icc-profile-data"))


def with_profile(image: pyvips.Image, profile: str) -> bytes:
    """A JPEG of ``image`` converted to a built-in profile ("p3", "cmyk") and tagged with it."""
    converted = image.icc_transform(profile, input_profile="srgb")
    return bytes(converted.jpegsave_buffer(Q=92, keep="icc"))


def bomb_jpeg(width: int = 60000, height: int = 60000) -> bytes:
    """A tiny JPEG whose frame header claims a huge size."""
    data = bytearray(photo(64, 64).jpegsave_buffer(Q=80))
    for marker in (b"\xff\xc0", b"\xff\xc2"):
        at = data.find(marker)
        if at > 0:
            data[at + 5:at + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
            return bytes(data)
    raise AssertionError("no SOF marker")


def stray_bytes_jpeg() -> bytes:
    """A JPEG with 4 junk bytes before the DQT marker: libjpeg warns, the picture is fine."""
    data = bytes(photo(200, 150).jpegsave_buffer(Q=85, keep="none"))
    at = data.find(b"\xff\xdb")
    return data[:at] + b"\x00\x01\x02\x03" + data[at:]



def without_scan_data(data: bytes) -> bytes:
    """A JPEG cut after its first scan header: every header, none of the image data (what a
    refusal 'on the header' may read, and all it may)."""
    sos = data.find(b"\xff\xda")
    if sos < 0:
        raise AssertionError("no SOS marker")
    return data[:sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")]
