"""JPEG in the fuzzer: its seeds (synthetic JPEGs of every coding, small corpus JPEGs), its
mutations (scan and header bits, segments, tables, dimensions, frame type, hostile EXIF/ICC)
and its strict decoder (libvips and TurboJPEG, every warning fatal)."""

from __future__ import annotations

import io
import random
import struct
from pathlib import Path

import numpy as np
import pyvips
import simplejpeg
from PIL import Image

from tests.support import hostile
from tests.support.fuzz_bytes import Mutation
from tests.support.images import Credits, jpeg_with_exif, photo, stored_for_orientation

_HEADER_MARKERS = (0xC0, 0xC2, 0xC4, 0xDB, 0xDD, 0xDA, 0xE0, 0xE1, 0xE2, 0xFE)
# Every frame marker (SOFn): Huffman and arithmetic; sequential, progressive, lossless;
# hierarchical or not. Written out here, not taken from the code under test.
FRAMES = (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF)


# --- seeds ------------------------------------------------------------------------------------

def synthetic_seeds() -> dict[str, bytes]:
    picture = photo(240, 160, seed=21)
    credits = Credits(description="Велосипед", copyright="© 2026 A", artist="B")
    cmyk = picture.icc_transform("cmyk", input_profile="srgb")
    return {
        "baseline.jpg": jpeg_with_exif(picture, credits=credits, quality=85),
        "restart.jpg": hostile.restart_jpeg(240, 160, interval=3),
        "progressive.jpg": bytes(picture.jpegsave_buffer(Q=85, interlace=True, keep="none")),
        "progressive-restart.jpg": hostile.restart_jpeg(240, 160, interval=4, interlace=True),
        "cmyk.jpg": bytes(cmyk.jpegsave_buffer(Q=85, keep="icc")),
        "grey.jpg": bytes(picture.colourspace("b-w").jpegsave_buffer(Q=85, keep="none")),
        "444.jpg": bytes(picture.jpegsave_buffer(Q=85, subsample_mode="off", keep="none")),
        "rotated.jpg": jpeg_with_exif(stored_for_orientation(picture, 6), orientation=6),
        "lossless.jpg": lossless_jpeg(picture),
    }


def lossless_jpeg(image: pyvips.Image) -> bytes:
    """A lossless (SOF3) JPEG of ``image``: imagecodecs' libjpeg-turbo writes them."""
    import imagecodecs

    pixels = np.ndarray(buffer=image.cast("uchar").write_to_memory(), dtype=np.uint8,
                        shape=(image.height, image.width, image.bands))
    return bytes(imagecodecs.jpeg8_encode(pixels[..., 0] if image.bands == 1 else pixels,
                                          lossless=True))


def corpus_seeds(corpus: Path, *, max_bytes: int = 200_000,
                 max_pixels: int = 1_000_000) -> dict[str, bytes]:
    """The small JPEGs of a corpus that a strict decoder reads: then a case it refuses was
    made bad by its mutation, and the seed's output is the picture it must still show."""
    found: dict[str, bytes] = {}
    for path in sorted(corpus.glob("*")):
        data = path.read_bytes() if path.is_file() else b""
        if not data.startswith(b"\xff\xd8") or len(data) > max_bytes:
            continue
        try:
            with Image.open(io.BytesIO(data)) as image:
                if image.width * image.height > max_pixels:
                    continue
                image.load()
        except Exception:
            continue
        if strict_decodes(data):
            found[f"corpus-{path.stem}.jpg"] = data
    return found



# --- mutations --------------------------------------------------------------------------------

def header_segments(data: bytes) -> list[tuple[int, int, int]]:
    """(marker, start, end) of each header segment up to and including the first SOS."""
    found, pos = [], 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        end = pos + 2 + struct.unpack(">H", data[pos + 2:pos + 4])[0]
        found.append((marker, pos, end))
        if marker == 0xDA or end > len(data):
            break
        pos = end
    return found


def _scan(data: bytes) -> tuple[int, int]:
    segments = header_segments(data)
    start = segments[-1][2] if segments and segments[-1][0] == 0xDA else len(data) // 2
    return start, max(start + 1, len(data) - 2)


def flip_scan(rng: random.Random, data: bytes) -> bytes:
    start, end = _scan(data)
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(start, end)] ^= 1 << rng.randrange(8)
    return bytes(out)


def flip_header(rng: random.Random, data: bytes) -> bytes:
    start, _ = _scan(data)
    out = bytearray(data)
    for _ in range(rng.randint(1, 2)):
        out[rng.randrange(2, start)] ^= 1 << rng.randrange(8)
    return bytes(out)


def flip_restart(rng: random.Random, data: bytes) -> bytes | None:
    start, end = _scan(data)
    rst = [i for i in range(start, end) if data[i] == 0xFF and 0xD0 <= data[i + 1] <= 0xD7]
    if len(rst) < 2:
        return None
    which = rng.randrange(len(rst) - 1)
    a, b = rst[which] + 2, rst[which + 1]
    if b - a < 3:
        return None
    out = bytearray(data)
    out[rng.randrange(a + 1, b - 1)] ^= 1 << rng.randrange(8)
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(1, len(data))]


def duplicate_segment(rng: random.Random, data: bytes) -> bytes | None:
    segments = header_segments(data)[:-1]
    if not segments:
        return None
    _, a, b = rng.choice(segments)
    return data[:b] + data[a:b] + data[b:]


def remove_segment(rng: random.Random, data: bytes) -> bytes | None:
    segments = header_segments(data)[:-1]
    if not segments:
        return None
    _, a, b = rng.choice(segments)
    return data[:a] + data[b:]


def damage_table(marker: int) -> Mutation:
    def damage(rng: random.Random, data: bytes) -> bytes | None:
        tables = [(a, b) for m, a, b in header_segments(data) if m == marker]
        if not tables:
            return None
        a, b = rng.choice(tables)
        out = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(a + 4, b)] = rng.randrange(256)
        return bytes(out)

    return damage


def odd_dimensions(rng: random.Random, data: bytes) -> bytes | None:
    frames = [a for m, a, _ in header_segments(data) if m in (0xC0, 0xC1, 0xC2)]
    if not frames:
        return None
    at = frames[0] + 5
    sizes = [0, 1, 2, 7, 8, 9, 255, 4097, 16384, 65535, rng.randrange(1, 65536)]
    height, width = rng.choice(sizes), rng.choice(sizes)
    return data[:at] + struct.pack(">HH", height, width) + data[at + 4:]


def frame_type(rng: random.Random, data: bytes) -> bytes | None:
    """The frame marker made another SOFn: as a fuzz campaign found, a DCT file labelled
    lossless (SOF3) crashed the shrunk decode."""
    frames = [a for m, a, _ in header_segments(data) if m in FRAMES]
    if not frames:
        return None
    at = frames[0] + 1
    marker = rng.choice([f for f in FRAMES if f != data[at]])
    return data[:at] + bytes((marker,)) + data[at + 1:]


def stray_in_header(rng: random.Random, data: bytes) -> bytes | None:
    """Junk before a header marker: harmless, and must give the seed's picture."""
    segments = header_segments(data)
    if not segments:
        return None
    _, at, _ = rng.choice(segments)
    junk = bytes(rng.choice([0x00, 0x01, 0x7F, 0xFE, rng.randrange(256)])
                 for _ in range(rng.randint(1, 8)))
    return data[:at] + junk.replace(b"\xff", b"\xfe") + data[at:]


def marker_in_scan(rng: random.Random, data: bytes) -> bytes:
    start, end = _scan(data)
    at = rng.randrange(start, end)
    marker = rng.choice([0xD0, 0xD3, 0xD7, 0xD9, 0xDA, 0xC4, 0xDB, 0xE1, 0xDC])
    return data[:at] + bytes((0xFF, marker)) + data[at:]


def scan_parameters(rng: random.Random, data: bytes) -> bytes | None:
    start, _ = _scan(data)
    if start < 3:
        return None
    return data[:start - 3] + bytes(rng.randrange(256) for _ in range(3)) + data[start:]


def hostile_exif(rng: random.Random, data: bytes) -> bytes:
    count = rng.choice([1 << 16, 1 << 24, 1 << 27, (1 << 32) - 1, rng.randrange(1 << 32)])
    kind = rng.choice([1, 2, 3, 4, 5, 7, 9, 10, 12, 99])
    pointer = struct.pack("<L", rng.choice([8, 0xFFFFFFF0, rng.randrange(1 << 32)]))
    text = bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
    choices = [
        hostile.tiff([(0x013B, kind, count, pointer)]),
        hostile.tiff([(0x8769, 4, 1, pointer), (0x010E, 2, 4, b"abc\x00")]),
        hostile.tiff([(0x010E, 2, len(text) + 1, struct.pack("<L", hostile.ifd_end(1)))],
                     tail=text + b"\x00"),
        hostile.tiff([(0x8825, 4, 1, struct.pack("<L", 8))], next_ifd=8),
        b"II*\x00" + pointer + bytes(rng.randrange(256) for _ in range(rng.randint(0, 64))),
    ]
    pointer_type = rng.choice([1, 3, 4, 6, 8, 9])
    if rng.random() < 0.3:  # the pointer of any integer type, or a text tag of another type
        return rng.choice([hostile.exif_pointer_bomb(pointer_type, count, data),
                           hostile.exif_text_of_type(rng.choice([3, 4, 5, 8, 9, 10]), data)])
    block = rng.choice(choices)
    return hostile.after_soi(data, hostile.segment(0xE1, b"Exif\x00\x00" + block))


def hostile_icc(rng: random.Random, data: bytes) -> bytes:
    icc = bytearray(hostile.adobe_rgb_profile())
    for _ in range(rng.randint(1, 4)):
        at = rng.choice([0, 4, 8, 12, 16, 20, 36, 64, 128, 132, rng.randrange(len(icc))])
        icc[at] = rng.randrange(256)
    if rng.random() < 0.2:
        icc = icc[:rng.randrange(1, len(icc))]
    return hostile.with_icc(data, bytes(icc))


MUTATIONS: dict[str, Mutation] = {
    "flip-scan": flip_scan,
    "flip-header": flip_header,
    "flip-restart": flip_restart,
    "truncate": truncate,
    "duplicate-segment": duplicate_segment,
    "remove-segment": remove_segment,
    "huffman": damage_table(0xC4),
    "quantisation": damage_table(0xDB),
    "dimensions": odd_dimensions,
    "frame-type": frame_type,
    "stray-header": stray_in_header,
    "marker-in-scan": marker_in_scan,
    "scan-parameters": scan_parameters,
    "hostile-exif": hostile_exif,
    "hostile-icc": hostile_icc,
}


def strict_decodes(data: bytes) -> bool:
    """True when strict decoders read it without a warning: libvips with fail_on="warning"
    and libjpeg-turbo's TurboJPEG with warnings as errors (which, unlike libvips, reads to the
    end marker), both at full size."""
    try:
        pyvips.Image.jpegload_buffer(data, fail_on="warning").avg()
        simplejpeg.decode_jpeg(data, colorspace="RGB", strict=True)
    except (pyvips.Error, ValueError):
        return False
    return True


