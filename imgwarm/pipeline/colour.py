"""Colour: bring pixels to 8-bit sRGB, through the embedded ICC profile when there is a usable one.

A profile is untrusted input like the rest of the file. One whose header is damaged (a colour
space that is not one, a connection space LittleCMS cannot use) is converted as if absent:
RGB as sRGB, CMYK through libvips' built-in CMYK profile; the manifest says so. The pixels
are fine, so the picture is not refused for it.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import pyvips
from PIL import ImageCms

# The ICC colour space an image of so many bands needs (with or without alpha).
_SPACES = {1: "GRAY", 2: "GRAY", 3: "RGB", 4: "RGB"}
T = TypeVar("T")


class _Verdicts:
    """What was found of recent profiles, kept by their hash: a batch of photos from one
    camera asks the same question many times, and the profiles (up to megabytes each) are
    not kept alive for it."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.found: OrderedDict[tuple[object, ...], object] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[object, ...], compute: Callable[[], T]) -> T:
        with self.lock:
            if key in self.found:
                self.found.move_to_end(key)
                return self.found[key]  # type: ignore[return-value]
        value = compute()
        with self.lock:
            self.found[key] = value
            while len(self.found) > self.size:
                self.found.popitem(last=False)
        return value


_VERDICTS = _Verdicts()


def _space(icc: bytes) -> str:
    return icc[16:20].decode("latin-1").strip()


def profile_problem(icc: bytes, interpretation: str, bands: int, fmt: str) -> str | None:
    """Why the embedded profile cannot be used for an image of this kind; None when it can.
    The last word is libvips' own: a one-pixel transform through it, as ``to_srgb`` does."""
    key = ("problem", hashlib.sha256(icc).digest(), interpretation, bands, fmt)
    return _VERDICTS.get(key, lambda: _problem(icc, interpretation, bands, fmt))


def _problem(icc: bytes, interpretation: str, bands: int, fmt: str) -> str | None:
    try:
        ImageCms.ImageCmsProfile(io.BytesIO(icc))
    except Exception:  # PyCMSError, OSError, ValueError... on junk
        return "unreadable"
    wanted = "CMYK" if interpretation == "cmyk" else _SPACES.get(bands, "RGB")
    if _space(icc) != wanted:  # never echo the field: it is the file's bytes
        return f"made for another colour space than the image's {wanted}"
    sample = pyvips.Image.black(1, 1, bands=bands).cast(fmt)
    sample = sample.copy(interpretation=interpretation)
    sample.set_type(pyvips.GValue.blob_type, "icc-profile-data", icc)
    try:
        _convert(sample, usable=True).avg()
    except pyvips.Error:
        return "LittleCMS cannot convert through it"
    return None


def profile_is_srgb(icc: bytes) -> bool:
    """True for sRGB profiles, whose transform to sRGB would only cost time."""
    return _VERDICTS.get(("srgb", hashlib.sha256(icc).digest()), lambda: _is_srgb(icc))


def _is_srgb(icc: bytes) -> bool:
    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc)).profile
        return _space(icc) == "RGB" and "sRGB" in (profile.profile_description or "")
    except Exception:
        return False


def _convert(image: pyvips.Image, *, usable: bool) -> pyvips.Image:
    if image.interpretation == "cmyk":
        # The embedded profile when usable, else libvips' built-in CMYK profile.
        return image.icc_transform("srgb", embedded=usable, input_profile="cmyk")
    fallback = {"input_profile": "srgb"} if image.bands >= 3 else {}
    return image.icc_transform("srgb", embedded=usable, **fallback)


def to_srgb(image: pyvips.Image, icc: bytes | None) -> pyvips.Image:
    """Convert to sRGB through ``icc`` (a usable profile, see ``profile_problem``; None when
    there is none). Only CMYK and non-sRGB profiles pay for a colour transform."""
    if image.interpretation == "cmyk" or (icc is not None and not profile_is_srgb(icc)):
        image = _convert(image, usable=icc is not None)
    if image.interpretation != "srgb" or image.format != "uchar":
        image = image.colourspace("srgb")
        if image.format != "uchar":
            image = image.cast("uchar")
    return image
