"""Structure-aware mutations of the containers imgwarm reads besides JPEG: PNG chunks, WebP's
RIFF chunks, ISOBMFF boxes (AVIF, HEIC), TIFF IFDs and GIF blocks. Each parser finds where a
file's structure and data lie (for the byte mutations of fuzz_bytes.py); each mutation lies
about one field, as a hostile upload would, and keeps the rest valid (PNG CRCs recomputed) so
that the lie reaches the decoder."""

from __future__ import annotations

import random
import struct
import zlib

from tests.support import hostile
from tests.support.fuzz_bytes import Mutation, Span, interesting

# --- PNG ----------------------------------------------------------------------------------------


def png_chunks(data: bytes) -> list[tuple[bytes, int, int]]:
    """(type, start, end) of each chunk: length, type, data, CRC."""
    found, pos = [], 8
    while pos + 12 <= len(data):
        length = struct.unpack(">I", data[pos:pos + 4])[0]
        end = pos + 12 + length
        found.append((data[pos + 4:pos + 8], pos, min(end, len(data))))
        if end > len(data) or data[pos + 4:pos + 8] == b"IEND":
            break
        pos = end
    return found


def png_data(data: bytes) -> list[Span]:
    return [(a + 8, b - 4) for kind, a, b in png_chunks(data) if kind == b"IDAT"]


def png_spans(data: bytes) -> list[Span]:
    return [(a, b) for _, a, b in png_chunks(data)]


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload)))


def _png_recrc(data: bytes, start: int, end: int) -> bytes:
    """The chunk at ``start``..``end`` with its CRC made right again."""
    crc = struct.pack(">I", zlib.crc32(data[start + 4:end - 4]))
    return data[:end - 4] + crc + data[end:]


def png_crc(rng: random.Random, data: bytes) -> bytes | None:
    chunks = png_chunks(data)
    _, _, end = rng.choice(chunks)
    out = bytearray(data)
    out[end - 1 - rng.randrange(4)] ^= 1 << rng.randrange(8)
    return bytes(out)


def png_length(rng: random.Random, data: bytes) -> bytes | None:
    _, start, _ = rng.choice(png_chunks(data))
    return data[:start] + struct.pack(">I", interesting(rng, 32)) + data[start + 4:]


def png_idat_recrc(rng: random.Random, data: bytes) -> bytes | None:
    """Bits flipped in the compressed data with the CRC made right: damage that only zlib and
    the row filters can tell."""
    idats = [(a, b) for kind, a, b in png_chunks(data) if kind == b"IDAT" and b - a > 12]
    if not idats:
        return None
    a, b = rng.choice(idats)
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(a + 8, b - 4)] ^= 1 << rng.randrange(8)
    return _png_recrc(bytes(out), a, b)


def png_header(rng: random.Random, data: bytes) -> bytes | None:
    """One IHDR field changed (CRC right): width, height, bit depth, colour type, interlace."""
    heads = [(a, b) for kind, a, b in png_chunks(data) if kind == b"IHDR" and b - a == 25]
    if not heads:
        return None
    a, b = heads[0]
    field = rng.choice(["width", "height", "depth", "colour", "interlace"])
    at, value = {
        "width": (a + 8, struct.pack(">I", interesting(rng, 31))),
        "height": (a + 12, struct.pack(">I", interesting(rng, 31))),
        "depth": (a + 16, bytes((rng.choice([1, 2, 4, 8, 16, 3, 32, 0]),))),
        "colour": (a + 17, bytes((rng.choice([0, 2, 3, 4, 6, 1, 7]),))),
        "interlace": (a + 20, bytes((rng.choice([0, 1, 2]),))),
    }[field]
    return _png_recrc(data[:at] + value + data[at + len(value):], a, b)


def png_ancillary(rng: random.Random, data: bytes) -> bytes | None:
    """A hostile ancillary chunk before the first IDAT: eXIf with lying counts, a text chunk
    of odd bytes, an iCCP that does not inflate, a PLTE where none belongs."""
    first = next((a for kind, a, _ in png_chunks(data) if kind == b"IDAT"), None)
    if first is None:
        return None
    count = rng.choice([1 << 16, 1 << 27, (1 << 32) - 1])
    chunk = rng.choice([
        _png_chunk(b"eXIf", hostile.tiff([(0x010E, 2, count, struct.pack("<L", 8))])),
        _png_chunk(b"eXIf", bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))),
        _png_chunk(b"tEXt", b"Comment\x00" + bytes(rng.randrange(256) for _ in range(200))),
        _png_chunk(b"zTXt", b"Description\x00\x00" + zlib.compress(b"\xff" * 100_000)),
        _png_chunk(b"iCCP", b"icc\x00\x00" + bytes(rng.randrange(256) for _ in range(64))),
        _png_chunk(b"PLTE", bytes(rng.randrange(256) for _ in range(3 * rng.randint(1, 300)))),
    ])
    return data[:first] + chunk + data[first:]


PNG: dict[str, Mutation] = {
    "png-crc": png_crc,
    "png-length": png_length,
    "png-idat-recrc": png_idat_recrc,
    "png-header": png_header,
    "png-ancillary": png_ancillary,
}

# --- WebP (RIFF) --------------------------------------------------------------------------------


def riff_chunks(data: bytes) -> list[tuple[bytes, int, int]]:
    """(FourCC, start, end) of each chunk after the RIFF header, padding included."""
    found, pos = [], 12
    while pos + 8 <= len(data):
        size = struct.unpack("<I", data[pos + 4:pos + 8])[0]
        end = pos + 8 + size + (size & 1)
        found.append((data[pos:pos + 4], pos, min(end, len(data))))
        if end > len(data):
            break
        pos = end
    return found


_SKIP = {b"VP8 ": 10, b"VP8L": 5, b"ALPH": 1}  # each bitstream's own header


def webp_data(data: bytes) -> list[Span]:
    return [(a + 8 + _SKIP[kind], b) for kind, a, b in riff_chunks(data) if kind in _SKIP]


def webp_spans(data: bytes) -> list[Span]:
    return [(a, b) for _, a, b in riff_chunks(data)]


def webp_riff_size(rng: random.Random, data: bytes) -> bytes:
    size = rng.choice([interesting(rng, 32), len(data) - 8 + rng.choice([-9, -1, 1, 2, 1000])])
    return data[:4] + struct.pack("<I", size % (1 << 32)) + data[8:]


def webp_chunk_size(rng: random.Random, data: bytes) -> bytes | None:
    chunks = riff_chunks(data)
    if not chunks:
        return None
    _, a, b = rng.choice(chunks)
    real = b - a - 8
    size = rng.choice([interesting(rng, 32), max(0, real + rng.choice([-7, -1, 1, 2, 64]))])
    return data[:a + 4] + struct.pack("<I", size) + data[a + 8:]


def webp_canvas(rng: random.Random, data: bytes) -> bytes | None:
    """VP8X: its flags (animation, alpha, EXIF, ICC) or its canvas size changed."""
    found = [a for kind, a, _ in riff_chunks(data) if kind == b"VP8X"]
    if not found:
        return None
    a = found[0] + 8
    if rng.random() < 0.4:
        flags = rng.choice([0x02, 0x04, 0x08, 0x10, 0x20, 0x3E, rng.randrange(256)])
        return data[:a] + bytes((data[a] ^ flags,)) + data[a + 1:]
    which = rng.choice([4, 7])
    value = interesting(rng, 24).to_bytes(3, "little")
    return data[:a + which] + value + data[a + which + 3:]


def webp_frame_size(rng: random.Random, data: bytes) -> bytes | None:
    """The size in the bitstream itself: VP8's 14-bit width and height (with the 2-bit scale),
    or VP8L's packed width-1 and height-1 (a 32-byte lossless WebP declared 10000x10000)."""
    for kind, a, _ in riff_chunks(data):
        if kind == b"VP8 ":
            at = a + 8 + 6 + rng.choice([0, 2])
            value = interesting(rng, 16)
            return data[:at] + struct.pack("<H", value) + data[at + 2:]
        if kind == b"VP8L":
            at = a + 9
            bits = struct.unpack("<I", data[at:at + 4])[0]
            width, height = interesting(rng, 14), interesting(rng, 14)
            bits = (bits & ~((1 << 28) - 1)) | width | (height << 14)
            return data[:at] + struct.pack("<I", bits) + data[at + 4:]
    return None


def webp_metadata(rng: random.Random, data: bytes) -> bytes | None:
    """An EXIF, XMP or ICCP chunk (with its VP8X flag) holding lies: counts, sizes, bytes."""
    found = [a for kind, a, _ in riff_chunks(data) if kind == b"VP8X"]
    if not found:
        return None
    kind, flag = rng.choice([(b"EXIF", 0x08), (b"XMP ", 0x04), (b"ICCP", 0x20)])
    count = rng.choice([1 << 16, 1 << 27, (1 << 32) - 1])
    payload = rng.choice([
        hostile.tiff([(0x010E, 2, count, struct.pack("<L", 8))]),
        hostile.tiff([(0x8769, 4, 1, struct.pack("<L", 0xFFFFFFF0))]),
        bytes(rng.randrange(256) for _ in range(rng.randint(0, 300))),
    ])
    size = len(payload) if rng.random() < 0.7 else interesting(rng, 32)
    chunk = kind + struct.pack("<I", size) + payload + b"\x00" * (len(payload) & 1)
    a = found[0]
    out = data[:a + 8] + bytes((data[a + 8] | flag,)) + data[a + 9:]
    out = out + chunk
    return out[:4] + struct.pack("<I", len(out) - 8) + out[8:]


def webp_alpha(rng: random.Random, data: bytes) -> bytes | None:
    """ALPH's header byte (compression, filter, pre-processing) changed."""
    found = [a for kind, a, _ in riff_chunks(data) if kind == b"ALPH"]
    if not found:
        return None
    at = found[0] + 8
    return data[:at] + bytes((rng.randrange(256),)) + data[at + 1:]


WEBP: dict[str, Mutation] = {
    "riff-size": webp_riff_size,
    "chunk-size": webp_chunk_size,
    "vp8x": webp_canvas,
    "frame-size": webp_frame_size,
    "webp-metadata": webp_metadata,
    "alph": webp_alpha,
}

# --- ISOBMFF (AVIF, HEIC) -----------------------------------------------------------------------

_CONTAINERS = {b"meta": 4, b"iprp": 0, b"ipco": 0, b"moov": 0, b"trak": 0, b"mdia": 0,
               b"minf": 0, b"stbl": 0, b"dinf": 0, b"grpl": 0, b"iinf": 6}


def boxes(data: bytes, start: int = 0, end: int | None = None,
          depth: int = 0) -> list[tuple[bytes, int, int, int]]:
    """(type, start, end, depth) of every box, its children after it."""
    end = len(data) if end is None else end
    found, pos = [], start
    while pos + 8 <= end and depth < 8:
        size, kind = struct.unpack(">I", data[pos:pos + 4])[0], data[pos + 4:pos + 8]
        header = 8
        if size == 1 and pos + 16 <= end:
            size, header = struct.unpack(">Q", data[pos + 8:pos + 16])[0], 16
        elif size == 0:
            size = end - pos
        if size < header:
            break
        stop = min(pos + size, end)
        found.append((kind, pos, stop, depth))
        if kind in _CONTAINERS:
            skip = _CONTAINERS[kind]
            if kind == b"iinf":  # full box, then an entry count of 16 or 32 bits
                skip = 6 if data[pos + header] == 0 else 8
            found.extend(boxes(data, pos + header + skip, stop, depth + 1))
        pos = pos + size
    return found


def heif_data(data: bytes) -> list[Span]:
    return [(a + 8, b) for kind, a, b, _ in boxes(data) if kind in (b"mdat", b"idat")]


def heif_spans(data: bytes) -> list[Span]:
    """Top-level boxes and item properties: what can be dropped or repeated whole."""
    return [(a, b) for kind, a, b, depth in boxes(data)
            if depth == 0 or kind in (b"ispe", b"pixi", b"av1C", b"hvcC", b"colr", b"irot")]


_BRANDS = (b"avif", b"avis", b"mif1", b"msf1", b"heic", b"heix", b"mif3", b"miaf", b"MA1B")


def heif_brand(rng: random.Random, data: bytes) -> bytes | None:
    """ftyp's major brand, or one of its compatible brands: avis (an image sequence), another
    format's, or bytes that are no FourCC."""
    ftyp = [(a, b) for kind, a, b, _ in boxes(data) if kind == b"ftyp"]
    if not ftyp:
        return None
    a, b = ftyp[0]
    slots = [a + 8, *range(a + 16, b - 3, 4)]
    at = rng.choice(slots)
    brand = rng.choice([*_BRANDS, bytes(rng.randrange(256) for _ in range(4))])
    return data[:at] + brand + data[at + 4:]


def heif_fourcc(rng: random.Random, data: bytes) -> bytes | None:
    """A box type or item type with a non-ASCII byte (libheif put such bytes in its error):
    mostly those inside meta (item properties, references, item types), which libheif names
    in its errors; a top-level one (ftyp) is refused by imgwarm's sniffing first."""
    found = [a + 4 for kind, a, _, depth in boxes(data) if kind != b"mdat"
             and (depth > 0 or rng.random() < 0.2)]
    found += 2 * [a + 16 for kind, a, b, _ in boxes(data) if kind == b"infe" and b - a >= 20]
    if not found:
        return None
    at = rng.choice(found) + rng.randrange(4)
    return data[:at] + bytes((rng.randrange(0x80, 0x100),)) + data[at + 1:]


def heif_box_size(rng: random.Random, data: bytes) -> bytes | None:
    found = boxes(data)
    if not found:
        return None
    _, a, b, _ = rng.choice(found)
    size = rng.choice([0, 1, 7, 8, b - a - 1, b - a + 1, interesting(rng, 32)])
    return data[:a] + struct.pack(">I", size % (1 << 32)) + data[a + 4:]


def heif_ispe(rng: random.Random, data: bytes) -> bytes | None:
    """The declared size (ispe) made other than the coded one: larger, zero, huge."""
    found = [a for kind, a, b, _ in boxes(data) if kind == b"ispe" and b - a >= 20]
    if not found:
        return None
    at = rng.choice(found) + 12 + rng.choice([0, 4])
    return data[:at] + struct.pack(">I", interesting(rng, 32)) + data[at + 4:]


def _iloc_fields(data: bytes, a: int, b: int) -> list[tuple[int, int]]:
    """(position, size) of each extent offset and length (and base offset) in an iloc."""
    version = data[a + 8]
    pos = a + 12
    sizes = data[pos] >> 4, data[pos] & 15, data[pos + 1] >> 4, data[pos + 1] & 15
    offset_size, length_size, base_size, index_size = sizes
    pos += 2
    if version < 2:
        count, pos = struct.unpack(">H", data[pos:pos + 2])[0], pos + 2
    else:
        count, pos = struct.unpack(">I", data[pos:pos + 4])[0], pos + 4
    fields = []
    for _ in range(min(count, 64)):
        pos += 2 if version < 2 else 4  # item ID
        pos += 2 if version in (1, 2) else 0  # construction method
        pos += 2  # data reference index
        if base_size:
            fields.append((pos, base_size))
        pos += base_size
        if pos + 2 > b:
            break
        extents, pos = struct.unpack(">H", data[pos:pos + 2])[0], pos + 2
        for _ in range(min(extents, 64)):
            pos += index_size if version in (1, 2) else 0
            if offset_size:
                fields.append((pos, offset_size))
            pos += offset_size
            if length_size:
                fields.append((pos, length_size))
            pos += length_size
        if pos > b:
            break
    return [(p, s) for p, s in fields if p + s <= b]


def heif_iloc(rng: random.Random, data: bytes) -> bytes | None:
    """An item's extent (where its coded data is, and how long) pointed elsewhere."""
    found = [(a, b) for kind, a, b, _ in boxes(data) if kind == b"iloc" and b - a > 16]
    if not found:
        return None
    fields = _iloc_fields(data, *found[0])
    if not fields:
        return None
    at, size = rng.choice(fields)
    old = int.from_bytes(data[at:at + size], "big")
    top = (1 << (8 * size)) - 1
    value = rng.choice([0, 1, top, len(data), old + rng.choice([-16, -1, 1, 16, 4096]),
                        interesting(rng, 8 * size)]) % (top + 1)
    return data[:at] + value.to_bytes(size, "big") + data[at + size:]


def heif_depth(rng: random.Random, data: bytes) -> bytes | None:
    """The declared bit depth (pixi) or AV1 configuration (av1C: high bit depth, 12-bit,
    monochrome, chroma subsampling) made other than the coded one."""
    found = [(kind, a, b) for kind, a, b, _ in boxes(data)
             if kind in (b"pixi", b"av1C") and b - a >= 12]
    if not found:
        return None
    kind, a, b = rng.choice(found)
    if kind == b"pixi":
        at = rng.randrange(a + 13, b) if b > a + 13 else a + 12
        value = rng.choice([0, 1, 10, 12, 16, 255]) if at > a + 12 else rng.choice([0, 1, 4, 255])
    else:
        at = a + 10
        value = data[at] ^ rng.choice([0x40, 0x20, 0x10, 0x08, 0x04, 0x60])
    return data[:at] + bytes((value,)) + data[at + 1:]


HEIF: dict[str, Mutation] = {
    "ftyp-brand": heif_brand,
    "fourcc": heif_fourcc,
    "box-size": heif_box_size,
    "ispe": heif_ispe,
    "iloc": heif_iloc,
    "bit-depth": heif_depth,
}

# --- TIFF ---------------------------------------------------------------------------------------

_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 16: 8}
WIDTH, LENGTH, BITS, COMPRESSION, PHOTOMETRIC = 256, 257, 258, 259, 262
STRIP_OFFSETS, SAMPLES, ROWS, STRIP_COUNTS, PLANAR = 273, 277, 278, 279, 284
TILE_WIDTH, TILE_LENGTH, TILE_OFFSETS, TILE_COUNTS = 322, 323, 324, 325
PREDICTOR, EXTRA, SAMPLE_FORMAT = 317, 338, 339


class Ifd:
    """The first IFD of a classic TIFF: byte order, and each entry's fields and positions."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.order = "<" if data[:2] == b"II" else ">"
        self.start = struct.unpack(self.order + "I", data[4:8])[0]
        count = struct.unpack(self.order + "H", data[self.start:self.start + 2])[0] \
            if self.start + 2 <= len(data) else 0
        # tag: (where the entry is, its type, its count, where its value is)
        self.entries: dict[int, tuple[int, int, int, int]] = {}
        for i in range(count):
            at = self.start + 2 + 12 * i
            if at + 12 > len(data):
                break
            tag, kind, n = struct.unpack(self.order + "HHI", data[at:at + 8])
            size = _TYPE_SIZES.get(kind, 1) * n
            value = at + 8 if size <= 4 else struct.unpack(self.order + "I",
                                                           data[at + 8:at + 12])[0]
            self.entries.setdefault(tag, (at, kind, n, value))
        self.next_at = self.start + 2 + 12 * count

    def values(self, tag: int) -> list[int]:
        if tag not in self.entries:
            return []
        _, kind, n, at = self.entries[tag]
        code = {3: "H", 4: "I", 1: "B"}.get(kind)
        if code is None or at + n * struct.calcsize(code) > len(self.data):
            return []
        return list(struct.unpack(f"{self.order}{n}{code}",
                                  self.data[at:at + n * struct.calcsize(code)]))

    def set(self, tag: int, value: int, index: int = 0) -> bytes | None:
        """The file with one element of ``tag`` set to ``value`` (cut to the field's type)."""
        if tag not in self.entries:
            return None
        _, kind, n, at = self.entries[tag]
        code = {3: "H", 4: "I", 1: "B", 8: "h", 9: "i"}.get(kind)
        if code is None:
            return None
        size = struct.calcsize(code)
        at += size * min(index, n - 1)
        if at + size > len(self.data):
            return None
        value %= 1 << (8 * size)
        if code in "hi" and value >= 1 << (8 * size - 1):
            value -= 1 << (8 * size)
        return self.data[:at] + struct.pack(self.order + code, value) + self.data[at + size:]


def _parts(ifd: Ifd) -> list[Span]:
    offsets = ifd.values(STRIP_OFFSETS) or ifd.values(TILE_OFFSETS)
    counts = ifd.values(STRIP_COUNTS) or ifd.values(TILE_COUNTS)
    return [(a, min(a + n, len(ifd.data))) for a, n in zip(offsets, counts, strict=False)
            if a < len(ifd.data)]


def tiff_data(data: bytes) -> list[Span]:
    try:
        return _parts(Ifd(data))
    except struct.error:
        return []


def tiff_spans(data: bytes) -> list[Span]:
    """The strips or tiles: one dropped or repeated shifts all that follows it."""
    return tiff_data(data)


def tiff_field(rng: random.Random, data: bytes) -> bytes | None:
    """One IFD field that a decoder sizes its work by: samples per pixel, bits, compression,
    photometric, rows per strip, planar configuration, predictor, extra samples, sample
    format, or an element of the strip/tile offsets and byte counts."""
    ifd = Ifd(data)
    tag = rng.choice([t for t in (BITS, COMPRESSION, PHOTOMETRIC, STRIP_OFFSETS, SAMPLES, ROWS,
                                  STRIP_COUNTS, PLANAR, TILE_OFFSETS, TILE_COUNTS, PREDICTOR,
                                  EXTRA, SAMPLE_FORMAT) if t in ifd.entries] or [WIDTH])
    choices = {
        BITS: [1, 2, 4, 12, 16, 24, 32, 64, 0, 255],
        SAMPLES: [0, 2, 3, 4, 5, 16, 64, 65535],
        COMPRESSION: [1, 5, 7, 8, 32773, 32946, 34887, 50000, 6, 2],
        PHOTOMETRIC: [0, 1, 2, 3, 4, 5, 6, 8, 32844],
        PLANAR: [1, 2, 0, 3],
        PREDICTOR: [1, 2, 3, 0, 4],
        SAMPLE_FORMAT: [1, 2, 3, 4, 5, 6, 0],
        EXTRA: [0, 1, 2, 3],
    }
    n = ifd.entries[tag][2]
    value = rng.choice(choices.get(tag, [interesting(rng, 32)]))
    if tag in (STRIP_OFFSETS, TILE_OFFSETS, STRIP_COUNTS, TILE_COUNTS) and rng.random() < 0.5:
        old = ifd.values(tag)
        value = (old[0] if old else 0) + rng.choice([-100, -1, 1, 100, len(data)])
    return ifd.set(tag, value, rng.randrange(n) if n else 0)


def tiff_dimensions(rng: random.Random, data: bytes) -> bytes | None:
    """Width, height or tile size changed: a 728-byte tiled TIFF declaring 393,750 tiles
    took 31 s and was published as a black strip."""
    ifd = Ifd(data)
    tag = rng.choice([t for t in (WIDTH, LENGTH, TILE_WIDTH, TILE_LENGTH) if t in ifd.entries])
    if tag in (TILE_WIDTH, TILE_LENGTH):
        value = rng.choice([0, 1, 8, 15, 16, 32, 4096, 65535, 65536])
    else:
        value = rng.choice([0, 1, 17, 4096, 10000, 16384, 65535, interesting(rng, 32)])
    return ifd.set(tag, value)


def tiff_entries(rng: random.Random, data: bytes) -> bytes | None:
    """An IFD entry removed or repeated in place (the IFD keeps its length): a required tag
    missing, or a tag given twice."""
    ifd = Ifd(data)
    count = len(ifd.entries)
    if count < 2:
        return None
    i = rng.randrange(count - 1)
    at = ifd.start + 2 + 12 * i
    out = bytearray(data)
    if rng.random() < 0.5:  # repeat entry i over entry i + 1
        out[at + 12:at + 24] = data[at:at + 12]
        return bytes(out)
    entries = data[ifd.start + 2:ifd.next_at]
    rest = entries[:12 * i] + entries[12 * (i + 1):]
    out[ifd.start:ifd.start + 2] = struct.pack(ifd.order + "H", count - 1)
    out[ifd.start + 2:ifd.next_at] = rest + data[ifd.next_at:ifd.next_at + 4] + bytes(8)
    return bytes(out[:len(data)])


def tiff_next(rng: random.Random, data: bytes) -> bytes | None:
    """The next-IFD pointer: a loop back to the first IFD, or past the end, or anywhere."""
    ifd = Ifd(data)
    if ifd.next_at + 4 > len(data):
        return None
    value = rng.choice([ifd.start, 8, len(data), len(data) + 100, rng.randrange(len(data))])
    return data[:ifd.next_at] + struct.pack(ifd.order + "I", value) + data[ifd.next_at + 4:]


TIFF: dict[str, Mutation] = {
    "ifd-field": tiff_field,
    "dimensions": tiff_dimensions,
    "ifd-entries": tiff_entries,
    "next-ifd": tiff_next,
}

# --- GIF ----------------------------------------------------------------------------------------


def gif_blocks(data: bytes) -> list[tuple[str, int, int, int]]:
    """(kind, start, end, data start) of each block after the header and global palette:
    "image" (descriptor, local palette, LZW data) or "extension"."""
    if len(data) < 13:
        return []
    packed = data[10]
    pos = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    found = []
    while pos < len(data) and data[pos] != 0x3B:
        start = pos
        if data[pos] == 0x2C:
            if pos + 10 > len(data):
                break
            local = data[pos + 9]
            pos += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0)
            pos += 1  # LZW minimum code size
            kind, first = "image", pos
        elif data[pos] == 0x21:
            pos += 2
            kind, first = "extension", pos
        else:
            break
        while pos < len(data) and data[pos]:
            pos += data[pos] + 1
        pos += 1
        found.append((kind, start, min(pos, len(data)), first))
    return found


def gif_data(data: bytes) -> list[Span]:
    return [(first, end - 1) for kind, _, end, first in gif_blocks(data) if kind == "image"]


def gif_spans(data: bytes) -> list[Span]:
    return [(a, b) for _, a, b, _ in gif_blocks(data)]


def gif_screen(rng: random.Random, data: bytes) -> bytes | None:
    """The logical screen's size (what libnsgif allocates), or its palette flags."""
    if len(data) < 13:
        return None
    if rng.random() < 0.25:
        return data[:10] + bytes((data[10] ^ rng.choice([0x80, 0x07, 0x70, 0x08]),)) + data[11:]
    at = rng.choice([6, 8])
    return data[:at] + struct.pack("<H", interesting(rng, 16)) + data[at + 2:]


def gif_frame_size(rng: random.Random, data: bytes) -> bytes | None:
    """An image descriptor's position or size: outside the screen, zero, larger."""
    images = [a for kind, a, _, _ in gif_blocks(data) if kind == "image"]
    if not images:
        return None
    at = images[0] + 1 + 2 * rng.randrange(4)
    return data[:at] + struct.pack("<H", interesting(rng, 16)) + data[at + 2:]


def gif_frames(rng: random.Random, data: bytes) -> bytes | None:
    """More frames: the image repeated (an animation), with a graphic control block, or a
    frame that is only a descriptor."""
    images = [(a, b) for kind, a, b, _ in gif_blocks(data) if kind == "image"]
    if not images:
        return None
    a, b = images[-1]
    control = b"\x21\xf9\x04" + bytes((rng.choice([0, 4, 8, 12]),)) + b"\x0a\x00\x00\x00"
    frame = data[a:b]
    extra = rng.choice([frame, control + frame, (control + frame) * rng.randint(2, 5),
                        frame[:10] + b"\x02\x00"])
    return data[:b] + extra + data[b:]


def gif_code_size(rng: random.Random, data: bytes) -> bytes | None:
    """The LZW minimum code size: 0, 1, above 8, above 11 (12-bit codes at most)."""
    images = [first for kind, _, _, first in gif_blocks(data) if kind == "image"]
    if not images:
        return None
    at = images[0] - 1
    return data[:at] + bytes((rng.choice([0, 1, 2, 9, 11, 12, 13, 255]),)) + data[at + 1:]


def gif_sub_block(rng: random.Random, data: bytes) -> bytes | None:
    """A sub-block's length byte changed: the LZW stream runs short or reads past a block."""
    lengths = []
    for kind, _, end, first in gif_blocks(data):
        pos = first
        while kind == "image" and pos < end - 1 and data[pos]:
            lengths.append(pos)
            pos += data[pos] + 1
    if not lengths:
        return None
    at = rng.choice(lengths)
    return data[:at] + bytes((rng.choice([0, 1, 254, 255, rng.randrange(256)]),)) + data[at + 1:]


GIF: dict[str, Mutation] = {
    "screen": gif_screen,
    "frame-size": gif_frame_size,
    "frames": gif_frames,
    "code-size": gif_code_size,
    "sub-block": gif_sub_block,
}
