"""JPEG header: the markers before the first scan, read the way libjpeg reads them.

Three things need the header before any pixel is decoded: the decode rule (stray bytes between
header segments are harmless and are dropped, so that libjpeg never has to warn about them and
every warning it still gives means damaged picture data), the EXIF segment (handed to piexif
only after its entry counts are checked against its length), and the memory a decode will need
(a progressive or multi-scan file keeps every DCT coefficient in memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SOI, EOI, SOS, APP0, APP1, APP2, APP14 = 0xD8, 0xD9, 0xDA, 0xE0, 0xE1, 0xE2, 0xEE
# Frame markers (SOFn) other than DHT (C4), JPG (C8) and DAC (CC).
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_PROGRESSIVE = frozenset({0xC2, 0xC6, 0xCA, 0xCE})
_SEQUENTIAL = frozenset({0xC0, 0xC1, 0xC9})  # libjpeg ignores Ss/Se/Ah/Al of their scans
# What the shrunk decode (TurboJPEG's scaled IDCT) is known to handle: Huffman-coded DCT,
# baseline, extended or progressive, 8-bit. On a lossless frame it corrupts memory.
_SHRINKABLE = frozenset({0xC0, 0xC1, 0xC2})
_HIERARCHICAL = frozenset({0xC5, 0xC6, 0xC7, 0xCD, 0xCE, 0xCF})
_LOSSLESS = frozenset({0xC3, 0xC7, 0xCB, 0xCF})
_PARAMETERLESS = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RST0-7: libjpeg skips them
# Segments that say nothing about the pixels (APP1-13, APP15, COM): metadata, read elsewhere.
_METADATA = frozenset({*range(0xE1, 0xEE), 0xEF, 0xFE})
_EXIF = b"Exif\x00\x00"
_BLOCK_BYTES = 64 * 2  # one 8x8 block of 16-bit DCT coefficients

_XMP = b"http://ns.adobe.com/xap/1.0/\x00"
_ISO_GAINMAP = b"urn:iso:std:iso:ts:21496:-1"

@dataclass(frozen=True)
class Component:
    h: int  # horizontal sampling factor
    v: int  # vertical sampling factor


@dataclass
class JpegHeader:
    """What the header says. ``complete`` is False when it ends before a frame and a scan:
    the decoder is then left to say what is wrong."""

    frame: int | None = None  # the SOFn marker
    frame_at: int = -1  # offset of the SOFn marker's second byte in the file
    precision: int = 0  # bits a sample
    width: int = 0
    height: int = 0
    components: list[Component] = field(default_factory=list)
    scan_components: int = 0  # components in the first scan
    stray: int = 0  # bytes between header segments that belong to none
    exif: bytes | None = None  # the TIFF block of the first APP1 Exif segment
    adobe: bool = False  # an APP14 Adobe segment: libjpeg then reads CMYK as stored inverted
    mpf: bool = False  # an APP2 MPF segment: a second picture follows (a preview, a gain map)
    # the picture says it has a gain map: Adobe/Android XMP (hdrgm) or ISO 21496-1's APP2
    gainmap_tag: bool = False
    pixels: bytes = b""  # what the pixel decoder reads (see ``read_header``)
    complete: bool = False

    @property
    def progressive(self) -> bool:
        return self.frame in _PROGRESSIVE

    @property
    def buffered(self) -> bool:
        """libjpeg keeps the whole coefficient array: several scans make up the picture."""
        return self.progressive or 0 < self.scan_components < len(self.components)

    @property
    def shrinkable(self) -> bool:
        """The frame is one the fast shrunk decode handles; any other goes through libvips."""
        return self.frame in _SHRINKABLE and self.precision == 8

    def unsupported(self) -> str | None:
        """Why no decoder here can make this frame's pixels (libjpeg-turbo has no hierarchical
        mode, and libvips reads 8-bit samples only), or None: None too when the header says
        too little (no frame, no precision), and the decoder is left to say what is wrong."""
        if self.frame is None or not 2 <= self.precision <= 16:
            return None
        if self.frame in _HIERARCHICAL:
            return f"hierarchical JPEG (SOF{self.frame - 0xC0}) is not supported"
        lossless = self.frame in _LOSSLESS
        if self.precision > 8 or (self.precision < 8 and not lossless):
            return (f"{self.precision}-bit JPEG samples are not supported (only 8-bit JPEG, "
                    "including lossless and arithmetic-coded)")
        return None

    def coefficient_bytes(self) -> int:
        """Memory of the whole-image coefficient array a buffered decode holds (else 0)."""
        if not self.buffered or not self.components:
            return 0
        hmax = max(c.h for c in self.components)
        vmax = max(c.v for c in self.components)
        blocks = 0
        for c in self.components:  # as libjpeg sizes each component's block array
            columns = _ceil(_ceil(self.width * c.h, hmax), 8)
            rows = _ceil(_ceil(self.height * c.v, vmax), 8)
            blocks += columns * rows
        return blocks * _BLOCK_BYTES


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _next_marker(data: bytes, pos: int) -> tuple[int, int, int]:
    """As libjpeg's next_marker: skip bytes up to an 0xFF, fill 0xFFs, and stuffed FF00
    pairs. Returns (marker, position after it, bytes skipped that were not fill); marker -1
    at the end of the data."""
    skipped = 0
    while True:
        ff = data.find(b"\xff", pos)
        if ff < 0:
            return -1, len(data), skipped + len(data) - pos
        skipped += ff - pos
        pos = ff
        while pos < len(data) and data[pos] == 0xFF:
            pos += 1
        if pos >= len(data):
            return -1, pos, skipped
        if data[pos] != 0:
            return data[pos], pos + 1, skipped
        skipped += 2  # FF 00: stuffed data, not a marker
        pos += 1


def _length(data: bytes, pos: int) -> int | None:
    return int.from_bytes(data[pos:pos + 2], "big") if pos + 2 <= len(data) else None


def read_header(data: bytes) -> JpegHeader:
    """Walk SOI .. first SOS. ``pixels`` is the file rebuilt from the segments that make the
    picture: stray bytes and fill between header segments dropped; the metadata segments
    (EXIF, ICC, XMP...) left out too, since libjpeg would warn about their own damage (a bad
    ICC chunk) though the picture is whole, and they are read on their own, with their own
    limits; for sequential frames, the first scan's spectral parameters set to the only values
    they may have (libjpeg ignores them but warns; some encoders write zeros); a JFIF version
    libjpeg does not know (2.01) made 1.02 (it changes nothing in the picture, and libjpeg
    warns). Everything from the first scan on is kept as it is. Until the header is complete,
    ``pixels`` is the file itself, and the decoder says what is wrong."""
    header = JpegHeader(pixels=data)
    if data[:2] != b"\xff\xd8":
        return header
    kept: list[bytes] = [data[:2]]
    pos = 2
    while True:
        marker, pos, skipped = _next_marker(data, pos)
        header.stray += skipped
        if marker < 0 or marker in (SOI, EOI):
            return header  # no scan: the decoder says what is wrong
        if marker in _PARAMETERLESS:
            kept.append(bytes((0xFF, marker)))
            continue
        length = _length(data, pos)
        if length is None or length < 2 or pos + length > len(data):
            return header
        segment = bytearray(data[pos:pos + length])
        if marker in _SOF:
            _read_frame(header, marker, segment, pos - 1)
        elif marker == APP1 and header.exif is None and segment[2:8] == _EXIF:
            header.exif = bytes(segment[8:])
        elif marker == APP2 and segment[2:6] == b"MPF\x00":
            header.mpf = True
        elif (marker == APP1 and segment[2:31] == _XMP and b"hdrgm" in segment) or \
                (marker == APP2 and segment[2:2 + len(_ISO_GAINMAP)] == _ISO_GAINMAP):
            header.gainmap_tag = True
        elif marker == APP14 and segment[2:7] == b"Adobe":
            header.adobe = True
        elif marker == APP0 and segment[2:7] == b"JFIF\x00" and len(segment) > 8:
            segment[7:9] = b"\x01\x02"
        elif marker == SOS:
            header.scan_components = segment[2] if length > 2 else 0
            if header.frame in _SEQUENTIAL and length == 6 + 2 * header.scan_components:
                segment[-3:] = b"\x00\x3f\x00"
        if marker not in _METADATA:
            kept.append(bytes((0xFF, marker)) + segment)
        pos += length
        if marker == SOS:
            break
    header.complete = header.frame is not None and header.width > 0 and header.height > 0
    if header.complete:
        header.pixels = b"".join([*kept, data[pos:]])
    return header


def _read_frame(header: JpegHeader, marker: int, segment: bytearray, at: int) -> None:
    if len(segment) < 8 or header.frame is not None:
        return  # a second frame: libjpeg refuses the file itself
    header.frame = marker
    header.frame_at = at
    header.precision = segment[2]
    header.height = int.from_bytes(segment[3:5], "big")
    header.width = int.from_bytes(segment[5:7], "big")
    count = segment[7]
    for i in range(count):
        at = 8 + 3 * i
        if at + 3 > len(segment):
            break
        sampling = segment[at + 1]
        header.components.append(Component(max(1, sampling >> 4), max(1, sampling & 15)))
