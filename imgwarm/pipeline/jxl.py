"""JPEG XL: encoded from the pixels, or a JPEG recompressed losslessly, through libjxl
(pillow-jxl-plugin's encoder: libvips' wheel cannot write JPEG XL).

EXIF goes in an ``Exif`` box (a 4-byte offset, then the TIFF structure: ISO/IEC 18181-2),
never Brotli-compressed: libjxl compresses a recompressed JPEG's EXIF (a ``brob`` box) by
default, which few EXIF readers open.
"""

from __future__ import annotations

import struct
from typing import Any

import pyvips

EXIF_HEADER = b"Exif\x00\x00"  # an APP1 segment's, before the TIFF structure


def encode(image: pyvips.Image, quality: int, effort: int, exif: bytes | None) -> bytes:
    """JPEG XL from an sRGB image's pixels (as libvips holds them: no Pillow image between),
    with ``exif`` (piexif's bytes) in its Exif box."""
    encoder = _encoder()(mode="RGBA" if image.hasalpha() else "RGB", lossless=False,
                      quality=quality, effort=effort, num_threads=1)  # one thread: as AVIF
    tiff = _tiff(exif)
    return bytes(encoder(bytes(image.write_to_memory()), image.width, image.height,
                         jpeg_encode=False, exif=b"\0\0\0\0" + tiff if tiff else None))


def recompress(jpeg: bytes) -> bytes:
    """A JPEG as JPEG XL, losslessly: the same DCT coefficients entropy-coded again (about a
    fifth fewer bytes; a decoder can give the JPEG back bit for bit), its EXIF in a plain
    Exif box."""
    encoder = _encoder()(mode="RGB", lossless=True, effort=7, num_threads=1, use_container=True)
    return _plain_exif(bytes(encoder(jpeg, 0, 0, jpeg_encode=True)), _tiff(app1_exif(jpeg)))


def _encoder() -> Any:
    """libjxl's encoder class (loaded only where JPEG XL is made; its type stub predates the
    arguments used here)."""
    from pillow_jxl import Encoder

    return Encoder


def _tiff(exif: bytes | None) -> bytes | None:
    if not exif:
        return None
    return exif[len(EXIF_HEADER):] if exif.startswith(EXIF_HEADER) else exif


def app1_exif(jpeg: bytes) -> bytes | None:
    """The EXIF of a JPEG (its first APP1 segment that holds one, header included), if any."""
    at = 2
    while at + 4 <= len(jpeg) and jpeg[at] == 0xFF:
        marker, length = jpeg[at + 1], int.from_bytes(jpeg[at + 2:at + 4], "big")
        if marker == 0xDA:  # start of scan: the metadata is all before it
            break
        body = jpeg[at + 4:at + 2 + length]
        if marker == 0xE1 and body.startswith(EXIF_HEADER):
            return body
        at += 2 + length
    return None


def _plain_exif(jxl: bytes, tiff: bytes | None) -> bytes:
    """The container's Brotli-compressed Exif box (``brob`` holding ``Exif``) as a plain one
    with the same content (what libjxl compressed: an offset of 0, then the TIFF bytes)."""
    if tiff is None:
        return jxl
    out, at = bytearray(), 0
    while at + 8 <= len(jxl):
        size = int.from_bytes(jxl[at:at + 4], "big")
        if size < 8:  # a box to the end of the file (0), or one this reader does not take
            break
        if jxl[at + 4:at + 12] == b"brobExif":
            body = b"\0\0\0\0" + tiff
            out += struct.pack(">I", 8 + len(body)) + b"Exif" + body
        else:
            out += jxl[at:at + size]
        at += size
    return bytes(out + jxl[at:])
