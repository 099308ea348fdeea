"""The fuzzer's table of source formats: for each, its seeds, its mutations and its strict
decoder. A format imgwarm learns to read is fuzzed by adding one entry here.

Seeds are small synthetic files made by libvips (every coding worth telling apart: WebP
lossy and lossless, with alpha and EXIF; AVIF 8- and 10-bit; TIFF in strips and tiles,
uncompressed, LZW, deflate, PackBits and JPEG, 8 and 16 bits, grey, RGB, RGBA; still GIF),
plus the small files of tests/formats/ and tests/corpus/ whose bytes are of the format.
Mutations are the byte ones every format gets (fuzz_bytes.py) and the structure-aware ones of
its container (fuzz_containers.py). Strict decoding is what a careful reader accepts: the
format's libvips loader with ``fail_on="warning"`` reading every pixel, and Pillow's full
decode where Pillow knows the format (JPEG: libvips and TurboJPEG, fuzz_jpeg.py)."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pyvips
from PIL import Image, UnidentifiedImageError

from tests.support import fuzz_jpeg
from tests.support.files import REPO
from tests.support.fuzz_bytes import Mutation, Spans, generic
from tests.support.fuzz_containers import (
    GIF,
    HEIF,
    PNG,
    TIFF,
    WEBP,
    gif_data,
    gif_spans,
    heif_data,
    heif_spans,
    png_data,
    png_spans,
    tiff_data,
    tiff_spans,
    webp_data,
    webp_spans,
)
from tests.support.images import jpeg_with_exif, photo

FORMATS_DIR = REPO / "tests" / "formats"
CORPUS_DIR = REPO / "tests" / "corpus"
# Above this many pixels the strict decoders do not read a case: imgwarm's default max_pixels
# refuses it on the header, and the test process should not decode gigapixels.
STRICT_PIXELS = 100_000_000
PILLOW_PIXELS = 25_000_000


@dataclass(frozen=True)
class FuzzFormat:
    name: str  # imgwarm's name of the source format
    suffix: str  # of the case files (imgwarm sniffs the bytes, the name only has to fit)
    magic: Callable[[bytes], bool]  # is this file of the format (for corpus seeds)
    synthetic: Callable[[], dict[str, bytes]]
    mutations: dict[str, Mutation]
    loader: str  # libvips' loader, read with fail_on="warning"
    pillow: bool  # Pillow decodes it as well: strict means both accept
    decodable: bool = True  # this build decodes it (else the seeds are refused: kept as is)

    def seeds(self) -> dict[str, bytes]:
        return _seeds(self.name)


def _structure(data_of: Spans, chunks_of: Spans, own: dict[str, Mutation]) -> dict[str, Mutation]:
    return generic(data_of, chunks_of) | own


# --- synthetic seeds ----------------------------------------------------------------------------

def _picture(width: int = 160, height: int = 120, seed: int = 31) -> pyvips.Image:
    return photo(width, height, seed=seed)


def _with_alpha(image: pyvips.Image) -> pyvips.Image:
    """An alpha band that varies: a gradient with a fully transparent corner."""
    x = pyvips.Image.xyz(image.width, image.height)[0]
    alpha = (x * (255 / max(1, image.width - 1))).cast("uchar")
    return image.bandjoin(alpha)


def png_seeds() -> dict[str, bytes]:
    image = _picture()
    sixteen = (image.cast("ushort") * 257).copy(interpretation="rgb16")
    return {
        "rgb.png": bytes(image.pngsave_buffer(keep="none")),
        "rgba.png": bytes(_with_alpha(image).pngsave_buffer(keep="none")),
        "grey.png": bytes(image.colourspace("b-w").pngsave_buffer(keep="none")),
        "rgb16.png": bytes(sixteen.pngsave_buffer(bitdepth=16, keep="none")),
        "palette.png": bytes(image.pngsave_buffer(palette=True, keep="none")),
        "interlaced.png": bytes(image.pngsave_buffer(interlace=True, keep="none")),
    }


def webp_seeds() -> dict[str, bytes]:
    image = _picture()
    with_exif = pyvips.Image.new_from_buffer(jpeg_with_exif(image, quality=90), "")
    return {
        "lossy.webp": bytes(image.webpsave_buffer(Q=80, keep="none")),
        "lossless.webp": bytes(image.webpsave_buffer(lossless=True, keep="none")),
        "lossy-alpha.webp": bytes(_with_alpha(image).webpsave_buffer(Q=80, keep="none")),
        "lossless-alpha.webp": bytes(_with_alpha(image).webpsave_buffer(lossless=True,
                                                                        keep="none")),
        "lossy-exif.webp": bytes(with_exif.webpsave_buffer(Q=80, keep="exif")),
    }


def avif_seeds() -> dict[str, bytes]:
    image = _picture(128, 96)
    return {
        "8bit.avif": bytes(image.heifsave_buffer(compression="av1", Q=60, keep="none")),
        "10bit.avif": bytes(image.heifsave_buffer(compression="av1", Q=60, bitdepth=10,
                                                  keep="none")),
        "alpha.avif": bytes(_with_alpha(image).heifsave_buffer(compression="av1", Q=60,
                                                               keep="none")),
    }


def tiff_seeds() -> dict[str, bytes]:
    image = _picture()
    grey = image.colourspace("b-w")
    # (times 257 gives floats: cast back, or the seed is a float scRGB TIFF)
    sixteen = (image.cast("ushort") * 257).cast("ushort").copy(interpretation="rgb16")
    grey16 = (grey.cast("ushort") * 257).cast("ushort").copy(interpretation="grey16")
    tiled = {"tile": True, "tile_width": 32, "tile_height": 32}

    def save(picture: pyvips.Image, **options: object) -> bytes:
        return bytes(picture.tiffsave_buffer(keep="none", **options))

    return {
        "rgb-strip-none.tif": save(image, compression="none"),
        "rgb-strip-lzw.tif": save(image, compression="lzw", predictor="horizontal"),
        "rgb-strip-deflate.tif": save(image, compression="deflate"),
        "rgb-strip-packbits.tif": save(image, compression="packbits"),
        "rgb-strip-jpeg.tif": save(image, compression="jpeg", Q=85),
        "rgb-tiled-lzw.tif": save(image, compression="lzw", **tiled),
        "rgb-tiled-jpeg.tif": save(image, compression="jpeg", Q=85, **tiled),
        "grey-strip-deflate.tif": save(grey, compression="deflate"),
        "grey16-tiled-none.tif": save(grey16, compression="none", **tiled),
        "rgb16-strip-lzw.tif": save(sixteen, compression="lzw"),
        "rgba-tiled-deflate.tif": save(_with_alpha(image), compression="deflate", **tiled),
        "rgba-strip-packbits.tif": save(_with_alpha(image), compression="packbits"),
    }


def gif_seeds() -> dict[str, bytes]:
    image = _picture()
    return {
        "still.gif": bytes(image.gifsave_buffer(keep="none")),
        "grey.gif": bytes(image.colourspace("b-w").gifsave_buffer(keep="none")),
        "transparent.gif": bytes(_with_alpha(image).gifsave_buffer(keep="none")),
    }


def no_seeds() -> dict[str, bytes]:
    return {}


def _isobmff(brands: set[bytes]) -> Callable[[bytes], bool]:
    """Whether an ISOBMFF file names one of ``brands``, major or compatible (an AVIF in the
    compact form is ftyp mif3 with avif as its minor version)."""
    def named(data: bytes) -> bool:
        if data[4:8] != b"ftyp":
            return False
        size = int.from_bytes(data[:4], "big")
        found = {data[i:i + 4] for i in range(8, min(size, 64), 4)}  # minor version too: mif3
        return bool(found & brands)

    return named


def _heic(data: bytes) -> bool:
    return _isobmff({b"heic", b"heix"})(data) and not _isobmff({b"avif", b"avis"})(data)


FORMATS: dict[str, FuzzFormat] = {f.name: f for f in (
    FuzzFormat("jpeg", ".jpg", lambda d: d.startswith(b"\xff\xd8"), fuzz_jpeg.synthetic_seeds,
               fuzz_jpeg.MUTATIONS, "jpegload_buffer", pillow=False),
    FuzzFormat("png", ".png", lambda d: d.startswith(b"\x89PNG\r\n\x1a\n"), png_seeds,
               _structure(png_data, png_spans, PNG), "pngload_buffer", pillow=True),
    FuzzFormat("webp", ".webp", lambda d: d[:4] == b"RIFF" and d[8:12] == b"WEBP", webp_seeds,
               _structure(webp_data, webp_spans, WEBP), "webpload_buffer", pillow=True),
    FuzzFormat("avif", ".avif", _isobmff({b"avif", b"avis"}), avif_seeds,
               _structure(heif_data, heif_spans, HEIF), "heifload_buffer", pillow=True),
    FuzzFormat("heif", ".heic", _heic, no_seeds,
               _structure(heif_data, heif_spans, HEIF), "heifload_buffer", pillow=False,
               decodable=False),
    FuzzFormat("tiff", ".tif", lambda d: d[:4] in (b"II*\x00", b"MM\x00*"), tiff_seeds,
               _structure(tiff_data, tiff_spans, TIFF), "tiffload_buffer", pillow=True),
    FuzzFormat("gif", ".gif", lambda d: d[:6] in (b"GIF87a", b"GIF89a"), gif_seeds,
               _structure(gif_data, gif_spans, GIF), "gifload_buffer", pillow=True),
)}
OTHERS = tuple(name for name in FORMATS if name != "jpeg")


# --- strict decoding ----------------------------------------------------------------------------

def strict_decodes(format_name: str, data: bytes) -> bool:
    """True when a careful reader takes ``data`` whole: the format's libvips loader with every
    warning fatal, reading every pixel, and Pillow's full decode where it knows the format."""
    if format_name == "jpeg":
        return fuzz_jpeg.strict_decodes(data)
    fmt = FORMATS[format_name]
    try:
        image = getattr(pyvips.Image, fmt.loader)(data, fail_on="warning", access="sequential")
        if image.width * image.height > STRICT_PIXELS:
            return False
        image.avg()
    except pyvips.Error:
        return False
    except UnicodeDecodeError:  # an error text with the file's raw bytes (libheif quotes a
        pyvips.vips_lib.vips_error_clear()  # FourCC): a refusal, and pyvips left it unread
        return False
    if not fmt.pillow or image.width * image.height > PILLOW_PIXELS:
        return True
    try:
        with Image.open(io.BytesIO(data)) as picture:
            picture.load()
    except UnidentifiedImageError:  # a coding Pillow does not know (16-bit RGB TIFF, mini
        return True                 # AVIF): libvips' verdict stands
    except Exception:  # Pillow raises what its plugins raise: any of them is a refusal
        return False
    return True


@cache
def _seeds(format_name: str) -> dict[str, bytes]:
    """The format's synthetic seeds and its small files of tests/formats and tests/corpus
    (those a strict decoder reads: a case it refuses was made bad by its mutation; a format
    this build cannot decode keeps its real files, to fuzz the refusal)."""
    fmt = FORMATS[format_name]
    if format_name == "jpeg":  # as the JPEG fuzz has always taken them
        return fmt.synthetic() | fuzz_jpeg.corpus_seeds(CORPUS_DIR)
    found = dict(fmt.synthetic())
    for folder in (FORMATS_DIR, CORPUS_DIR):
        for path in sorted(folder.glob("*")):
            data = path.read_bytes() if path.is_file() else b""
            if not data or len(data) > 200_000 or not fmt.magic(data):
                continue
            if fmt.decodable and not strict_decodes(format_name, data):
                continue
            found[f"{folder.name}-{path.stem}{fmt.suffix}"] = data
    return found

