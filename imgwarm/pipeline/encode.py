"""Encode: an sRGB image to the bytes of one output format, with its EXIF.

libvips prepares the pixels; Pillow's encoders write the files. On the same pixels and
settings they give the same sizes (WebP to the byte), and here Pillow's libwebp and
libjpeg-turbo builds are 12-20% faster than those in the libvips wheel, its libavif several
times faster; they also write EXIF bytes exactly as given (libvips' libexif turns UTF-8 into
question marks).
"""

from __future__ import annotations

import io

import pyvips
from PIL import Image

from imgwarm.config import Format, Settings

EXTENSIONS: dict[Format, str] = {"avif": "avif", "webp": "webp", "jpeg": "jpg"}
MEDIA_TYPES: dict[Format, str] = {"avif": "image/avif", "webp": "image/webp", "jpeg": "image/jpeg"}
_MODES = {3: "RGB", 4: "RGBA"}


def to_pillow(image: pyvips.Image) -> Image.Image:
    """An 8-bit sRGB (or sRGB + alpha) libvips image as a Pillow image, computing it once."""
    mode = _MODES[image.bands]
    return Image.frombuffer(mode, (image.width, image.height), image.write_to_memory(),
                            "raw", mode, 0, 1)


def opaque(image: pyvips.Image) -> pyvips.Image:
    """Alpha flattened onto white, for formats without transparency."""
    return image.flatten(background=[255, 255, 255]) if image.hasalpha() else image


def encode(picture: Image.Image, fmt: Format, settings: Settings, exif: bytes | None) -> bytes:
    """Encoded bytes carrying ``exif`` (piexif bytes) and no other metadata. JPEG pictures
    must be opaque (see ``opaque``)."""
    out = io.BytesIO()
    extra = {"exif": exif} if exif else {}
    if fmt == "webp":
        picture.save(out, "WEBP", quality=settings.webp_quality, method=settings.webp_effort,
                     **extra)
    elif fmt == "jpeg":
        picture.save(out, "JPEG", quality=settings.jpeg_quality, progressive=True,
                     optimize=True, **extra)
    else:
        # One encoder thread: parallelism comes from the batch, not from inside an image.
        picture.save(out, "AVIF", quality=settings.avif_quality,
                     speed=10 - settings.avif_effort, max_threads=1, **extra)
    return out.getvalue()
