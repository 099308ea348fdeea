"""Probe: what the bytes really are, and their header facts, before any pixel is decoded.

What each source format is and can do is its entry in formats.SOURCE_TYPES; its header is
read by ``READERS[format]`` (JPEG's and PNG's own readers), else by its libvips loader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import piexif
import pyvips

from imgwarm.exceptions import CorruptImage, LimitExceeded, UnsupportedFormat
from imgwarm.formats import SOURCE_TYPES, SourceFormat
from imgwarm.pipeline import gainmap
from imgwarm.pipeline.colour import profile_problem
from imgwarm.pipeline.exif import read_exif
from imgwarm.pipeline.gainmap import GainMap
from imgwarm.pipeline.jpeg import read_header
from imgwarm.pipeline.sniff import NAMES, SOURCE_OF, heif_frames, sniff, suffix_format
from imgwarm.pipeline.vipsutil import VipsComplaint, readable_errors, vips_reason

if TYPE_CHECKING:  # (a worker gets ImageOptions, the same names: imageoptions.py)
    from imgwarm.config import ImageSettings

# Bytes of one sample of each libvips band format.
SAMPLE_BYTES = {"uchar": 1, "char": 1, "ushort": 2, "short": 2, "uint": 4, "int": 4,
                "float": 4, "complex": 8, "double": 8, "dpcomplex": 16}
# What a decoder of the whole image holds, bytes a pixel (measured: memory.py's docstring).
_WEBP_CANVASES = 8  # bytes a pixel: libvips' RGBA frame and RGBA canvas
_GIF_BITMAP = 4  # bytes a pixel: libnsgif's RGBA bitmap
# HEIF/AVIF: the codec's picture and libheif's copy (planes), libheif's conversion to
# interleaved RGB(A), libvips' image: bytes a pixel, per channel and per byte of a sample
_HEIF_CHANNEL, _HEIF_SAMPLE = 5, 2
# Colour samples a TIFF may have, by interpretation, before alpha: more are refused.
_COLOUR_SAMPLES = {"b-w": 1, "grey16": 1, "cmyk": 4}


@dataclass(frozen=True)
class Probe:
    """Header facts of a source. Width and height are as stored, before orientation."""

    format: SourceFormat
    width: int
    height: int
    orientation: int  # 1..8; out-of-range values are read as 1
    icc: bytes | None  # a usable embedded profile (a damaged one is dropped: see notes)
    data: bytes  # what to decode: for JPEG, the picture's segments alone (jpeg.read_header)
    bands: int = 3  # as stored: 1 grey, 3 colour, 4 CMYK (or with alpha, for PNG)
    alpha: bool = False  # transparency (PNG): resampled premultiplied, in floats
    adobe: bool = False  # a JPEG with an Adobe marker: CMYK is stored inverted
    exif: bytes | None = None  # the TIFF block of the JPEG's EXIF segment
    buffered: int = 0  # bytes a decoder must hold for the whole image (progressive JPEG...)
    sample_bytes: int = 1  # of the decoded image: 2 for 16-bit PNG and TIFF, HDR AVIF...
    shrinkable: bool = False  # a JPEG frame the fast shrunk decode handles (decode.py)
    gainmap: GainMap | None = None  # an Ultra HDR JPEG's (gainmap.py)
    notes: list[str] = field(default_factory=list)  # fallbacks taken, for the manifest

    @property
    def transposed(self) -> bool:
        return self.orientation >= 5

    @property
    def displayed_width(self) -> int:
        return self.height if self.transposed else self.width

    @property
    def displayed_height(self) -> int:
        return self.width if self.transposed else self.height


def _family(source_format: SourceFormat | None) -> str | None:
    """The container (one for AVIF and HEIC: a name of either says the same family)."""
    return SOURCE_TYPES[source_format].family if source_format else None


def _accepted(data: bytes, name: str, settings: ImageSettings) -> SourceFormat:
    kind = sniff(data)
    found = SOURCE_OF.get(kind or "")
    if found is not None and settings.accepts(found):
        said = suffix_format(name)  # any format's name (.bmp, .svg...), not the sources' alone
        # A JPEG goes by its bytes whatever its name (cameras and uploads misname them);
        # another format under a name that says something else is a mistake, or a trick.
        if found == "jpeg" or said is None or _family(SOURCE_OF.get(said)) == _family(found):
            return found
        raise UnsupportedFormat(
            name, f"the content is a {kind} image but the name says {said}: refusing a "
            f"mislabelled file (rename it {SOURCE_TYPES[found].suffixes[0]} to convert it as "
            f"{kind})"
        )
    taken = [NAMES[f] for f in settings.source_formats if settings.accepts(f)]
    accepted = ", ".join(taken[:-1]) + f" or {taken[-1]}" if len(taken) > 1 else taken[0]
    if kind is None:  # never echo the bytes: they may be anything the path leads to
        raise UnsupportedFormat(name, f"not a recognised image format; imgwarm takes {accepted}")
    raise UnsupportedFormat(name, f"the content is a {kind} image, not {accepted}")


def loader(source_format: SourceFormat) -> Any:
    """The libvips loader of a format's pixels (its registry entry's)."""
    return getattr(pyvips.Image, SOURCE_TYPES[source_format].loader)


def _other_format(header: pyvips.Image, source_format: SourceFormat, name: str,
                  data: bytes) -> tuple[bytes | None, list[str]]:
    """The EXIF (its TIFF block) of a WebP, HEIF, TIFF or GIF source, and what is said of it.
    An animation is refused: a still made of one frame would stand for the whole. A TIFF's
    first page is made; a HEIF's primary image (libheif has applied its rotation and
    mirroring: the header carries no orientation to apply again)."""
    kind = SOURCE_TYPES[source_format]
    pages = header.get("n-pages") if header.get_typeof("n-pages") else 1
    if kind.brands:  # (ISOBMFF) libvips reads a sequence's still image alone
        pages = max(pages, heif_frames(data))
    notes = []
    if kind.animation and pages > 1:
        raise UnsupportedFormat(
            name, f"an animated {NAMES[source_format]} ({pages} frames): imgwarm makes still "
            "images, and a still of one frame would stand for the whole animation")
    if source_format == "tiff" and pages > 1:
        notes.append(f"a TIFF of {pages} pages: the first page made")
    exif = bytes(header.get("exif-data")) if header.get_typeof("exif-data") else None
    if exif is not None:
        exif = exif.removeprefix(b"Exif\x00\x00") or None
    if exif is None and header.get_typeof("image-description"):  # a TIFF's own tag
        # its bytes as stored (libvips makes text valid UTF-8, other bytes become U+FFFD):
        # metadata.py reads what is not UTF-8 as Windows-1252, as in EXIF
        stored = read_exif(data) if source_format == "tiff" else None  # (a TIFF is one)
        text = (stored or {}).get("0th", {}).get(piexif.ImageIFD.ImageDescription) or \
            str(header.get("image-description")).encode("utf-8", "surrogateescape")
        exif = piexif.dump({"0th": {piexif.ImageIFD.ImageDescription: text}})
        exif = exif.removeprefix(b"Exif\x00\x00")
    return exif, notes


@dataclass(frozen=True)
class Read:
    """What a format's own header reader finds before libvips reads the header."""

    pixels: bytes  # what to decode (a JPEG's picture segments alone)
    exif: bytes | None = None  # the TIFF block of its EXIF
    buffered: int = 0  # bytes a decoder holds for the whole image (progressive JPEG...)
    whole: bool = False  # decoded whole into memory though the format streams (Adam7 PNG)
    adobe: bool = False  # a JPEG with an Adobe marker
    shrinkable: bool = False  # a JPEG frame the fast shrunk decode handles
    gain_map: bool = False  # a second picture, said to be an HDR gain map (MPF)


def _read_jpeg(data: bytes, name: str) -> Read:
    """The JPEG header as libjpeg reads it (jpeg.py); a coding libjpeg-turbo cannot decode
    is refused here."""
    jpeg = read_header(data)
    unsupported = jpeg.unsupported()
    if unsupported is not None:
        raise CorruptImage(name, f"unsupported JPEG coding: {unsupported}")
    return Read(jpeg.pixels, jpeg.exif, jpeg.coefficient_bytes(), adobe=jpeg.adobe,
                shrinkable=jpeg.shrinkable, gain_map=jpeg.mpf and jpeg.gainmap_tag)


def _read_png(data: bytes, name: str) -> Read:
    """An interlaced (Adam7) PNG is decoded whole into memory; a plain one row by row."""
    return Read(data, whole=data[12:16] == b"IHDR" and len(data) > 28 and data[28] != 0)


# The source formats with a header reader of their own (the others: libvips' header alone,
# _other_format): a new format adds one here when libvips' header is not enough
READERS: dict[SourceFormat, Callable[[bytes, str], Read]] = {"jpeg": _read_jpeg,
                                                             "png": _read_png}


def _whole_decode(source_format: SourceFormat, pixels: int, bands: int, sample_bytes: int) -> int:
    """Bytes a decoder that reads the whole image holds at its peak (see memory.py). A TIFF
    strip or tile, and an interlaced PNG, can cover the whole image: one decoded image."""
    decoded = pixels * bands * sample_bytes
    if source_format == "webp":  # libwebp's own buffer (a lossless image's ARGB, a lossy
        return _WEBP_CANVASES * pixels  # one's alpha) is freed before the canvas is painted
    if source_format == "gif":  # lines are copied out of it
        return _GIF_BITMAP * pixels
    if source_format in ("avif", "heif"):  # decoded to RGB(A) whatever is stored
        return max(3, bands) * (_HEIF_CHANNEL + _HEIF_SAMPLE * sample_bytes) * pixels
    return decoded


def _check_samples(header: pyvips.Image, name: str) -> None:
    """Samples beyond colour and alpha are refused on the header: imgwarm cannot use them,
    libvips fails on them after decoding ("linear: vector must have 1 or 65 elements"), and
    each one is a decoded image's worth of memory."""
    most = _COLOUR_SAMPLES.get(header.interpretation, 3) + 1
    if header.bands > most:
        raise UnsupportedFormat(
            name, f"a TIFF with {header.bands} samples per pixel: imgwarm uses at most {most} "
            f"({header.interpretation} colour and alpha); refused before decoding")


def probe(data: bytes, name: str, settings: ImageSettings) -> Probe:
    """Identify the format from the bytes and check the limits on the header alone.

    Raises SourceError subclasses. Under concurrency the text of a CorruptImage may be
    another image's (libvips has one error buffer): optimize.py asks again alone."""
    if not data:
        raise UnsupportedFormat(name, "empty file (0 bytes), not an image")
    if len(data) > settings.max_bytes:
        raise LimitExceeded(
            name, f"file is {len(data):,} bytes, over the limit of {settings.max_bytes:,} "
            "(max_bytes)"
        )
    source_format = _accepted(data, name, settings)
    kind = SOURCE_TYPES[source_format]
    reader = READERS.get(source_format)
    own = reader(data, name) if reader is not None else Read(data)
    try:
        with readable_errors():
            header = loader(source_format)(data, access="sequential")
    except pyvips.Error as error:
        reason = vips_reason(error, meaning=False)
        raise VipsComplaint(name, f"corrupt {NAMES[source_format]} header: {reason}") from None
    width, height = header.width, header.height
    if width * height > settings.max_pixels:
        raise LimitExceeded(
            name, f"{width}x{height} is {width * height / 1e6:,.1f} megapixels, over the limit "
            f"of {settings.max_pixels / 1e6:g} megapixels (max_pixels); refused before decoding"
        )
    orientation = header.get("orientation") if header.get_typeof("orientation") else 1
    icc = header.get("icc-profile-data") if header.get_typeof("icc-profile-data") else None
    notes: list[str] = []
    exif, buffered = own.exif, own.buffered
    if reader is None:  # what libvips' header says of the rest
        exif, notes = _other_format(header, source_format, name, data)
    sample_bytes = SAMPLE_BYTES.get(header.format, 16)
    if source_format == "tiff":
        _check_samples(header, name)
    if own.whole or not kind.streamed:  # decoded whole, into memory
        buffered = _whole_decode(source_format, width * height, header.bands, sample_bytes)
    gain = None
    if kind.hdr and own.gain_map:  # a second picture, said to be an HDR gain map
        gain, said = gainmap.find(data, width, height)
        notes += said
        buffered += gain.decoded_bytes if gain else 0
    if icc:
        problem = profile_problem(bytes(icc), header.interpretation, header.bands, header.format)
        if problem is not None:
            notes.append(f"embedded ICC profile not used ({problem}): colours converted as if "
                         "it were absent")
            icc = None
    return Probe(
        format=source_format,
        width=width,
        height=height,
        orientation=orientation if 1 <= orientation <= 8 else 1,
        icc=bytes(icc) if icc else None,
        data=own.pixels,
        bands=header.bands,
        alpha=header.hasalpha(),
        adobe=own.adobe,
        exif=exif,
        buffered=buffered,
        sample_bytes=sample_bytes,
        shrinkable=own.shrinkable,
        gainmap=gain,
        notes=notes,
    )
