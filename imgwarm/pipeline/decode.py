"""Decode: the one pixel read of a source, shrinking on load where the format allows.

The rule for JPEG: **any libjpeg warning refuses the file**, whatever the coding (baseline,
progressive, with restart intervals), with one exception made before decoding: bytes that
belong to no segment between the header markers (APPn, DQT, DHT, SOF, DRI, SOS) are dropped
(``jpeg.read_header``), since they sit outside the picture data and libjpeg skips them.

Why: once the scan has begun, every warning means that libjpeg met entropy-coded data it could
not follow and resynchronised on the next marker ("N extraneous bytes before marker 0xd3" is
a restart marker found in the wrong place; before 0xd9, the end of the image). It goes on
decoding and the lenient result is a picture with smeared or shifted 8x8 blocks, or grey
padding: a damaged picture that, named by its hash and cached for a year, would stay out.
A picture that decodes strictly is decoded exactly as it is.

JPEG pixels come from libjpeg-turbo's TurboJPEG API (simplejpeg, strict: warnings are errors),
not libvips' jpegload: jpegload never reads the end of a baseline file (it skips
jpeg_finish_decompress) and loses warnings raised while its last strip is read, so damage in
the bottom rows passed even with fail_on="warning" (measured: 18 of 300 bit flips in the last
tenth of a baseline file, each a visibly damaged picture). TurboJPEG reads to the end marker,
gives each decode its own error text (no shared buffer), releases the GIL, and was 10% faster
here. PNG: the PNG decoder's warnings are benign (a damaged ancillary chunk: the picture is
whole); its errors (a critical chunk's CRC, truncation) are not. WebP, HEIF (AVIF, and HEIC
where libheif has its decoder), TIFF and GIF: each by its libvips loader, whole (probe.py
counts the decoded image in the memory estimate), **failing on any warning**, as JPEG does:
with errors alone, libnsgif's "Invalid frame data" (a GIF with a zeroed run of its LZW data,
43% of its 8x8 blocks wrong) and libtiff's short strips and missing tiles (a 728-byte TIFF
declaring 393,750 tiles: 31 s to publish a black picture; 0.03 s to refuse) were published.
Their refusal names the format: "corrupt or truncated GIF data (...)" (vipsutil.py).

TurboJPEG's shrunk decode is taken only for the frames it is known to handle: Huffman-coded
DCT (baseline, extended, progressive) with 8-bit samples. On a lossless frame it corrupts
memory (a segfault or a glibc abort, from about a 2x shrink), so every other frame (lossless,
arithmetic-coded) is decoded whole by libvips' jpegload, with every warning an error, and
resized after; what libjpeg-turbo cannot decode at all (hierarchical, 12- and 16-bit) is
refused on the header (probe.py). Since jpegload stops before the end of the data, such a
file is first read to its end marker by TurboJPEG at full size (no scaling), warnings fatal:
a Huffman file relabelled arithmetic-coded decodes "cleanly" in jpegload into noise, and only
the end ("143667 extraneous bytes before marker 0xd9") tells.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable

import numpy
import pyvips
import simplejpeg
from numpy.typing import NDArray
from PIL import Image

from imgwarm.exceptions import CorruptImage
from imgwarm.formats import SourceFormat
from imgwarm.pipeline.probe import Probe, loader
from imgwarm.pipeline.vipsutil import explain

# TurboJPEG's output for a JPEG of so many components, and what libvips calls it.
_SPACES = {1: ("GRAY", "b-w"), 3: ("RGB", "srgb"), 4: ("CMYK", "cmyk")}


def jpeg_shrink(factor: float) -> int:
    """The JPEG DCT-domain shrink for an overall downscale: the largest that still leaves at
    least the target size, the rest done by lanczos3. Like sharp's default fast shrink-on-load
    and Pillow's draft(); it halves decode time against leaving a 2x margin as vips_thumbnail
    does, and the scaled IDCT filters well enough that tests see no difference."""
    for shrink in (8, 4, 2):
        if factor >= shrink:
            return shrink
    return 1


def decoded_size(probe: Probe, width: int, height: int) -> tuple[int, int]:
    """The size a JPEG is decoded at for a ``width`` x ``height`` target (as stored): the
    source shrunk on load, rounded up, so no row or column of the source is left out."""
    if probe.format != "jpeg" or not probe.shrinkable:
        return probe.width, probe.height
    shrink = jpeg_shrink(min(probe.width / width, probe.height / height))
    return -(-probe.width // shrink), -(-probe.height // shrink)


def decode(probe: Probe, width: int, height: int, name: str) -> pyvips.Image:
    """The source's pixels, shrunk on load towards ``width`` x ``height`` (as stored, before
    orientation), with its usable ICC profile attached. Raises CorruptImage for a JPEG that
    libjpeg warns about; PNG errors come later, from libvips, as pyvips.Error. Who decodes a
    format: its own decoder here (``DECODERS``), else its registry entry's libvips loader
    (formats.SOURCE_TYPES), whole, failing on any warning."""
    own = DECODERS.get(probe.format)
    return _whole(probe) if own is None else own(probe, width, height, name)


def _whole(probe: Probe) -> pyvips.Image:
    """Decoded whole by the format's registry loader, failing on any warning."""
    image = loader(probe.format)(probe.data, fail_on="warning", access="sequential")
    return _with_profile(image, probe)


def _decode_png(probe: Probe, width: int, height: int, name: str) -> pyvips.Image:
    return pyvips.Image.pngload_buffer(probe.data, fail_on="error", access="sequential")


def _decode_gif(probe: Probe, width: int, height: int, name: str) -> pyvips.Image:
    _gif_whole(probe.data, name)  # (libnsgif's silence on damage: Pillow counts the pixels)
    return _whole(probe)


def _decode_jpeg(probe: Probe, width: int, height: int, name: str) -> pyvips.Image:
    space, interpretation = _SPACES.get(probe.bands, ("RGB", "srgb"))
    if not probe.shrinkable:  # lossless, arithmetic-coded: whole, through libjpeg's own API
        _strict(probe, space, name)  # read to the end: jpegload stops short of it
        image = pyvips.Image.jpegload_buffer(probe.data, fail_on="warning",
                                             access="sequential", autorotate=False)
        return _with_profile(image, probe)
    min_width, min_height = decoded_size(probe, width, height)
    pixels = _strict(probe, space, name, min_width, min_height)
    rows, columns, bands = pixels.shape
    if space == "CMYK" and probe.adobe:
        numpy.subtract(255, pixels, out=pixels)  # Adobe CMYK is stored inverted; in place
    image = pyvips.Image.new_from_memory(pixels.data, columns, rows, bands, "uchar")
    return _with_profile(image.copy(interpretation=interpretation), probe)


# The source formats with a decoder of their own (see the module's docstring): a format
# without one is decoded by its registry entry's loader
DECODERS: dict[SourceFormat, Callable[[Probe, int, int, str], pyvips.Image]] = {
    "jpeg": _decode_jpeg, "png": _decode_png, "gif": _decode_gif}


def _gif_whole(data: bytes, name: str) -> None:
    """CorruptImage unless Pillow's GIF decoder reads the first frame to its last pixel.
    libnsgif (libvips' gifload) says nothing when the LZW data ends early or is zeroed: it
    leaves the rest of the frame as it was, and the picture came out with whole bands
    wrong, even with fail_on="warning" (fuzzed: a zeroed run, a bad code size, a frame
    larger than the screen). Pillow counts the pixels ("image file is truncated")."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=["GIF"]) as picture:
                picture.load()
        except Image.DecompressionBombError:
            return  # max_pixels raised past Pillow's own cap: libnsgif's verdict alone
        except Exception as error:  # Pillow raises what its plugin raises: all refusals
            raise CorruptImage(name, f"corrupt or truncated GIF data ({error})") from None


def _strict(probe: Probe, space: str, name: str, min_width: int = 0,
            min_height: int = 0) -> NDArray[numpy.uint8]:
    """TurboJPEG's decode with every libjpeg warning an error, shrunk on load when sizes are
    given (only for frames it is known to handle: see above)."""
    shrink = {"min_width": min_width, "min_height": min_height} if min_width else {}
    try:
        pixels: NDArray[numpy.uint8] = simplejpeg.decode_jpeg(
            probe.data, colorspace=space, strict=True, **shrink)
    except ValueError as error:  # libjpeg's complaint: an error, or a warning made one
        detail = str(error).strip()
        meaning = explain(detail)
        raise CorruptImage(name, meaning if meaning != detail else
                           f"corrupt JPEG data ({detail})") from None
    return pixels


def _with_profile(image: pyvips.Image, probe: Probe) -> pyvips.Image:
    if probe.icc is None:
        return image
    image = image.copy()  # never set metadata on an image another reference may share
    image.set_type(pyvips.GValue.blob_type, "icc-profile-data", probe.icc)
    return image
