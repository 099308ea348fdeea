"""Encode: an sRGB image to the bytes of one output format, with its EXIF.

Each format goes through the encoder that does it best here, measured on the same pixels and
settings (same output sizes): WebP and AVIF through Pillow (its libwebp is ~12% faster than
the libvips wheel's, its libavif several times faster, and both run in parallel threads),
JPEG through libvips (Pillow's JPEG encoder holds the GIL, so two threads run no faster than
one). EXIF bytes from piexif are written exactly as given, so UTF-8 survives in every format
(libvips' own EXIF writer, libexif, turns it into question marks).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import piexif
import pyvips
from PIL import Image

from imgwarm.formats import OUTPUTS, Format
from imgwarm.pipeline import jxl

if TYPE_CHECKING:  # (a worker gets ImageOptions, the same names: imageoptions.py)
    from imgwarm.config import ImageSettings


class Frame:
    """One resampled picture, already in memory, handed to every encoder."""

    def __init__(self, image: pyvips.Image, hdr: pyvips.Image | None = None) -> None:
        self.image = image
        self.hdr = hdr  # the same pixels with a gain map attached, for JPEG (gainmap.py)
        self._picture: Image.Image | None = None

    @property
    def picture(self) -> Image.Image:
        """The same pixels as a Pillow image (made on first use). RGBX and RGBA are the modes
        Pillow maps without copying, and the ones its WebP encoder takes as they are."""
        if self._picture is None:
            image, mode = self.image, "RGBA"
            if not image.hasalpha():
                image, mode = image.bandjoin(255), "RGBX"
            self._picture = Image.frombuffer(
                mode, (image.width, image.height), image.write_to_memory(), "raw", mode, 0, 1
            )
        return self._picture


def encode(frame: Frame, fmt: Format, settings: ImageSettings, exif: bytes | None,
           quality: int | None = None, *, full_chroma: bool = False) -> bytes:
    """Encoded bytes carrying ``exif`` (piexif bytes) and no other metadata, at ``quality``
    (default: the format's quality setting, which must then be a number). A JPEG keeps its
    colour at half resolution below quality 90 (libvips' rule) unless ``full_chroma``."""
    if quality is None:
        setting = settings.quality(fmt)
        if setting == "auto":
            raise ValueError(f"encode: {fmt} quality is auto: give the quality to use")
        quality = setting
    out = io.BytesIO()
    extra = {"exif": exif} if exif else {}  # for Pillow's encoders
    if fmt == "jpeg":
        image = frame.image if frame.hdr is None else frame.hdr
        if image.hasalpha() and not OUTPUTS[fmt].alpha:
            image = image.flatten(background=[255, 255, 255])
        data = image.jpegsave_buffer(  # EXIF goes in below; a gain map, when there is one
            Q=quality, interlace=True, optimize_coding=True,
            subsample_mode="off" if full_chroma else "auto",
            keep="none" if frame.hdr is None else "gainmap")
        if not exif:
            return bytes(data)
        piexif.insert(exif, bytes(data), out)
    elif fmt == "webp":
        frame.picture.save(out, "WEBP", quality=quality,
                           method=settings.webp_effort, **extra)
    elif fmt == "jxl":
        return jxl.encode(frame.image, quality, settings.jxl_effort, exif)
    else:
        # One encoder thread: parallelism comes from the batch, not from inside an image.
        frame.picture.save(out, "AVIF", quality=quality,
                           speed=10 - settings.avif_effort, max_threads=1, **extra)
    return out.getvalue()
