"""Hostile inputs, built as an attacker would: JPEG segments, EXIF blocks and ICC profiles
with lying counts, offsets and fields. Shared by the regression tests, the fuzzer and
bench/fuzz.py."""

from __future__ import annotations

import re
import struct

import pyvips

from tests.support.images import photo

SOS = b"\xff\xda"


def segment(marker: int, payload: bytes) -> bytes:
    """One JPEG marker segment (the length counts itself, not the marker)."""
    return bytes((0xFF, marker)) + struct.pack(">H", len(payload) + 2) + payload


def after_soi(jpeg: bytes, *segments: bytes) -> bytes:
    return jpeg[:2] + b"".join(segments) + jpeg[2:]


def plain_jpeg(width: int = 96, height: int = 64, seed: int = 3, **save: object) -> bytes:
    """A small JPEG with no metadata at all."""
    return bytes(photo(width, height, seed=seed).jpegsave_buffer(Q=85, keep="none", **save))


def tiff(entries: list[tuple[int, int, int, bytes]], *, tail: bytes = b"",
         next_ifd: int = 0) -> bytes:
    """A little-endian TIFF block with one IFD at offset 8. Each entry is (tag, type, count,
    4-byte value or offset); ``tail`` follows the IFD (offsets count from the block start)."""
    ifd = struct.pack("<H", len(entries))
    for tag, kind, count, value in entries:
        ifd += struct.pack("<HHL", tag, kind, count) + value.ljust(4, b"\x00")[:4]
    return b"II*\x00" + struct.pack("<L", 8) + ifd + struct.pack("<L", next_ifd) + tail


def ifd_end(count: int) -> int:
    """Offset just after an IFD of ``count`` entries at offset 8 (where ``tail`` starts)."""
    return 8 + 2 + 12 * count + 4


def with_exif(jpeg: bytes, block: bytes) -> bytes:
    return after_soi(jpeg, segment(0xE1, b"Exif\x00\x00" + block))


def exif_count_bomb(count: int = 1 << 27, kind: int = 1) -> bytes:
    """An entry of ``kind`` (1 = BYTE) declaring ``count`` values in a block of a few bytes:
    piexif built a format string that long (4.5 GB for 2^27)."""
    block = tiff([(0x010E, 2, 5, b"bomb"), (0x013B, kind, count, struct.pack("<L", 8))])
    return with_exif(plain_jpeg(), block)


def exif_pointer_bomb(pointer_type: int = 9, count: int = 1 << 27,
                      jpeg: bytes | None = None) -> bytes:
    """The Exif IFD pointer stored as any integer type (piexif follows it whatever the type),
    leading to an IFD whose entry declares ``count`` SHORTs: 44 bytes of EXIF."""
    size = {1: "B", 3: "H", 4: "L", 6: "b", 8: "h", 9: "l"}[pointer_type]
    ifd0 = struct.pack("<HHHL", 1, 0x8769, pointer_type, 1)
    ifd0 += struct.pack("<" + size, 26).ljust(4, b"\x00") + struct.pack("<L", 0)
    exif_ifd = struct.pack("<HHHLLL", 1, 0x829A, 3, count, 8, 0)
    return with_exif(jpeg or plain_jpeg(), b"II*\x00" + struct.pack("<L", 8) + ifd0 + exif_ifd)


def exif_text_of_type(kind: int, jpeg: bytes | None = None) -> bytes:
    """ImageDescription and Artist declared as another type (SHORT, RATIONAL...)."""
    start = ifd_end(2)
    block = tiff([(0x010E, kind, 1, b"\x01\x00\x02\x00"),
                  (0x013B, kind, 1, struct.pack("<L", start))], tail=b"\x00" * 8)
    return with_exif(jpeg or plain_jpeg(), block)


def exif_overlap_bomb() -> bytes:
    """Every tag piexif knows in IFD0, each a BYTE array over the same 60 KB: each entry is in
    bounds; together piexif keeps a hundred copies of the block as tuples."""
    import piexif

    tags = sorted(t for t in piexif.TAGS["Image"] if t not in (0x8769, 0x8825))
    start = ifd_end(len(tags))
    span = 62000 - start
    listed = [(tag, 1, span, struct.pack("<L", start)) for tag in tags]
    return with_exif(plain_jpeg(), tiff(listed, tail=b"\x00" * span))


def exif_text(description: bytes, *, copyright: bytes = b"") -> bytes:
    """A JPEG whose EXIF ImageDescription (and Copyright) are these exact bytes."""
    texts = [(0x010E, description)] + ([(0x8298, copyright)] if copyright else [])
    start = ifd_end(len(texts))
    entries, tail = [], b""
    for tag, value in texts:
        data = value + b"\x00"
        entries.append((tag, 2, len(data), struct.pack("<L", start + len(tail))))
        tail += data
    return with_exif(plain_jpeg(), tiff(entries, tail=tail))


def with_icc(jpeg: bytes, icc: bytes) -> bytes:
    """The profile in APP2 ICC_PROFILE chunks (as many as it takes), whatever it holds."""
    size = 65519  # a segment's 65533 bytes, less the chunk header
    chunks = [icc[i:i + size] for i in range(0, len(icc), size)] or [b""]
    return after_soi(jpeg, *(
        segment(0xE2, b"ICC_PROFILE\x00" + bytes((n, len(chunks))) + chunk)
        for n, chunk in enumerate(chunks, 1)))


def adobe_rgb_profile() -> bytes:
    """A real non-sRGB RGB profile (libvips' built-in P3)."""
    sample = photo(8, 8).icc_transform("p3", input_profile="srgb")
    return bytes(sample.get("icc-profile-data"))


def damaged_profile(field: str) -> bytes:
    """A real profile with one header field damaged."""
    icc = bytearray(adobe_rgb_profile())
    at = {"size": 0, "class": 12, "space": 16, "pcs": 20, "tags": 128}[field]
    icc[at:at + 4] = {"space": b"R\xe9B ", "pcs": b"XY\xffZ"}.get(field, b"\xff\xff\xff\xff")
    return bytes(icc)


def restart_jpeg(width: int = 320, height: int = 200, interval: int = 2,
                 **save: object) -> bytes:
    """A baseline JPEG with a restart marker every ``interval`` MCU rows' worth of blocks."""
    return bytes(photo(width, height, seed=11).jpegsave_buffer(
        Q=85, keep="none", restart_interval=interval, **save))


def scan_start(jpeg: bytes) -> int:
    """Offset of the first byte of entropy-coded data."""
    sos = jpeg.find(SOS)
    return int(sos + 2 + struct.unpack(">H", jpeg[sos + 2:sos + 4])[0])


def strict_reason(data: bytes) -> str:
    """What a strict decoder (libvips, any libjpeg warning fatal) says; "" when it decodes."""
    try:
        pyvips.Image.jpegload_buffer(data, fail_on="warning").avg()
    except pyvips.Error as error:
        return f"{error.message}\n{error.detail}"
    return ""


def restart_markers(jpeg: bytes) -> list[int]:
    start = scan_start(jpeg)
    return [i for i in range(start, len(jpeg) - 1)
            if jpeg[i] == 0xFF and 0xD0 <= jpeg[i + 1] <= 0xD7]


def find_flip(jpeg: bytes, start: int, end: int, wanted: str) -> bytes:
    """The first one-bit flip in ``jpeg[start:end]`` after which a strict decoder's complaint
    matches ``wanted`` (a regex)."""
    for at in range(start, end):
        if jpeg[at] == 0xFF or jpeg[at - 1] == 0xFF:
            continue  # not a marker or a stuffed byte: a flip in the coded data itself
        for bit in range(8):
            flipped = bytearray(jpeg)
            flipped[at] ^= 1 << bit
            if re.search(wanted, strict_reason(bytes(flipped))):
                return bytes(flipped)
    raise AssertionError(f"no flip in {start}..{end} gives {wanted!r}")


def flip_in_restart_interval(jpeg: bytes, which: int = 3) -> bytes:
    """One bit flipped inside restart interval ``which``, such that libjpeg loses step and
    only says "extraneous bytes before marker 0xd?" at the next restart marker."""
    rst = restart_markers(jpeg)
    return find_flip(jpeg, rst[which - 1] + 2, rst[which],
                     r"extraneous bytes before marker 0xd[0-7]")


def progressive_cmyk(width: int, height: int) -> bytes:
    """A progressive CMYK JPEG (4 components, no subsampling): the decode holds every
    coefficient, 8 bytes a pixel."""
    rgb = photo(width, height, seed=4)
    cmyk = rgb.icc_transform("cmyk", input_profile="srgb")
    return bytes(cmyk.jpegsave_buffer(Q=70, interlace=True, keep="none"))


def strip(width: int, height: int) -> bytes:
    colour = [90, 140, 200]
    image = pyvips.Image.black(width, height, bands=3).linear([1, 1, 1], colour).cast("uchar")
    return bytes(image.copy(interpretation="srgb").jpegsave_buffer(Q=90, keep="none"))
