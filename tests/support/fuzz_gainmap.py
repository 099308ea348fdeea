"""Gain maps in the fuzzer: Ultra HDR seeds, mutations of the gain map's structure and of its
metadata, and the invariants of a photo that carries one.

Seeds: the corpus's real Ultra HDR photo (hdrgm XMP, 3840x2160) and small ones made here by
libvips' uhdrsave (ISO 21496-1 metadata), one of them rewritten to carry hdrgm XMP instead,
one turned by EXIF Orientation. An Ultra HDR JPEG is the primary picture, then the gain map's
own JPEG, found through the primary's MPF segment; every mutation here takes the two apart,
changes one, and puts them back with MPF (and the XMP's Item:Length) made to match, unless
lying about them is the mutation.

Structure: the gain map's scan bits, its frame type (SOF9...), tables, a marker in its scan,
its size (larger than the picture), cut short, MPF's offsets and sizes. Metadata: hdrgm XMP
attributes (gamma 0 or -1, max below min, capacity max <= min, inf, NaN, huge numbers, text),
a ``<!DOCTYPE`` or broken XML in an XMP packet (libultrahdr printed its parse errors to the
worker's stdout), and the ISO 21496-1 APP2 block (multichannel and alternate-space flags, bad
versions, zero denominators, cut short).

Invariants, beyond those of every run (fuzzing.py): a photo is never refused only for its gain
map (it is made SDR, with a warning); a photo is made HDR only from a gain map that a strict
decoder (TurboJPEG and libvips, warnings fatal) reads, and a variant marked ``"hdr": true``
carries a gain map, as its MPF second picture, that the strict decoder reads (imgwarm
re-encodes it, so this one alone would never see a damaged source); the SDR picture is the
seed's, block by block.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import struct
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyvips

from tests.support import fuzz_jpeg
from tests.support.files import REPO
from tests.support.fuzz_bytes import Mutation, interesting
from tests.support.fuzzing import (
    VISIBLE,
    Case,
    Report,
    rgb_pixels,
    run_checked,
    widest,
    worst_block,
    write_inputs,
)
from tests.support.images import photo

ULTRA_HDR = REPO / "tests" / "corpus" / "ultra-hdr.jpg"
ISO_URN = b"urn:iso:std:iso:ts:21496:-1\x00"
XMP_NS = b"http://ns.adobe.com/xap/1.0/\x00"

# --- taking an Ultra HDR JPEG apart and putting it back -----------------------------------------


def _segments(data: bytes) -> list[tuple[int, int, int]]:
    return fuzz_jpeg.header_segments(data)


def _mpf(primary: bytes) -> tuple[int, str, int] | None:
    """(where MPF's TIFF header starts, its byte order, where its MP entries start)."""
    for marker, a, _ in _segments(primary):
        if marker == 0xE2 and primary[a + 4:a + 8] == b"MPF\x00":
            base = a + 8
            order = "<" if primary[base:base + 2] == b"II" else ">"
            ifd = base + struct.unpack(order + "I", primary[base + 4:base + 8])[0]
            count = struct.unpack(order + "H", primary[ifd:ifd + 2])[0]
            for i in range(min(count, 16)):
                at = ifd + 2 + 12 * i
                tag = struct.unpack(order + "H", primary[at:at + 2])[0]
                if tag == 0xB002:
                    offset = struct.unpack(order + "I", primary[at + 8:at + 12])[0]
                    return base, order, base + offset
            return None
    return None


def split(data: bytes) -> tuple[bytes, bytes] | None:
    """(primary, gain map) of an Ultra HDR JPEG, by its MPF entries."""
    found = _mpf(data)
    if found is None:
        return None
    base, order, entries = found
    if entries + 32 > len(data):
        return None
    size, offset = struct.unpack(order + "II", data[entries + 20:entries + 28])
    start = base + offset
    if not 0 < start < len(data):
        return None
    return data[:start], data[start:start + size]


def join(primary: bytes, gain: bytes) -> bytes:
    """The two pictures as one file, MPF's sizes and offset and the XMP's Item:Length (where
    the primary has one) made to match."""
    match = list(re.finditer(rb'Item:Length="(\d+)"', primary))
    if match:
        last = match[-1]
        primary = _set_segment_text(primary, last.start(1), last.end(1), str(len(gain)).encode())
    found = _mpf(primary)
    if found is None:
        return primary + gain
    base, order, entries = found
    out = bytearray(primary)
    out[entries + 4:entries + 8] = struct.pack(order + "I", len(primary))
    out[entries + 20:entries + 28] = struct.pack(order + "II", len(gain), len(primary) - base)
    return bytes(out) + gain


def _set_segment_text(data: bytes, start: int, end: int, text: bytes) -> bytes:
    """``data`` with bytes start..end (inside one header segment) replaced by ``text``, the
    segment's length field fixed."""
    for _, a, b in _segments(data):
        if a + 4 <= start and end <= b:
            length = struct.unpack(">H", data[a + 2:a + 4])[0] + len(text) - (end - start)
            if length > 0xFFFF:
                return data
            return (data[:a + 2] + struct.pack(">H", length) + data[a + 4:start] + text
                    + data[end:])
    return data


def _insert_segment(data: bytes, segment: bytes) -> bytes:
    """``segment`` after SOI and any APP0."""
    at = 2
    segments = _segments(data)
    if segments and segments[0][0] == 0xE0:
        at = segments[0][2]
    return data[:at] + segment + data[at:]


def _without(data: bytes, marker: int, start: bytes) -> bytes:
    for m, a, b in _segments(data):
        if m == marker and data[a + 4:a + 4 + len(start)] == start:
            return data[:a] + data[b:]
    return data


# --- seeds --------------------------------------------------------------------------------------

def _hdr_photo(width: int, height: int, seed: int) -> pyvips.Image:
    """A textured photo in linear light with a band above SDR white (4x), as scRGB."""
    linear = photo(width, height, seed=seed).colourspace("scrgb")
    x = pyvips.Image.xyz(width, height)[0]
    boost = (x < width // 3).ifthenelse(4.0, 1.0)
    return (linear * boost).cast("float").copy(interpretation="scrgb")


def _xmp(body: bytes, doctype: bytes = b"") -> bytes:
    packet = doctype + (b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf='
              b'"http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description ' + body
              + b"/></rdf:RDF></x:xmpmeta>")
    payload = XMP_NS + packet
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


PRIMARY_XMP = (b'xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" '
               b'xmlns:Container="http://ns.google.com/photos/1.0/container/" '
               b'xmlns:Item="http://ns.google.com/photos/1.0/container/item/" '
               b'hdrgm:Version="1.0"><Container:Directory><rdf:Seq><rdf:li rdf:parseType='
               b'"Resource"><Container:Item Item:Semantic="Primary" Item:Mime="image/jpeg"/>'
               b'</rdf:li><rdf:li rdf:parseType="Resource"><Container:Item Item:Semantic='
               b'"GainMap" Item:Mime="image/jpeg" Item:Length="0"/></rdf:li></rdf:Seq>'
               b'</Container:Directory></rdf:Description><rdf:Description')
GAIN_XMP = (b'xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0" '
            b'hdrgm:GainMapMin="0" hdrgm:GainMapMax="2.3" hdrgm:Gamma="1" '
            b'hdrgm:OffsetSDR="0.015625" hdrgm:OffsetHDR="0.015625" '
            b'hdrgm:HDRCapacityMin="0" hdrgm:HDRCapacityMax="2.3" '
            b'hdrgm:BaseRenditionIsHDR="False"')


def as_xmp(data: bytes) -> bytes:
    """An ISO 21496-1 Ultra HDR JPEG rewritten to say the same with hdrgm XMP (Android 14's
    first form): the ISO blocks removed, XMP in both pictures."""
    parts = split(data)
    assert parts is not None
    primary, gain = (_without(p, 0xE2, ISO_URN) for p in parts)
    primary = _insert_segment(primary, _xmp(PRIMARY_XMP))
    gain = _insert_segment(gain, _xmp(GAIN_XMP))
    return join(primary, gain)


def synthetic_seeds() -> dict[str, bytes]:
    import io

    import piexif

    iso = bytes(_hdr_photo(480, 320, seed=41).uhdrsave_buffer(Q=90))
    small = bytes(_hdr_photo(320, 240, seed=43).uhdrsave_buffer(Q=85))
    out = io.BytesIO()
    piexif.insert(piexif.dump({"0th": {piexif.ImageIFD.Orientation: 6}}), small, out)
    return {"iso.jpg": iso, "xmp.jpg": as_xmp(iso), "turned.jpg": out.getvalue()}


def seeds(*, corpus: bool = True) -> dict[str, bytes]:
    return synthetic_seeds() | ({"corpus-ultra-hdr.jpg": ULTRA_HDR.read_bytes()}
                                if corpus else {})


# --- mutations ----------------------------------------------------------------------------------

def _on_gain(change: Mutation) -> Mutation:
    """A JPEG mutation applied to the gain map's own JPEG, MPF made to match."""
    def mutate(rng: random.Random, data: bytes) -> bytes | None:
        parts = split(data)
        if parts is None:
            return None
        changed = change(rng, parts[1])
        return None if changed is None else join(parts[0], changed)

    return mutate


def gm_frame_type(rng: random.Random, data: bytes) -> bytes | None:
    """The gain map's SOF relabelled, SOF9 (arithmetic) as often as the rest together: a gain
    map relabelled SOF9 was published as HDR."""
    def relabel(rng: random.Random, gain: bytes) -> bytes | None:
        frames = [a for m, a, _ in _segments(gain) if m in fuzz_jpeg.FRAMES]
        if not frames:
            return None
        choices = [f for f in fuzz_jpeg.FRAMES if f != gain[frames[0] + 1]]
        marker = 0xC9 if rng.random() < 0.5 and 0xC9 in choices else rng.choice(choices)
        return gain[:frames[0] + 1] + bytes((marker,)) + gain[frames[0] + 2:]

    return _on_gain(relabel)(rng, data)


def gm_dimensions(rng: random.Random, data: bytes) -> bytes | None:
    """The gain map's declared size: larger than the picture, zero, or the most a JPEG holds."""
    parts = split(data)
    if parts is None:
        return None
    primary, gain = parts
    frames = [a for m, a, _ in _segments(gain) if m in (0xC0, 0xC1, 0xC2)]
    size = [a for m, a, _ in _segments(primary) if m in (0xC0, 0xC1, 0xC2)]
    if not frames or not size:
        return None
    height, width = struct.unpack(">HH", primary[size[0] + 5:size[0] + 9])
    at = frames[0] + 5
    new = rng.choice([(height * 2, width * 2), (height + 8, width), (0, width // 4),
                      (65535, 65535), (interesting(rng, 16), interesting(rng, 16))])
    new = tuple(min(v, 65535) for v in new)
    return join(primary, gain[:at] + struct.pack(">HH", *new) + gain[at + 4:])


def gm_truncate(rng: random.Random, data: bytes) -> bytes | None:
    """The file cut inside the gain map (MPF still says its full size)."""
    parts = split(data)
    if parts is None or len(parts[1]) < 4:
        return None
    return parts[0] + parts[1][:rng.randrange(2, len(parts[1]))]


def mpf_entries(rng: random.Random, data: bytes) -> bytes | None:
    """MPF's own fields lie: the gain map's offset or size, the picture count, the primary's
    size or attribute."""
    found = _mpf(data)
    if found is None:
        return None
    base, order, entries = found
    at = rng.choice([entries + 4, entries + 20, entries + 24, entries + 16, entries])
    value = rng.choice([0, 1, 8, len(data), len(data) - base + 10, (1 << 32) - 1,
                        interesting(rng, 32)])
    out = data[:at] + struct.pack(order + "I", value % (1 << 32)) + data[at + 4:]
    if rng.random() < 0.2:  # the number of pictures (MPF's NumberOfImages)
        number = out.find(struct.pack(order + "H", 0xB001), base)
        if number > 0:
            out = out[:number + 8] + struct.pack(order + "I", rng.choice([0, 1, 3, 255])) \
                + out[number + 12:]
    return out


_HDRGM = ("GainMapMin", "GainMapMax", "Gamma", "OffsetSDR", "OffsetHDR", "HDRCapacityMin",
          "HDRCapacityMax", "Version", "BaseRenditionIsHDR")
_HOSTILE_NUMBERS = ("0", "-1", "inf", "-inf", "NaN", "1e308", "-1e308", "1e-320", "", "abc",
                    "1,5", "0x10", "99999999999999999999", "-0")


def hdrgm_attribute(rng: random.Random, data: bytes) -> bytes | None:
    """One hdrgm attribute of the gain map's (or primary's) XMP given a value that an encoder
    refuses or a reader trips on: gamma 0 or -1, max below min, capacity max <= min, inf,
    NaN, huge or tiny numbers, text."""
    parts = split(data)
    if parts is None:
        return None
    primary, gain = parts
    name = rng.choice(_HDRGM)
    for which, picture in ((1, gain), (0, primary)):
        found = re.search(rb'hdrgm:' + name.encode() + rb'="([^"]*)"', picture)
        if found is None:
            continue
        value = rng.choice(_HOSTILE_NUMBERS)
        if name in ("GainMapMax", "HDRCapacityMax") and rng.random() < 0.5:
            value = rng.choice(["-2", "-0.5", "0"])  # below or at the minimum
        if name == "Gamma" and rng.random() < 0.5:
            value = rng.choice(["0", "-1"])
        if name in ("GainMapMin", "GainMapMax", "Gamma") and rng.random() < 0.2:
            value = "1, 2"  # per channel, as a list where one value belongs
        changed = _set_segment_text(picture, found.start(1), found.end(1), value.encode())
        return join(*((primary, changed) if which else (changed, gain)))
    return None


def _xmp_spans(picture: bytes) -> list[tuple[int, int]]:
    """(start, end) of the XML of each XMP segment."""
    return [(a + 4 + len(XMP_NS), b) for m, a, b in _segments(picture)
            if m == 0xE1 and picture[a + 4:a + 4 + len(XMP_NS)] == XMP_NS]


def xmp_doctype(rng: random.Random, data: bytes) -> bytes | None:
    """A ``<!DOCTYPE`` (and entities) in an XMP packet, or a new XMP segment holding one:
    libultrahdr's XML reader printed its complaint, with text from the file, to stdout."""
    parts = split(data)
    if parts is None:
        return None
    primary, gain = parts
    doctype = rng.choice([
        b'<!DOCTYPE x:xmpmeta [<!ENTITY a "aaaaaaaaaa">]>',
        b'<!DOCTYPE x [<!ENTITY a "&b;&b;&b;&b;"><!ENTITY b "&c;&c;&c;&c;">'
        b'<!ENTITY c "cccccccccccccccc">]>',
        b'<!DOCTYPE x SYSTEM "file:///etc/passwd">',
        b'<!DOCTYPE \xff\xfe stray "\x00bytes">',
    ])
    which = rng.randrange(2)
    picture = (primary, gain)[which]
    spans = _xmp_spans(picture)
    if spans:
        start, _ = rng.choice(spans)
        changed = _set_segment_text(picture, start, start, doctype)
    else:
        changed = _insert_segment(picture, _xmp(b'xmlns:hdrgm="http://ns.adobe.com/'
                                                b'hdr-gain-map/1.0/" hdrgm:Version="1.0"',
                                                doctype))
    return join(*((changed, gain) if which == 0 else (primary, changed)))


def xmp_broken(rng: random.Random, data: bytes) -> bytes | None:
    """An XMP packet cut, with bytes that are not UTF-8, or tags left open."""
    parts = split(data)
    if parts is None:
        return None
    primary, gain = parts
    which = rng.randrange(2)
    picture = (primary, gain)[which]
    spans = _xmp_spans(picture)
    if not spans:
        return None
    start, end = rng.choice(spans)
    text = picture[start:end]
    choice = rng.randrange(3)
    if choice == 0:
        new = text[:rng.randrange(1, len(text))]
    elif choice == 1:
        at = rng.randrange(len(text))
        new = text[:at] + bytes(rng.randrange(0x80, 0x100) for _ in range(4)) + text[at:]
    else:
        new = text.replace(b"/>", b">", 1).replace(b"</rdf:RDF>", b"", 1)
    changed = _set_segment_text(picture, start, end, new)
    return join(*((changed, gain) if which == 0 else (primary, changed)))


def _iso_payload(picture: bytes) -> tuple[int, int] | None:
    for m, a, b in _segments(picture):
        if m == 0xE2 and picture[a + 4:a + 4 + len(ISO_URN)] == ISO_URN:
            return a + 4 + len(ISO_URN), b
    return None


def iso_block(rng: random.Random, data: bytes) -> bytes | None:
    """The ISO 21496-1 block (the gain map's, or the primary's version block): its flags
    (multichannel, alternate colour space, common denominator), versions, a number or a
    denominator made 0 or huge, or the block cut short."""
    parts = split(data)
    if parts is None:
        return None
    primary, gain = parts
    which = 1 if rng.random() < 0.8 else 0
    picture = (primary, gain)[which]
    span = _iso_payload(picture)
    if span is None:
        return None
    start, end = span
    payload = bytearray(picture[start:end])
    choice = rng.randrange(4)
    if choice == 0 and len(payload) > 4:  # flags: multichannel 0x80, base colour space 0x40
        payload[4] ^= rng.choice([0x80, 0x40, 0xC0, 0x20, 0x08, rng.randrange(256)])
    elif choice == 1 and len(payload) >= 4:  # minimum version, writer version
        at = rng.choice([0, 2])
        payload[at:at + 2] = struct.pack(">H", rng.choice([1, 2, 0x7FFF, 0xFFFF]))
    elif choice == 2 and len(payload) >= 9:  # a numerator or denominator
        at = 5 + 4 * rng.randrange((len(payload) - 5) // 4)
        payload[at:at + 4] = struct.pack(">I", rng.choice([0, 1, 0x7FFFFFFF, 0x80000000,
                                                            0xFFFFFFFF, interesting(rng, 32)]))
    else:
        payload = payload[:rng.randrange(len(payload) + 1)]
    changed = _set_segment_text(picture, start, end, bytes(payload))
    return join(*((changed, gain) if which == 0 else (primary, changed)))


MUTATIONS: dict[str, Mutation] = {
    "gm-flip-scan": _on_gain(fuzz_jpeg.flip_scan),
    "gm-frame-type": gm_frame_type,
    "gm-tables": _on_gain(lambda rng, gain: fuzz_jpeg.damage_table(
        rng.choice([0xC4, 0xDB]))(rng, gain)),
    "gm-marker-in-scan": _on_gain(fuzz_jpeg.marker_in_scan),
    "gm-dimensions": gm_dimensions,
    "gm-truncate": gm_truncate,
    "mpf": mpf_entries,
    "hdrgm": hdrgm_attribute,
    "xmp-doctype": xmp_doctype,
    "xmp-broken": xmp_broken,
    "iso-block": iso_block,
}
STRUCTURE = ("gm-flip-scan", "gm-frame-type", "gm-tables", "gm-marker-in-scan",
             "gm-dimensions", "gm-truncate", "mpf")


def make_cases(seeds: dict[str, bytes], count: int, *, seed: int = 7,
               heavy_every: int = 1) -> list[Case]:
    """``count`` cases, mutations and seeds in turn; a seed named ``corpus-*`` (the 8 MP real
    photo, slow to make) only every ``heavy_every``-th turn."""
    rng = random.Random(seed)
    light = sorted(n for n in seeds if not n.startswith("corpus-"))
    heavy = sorted(n for n in seeds if n.startswith("corpus-"))
    kinds = sorted(MUTATIONS)
    cases: list[Case] = []
    attempt = 0
    while len(cases) < count and attempt < 50 * count + 100:
        kind = kinds[attempt % len(kinds)]
        turn = attempt // len(kinds)
        if heavy and turn % heavy_every == heavy_every - 1:
            source = heavy[(turn // heavy_every) % len(heavy)]
        else:  # the light seeds in turn, over the turns that are theirs
            own = turn - (turn + 1) // heavy_every if heavy else turn
            source = light[own % len(light)]
        attempt += 1
        mutated = MUTATIONS[kind](rng, seeds[source])
        if mutated is None or mutated == seeds[source]:
            continue
        cases.append(Case(f"gainmap-{len(cases):05d}-{kind}-{source}", source, kind, mutated))
    return cases


# --- the run and its invariants -----------------------------------------------------------------

@dataclass
class GainReport(Report):
    hdr: int = 0  # accepted with an HDR variant
    made_sdr: int = 0  # accepted, no HDR variant
    made_sdr_warned: int = 0  # of those, with a warning
    hdr_by_kind: Counter[str] = field(default_factory=Counter)
    sdr_warned_by_kind: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return super().as_dict() | {
            "hdr": self.hdr, "made_sdr": self.made_sdr, "made_sdr_warned": self.made_sdr_warned,
            "hdr_by_kind": dict(sorted(self.hdr_by_kind.items())),
            "sdr_warned_by_kind": dict(sorted(self.sdr_warned_by_kind.items())),
        }


def gain_of_variant(data: bytes) -> bytes | None:
    parts = split(data)
    return None if parts is None or not parts[1] else parts[1]


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def source_gain(data: bytes) -> bytes | None:
    """The gain map a reader takes from a source: libultrahdr's (through libvips' uhdrload),
    which need not be where a lying MPF points; else the MPF second picture."""
    try:
        with _quiet_stdout():  # libultrahdr prints XML errors to fd 1: not into bench output
            header = pyvips.Image.uhdrload_buffer(data, access="sequential")
            if header.get_typeof("gainmap-data"):
                return bytes(header.get("gainmap-data"))
    except pyvips.Error:
        pass
    parts = split(data)
    return parts[1] if parts and parts[1] else None


def strict_gain(gain: bytes) -> str | None:
    """Why a strict decoder refuses the gain map's JPEG (None: it reads it whole)."""
    if not fuzz_jpeg.strict_decodes(gain):
        try:
            import simplejpeg

            simplejpeg.decode_jpeg(gain, colorspace="GRAY", strict=True)
        except ValueError as error:
            return str(error).strip()[:120]
        try:
            pyvips.Image.jpegload_buffer(gain, fail_on="warning").avg()
        except pyvips.Error as error:
            return str(error).strip().splitlines()[0][:120]
        return "refused"
    return None


def check(workdir: Path, seeds: dict[str, bytes], cases: list[Case],
          widths: str | None = None, *, settings: dict[str, str] | None = None,
          memory: bool = False) -> GainReport:
    seed_dir, case_dir = write_inputs(workdir, seeds, cases)
    report = GainReport(cases=len(cases))
    results = run_checked(workdir, seed_dir, case_dir, report, widths, settings, memory)
    origin = workdir / "var" / "origin"
    seed_out = {Path(s).name: r for s, r in results.items() if Path(s).parent == seed_dir}
    for name, made in seed_out.items():
        if not made["ok"] or not any(v.get("hdr") for v in made["variants"]):
            report.find("seed not HDR", f"seed {name} was not made HDR: {made}")
    for case in cases:
        found = results.get(str(case_dir / case.file))
        if found is None:
            continue
        if not found["ok"]:
            report.refused += 1
            report.refused_by_kind[case.kind] += 1
            parts = split(case.data)
            primary = parts[0] if parts else case.data
            if "max_" not in found["error"] and fuzz_jpeg.strict_decodes(primary):
                report.find("refused for its gain map",
                            f"{case.name}: refused, though its picture decodes strictly: "
                            f"{found['error']}", case)
            continue
        report.accepted += 1
        report.accepted_by_kind[case.kind] += 1
        hdr = [v for v in found["variants"] if v.get("hdr")]
        if hdr:
            report.hdr += 1
            report.hdr_by_kind[case.kind] += 1
        else:
            report.made_sdr += 1
            if found.get("warnings"):
                report.made_sdr_warned += 1
                report.sdr_warned_by_kind[case.kind] += 1
        used = source_gain(case.data)
        why_source = "no gain map found" if used is None else strict_gain(used)
        if hdr and why_source is not None:  # a damaged gain map decoded leniently, published
            report.find("HDR from a gain map strict refuses",
                        f"{case.name}: made HDR, though its gain map is refused strictly: "
                        f"{why_source}", case)
        for variant in hdr:
            data = (origin / variant["path"]).read_bytes()
            gain = gain_of_variant(data)
            why = "no gain map found through MPF" if gain is None else strict_gain(gain)
            if why is not None:
                report.find("HDR with a gain map strict refuses",
                            f"{case.name}: {variant['path']} is marked HDR, and its gain map "
                            f"is refused strictly: {why}", case)
                break
        if why_source is not None:
            report.strict_refused_accepted += 1
            report.compared_by_kind[case.kind] += 1
        seed = seed_out.get(case.seed)
        if seed is None or not seed["ok"]:
            continue
        mine, theirs = widest(found), widest(seed)
        if (mine["width"], mine["height"]) != (theirs["width"], theirs["height"]):
            report.find("SDR picture differs", f"{case.name}: made {mine['width']}x"
                        f"{mine['height']}, its seed {theirs['width']}x{theirs['height']}", case)
            continue
        worst = worst_block(rgb_pixels(origin / mine["path"]),
                            rgb_pixels(origin / theirs["path"]))
        if worst > VISIBLE:
            report.find("SDR picture differs", f"{case.name}: an 8x8 block of the SDR picture "
                        f"differs from the seed's by {worst:.1f} on average", case)
    return report
