"""A deterministic mutation fuzzer for ``imgwarm optimize``, and the invariants it checks.

Seeds are small synthetic JPEGs of every coding imgwarm meets (baseline, progressive, restart
intervals, CMYK, grey, 4:4:4, rotated, with EXIF, lossless) plus the small good files of the
corpus.
Each case is one seed with one mutation, as an attacker would make it. All cases and seeds
go through one real ``imgwarm optimize --json`` run; then, for every case:

- the run exits 0 or 1, with one JSON line per input and no internal error;
- nothing is left behind: every file in the origin is a variant of an accepted case or seed,
  no temporary file, one manifest per accepted source;
- every output decodes, matches the hash in its name, its size and its recorded dimensions;
- a case that a strict decoder (libvips, any libjpeg warning fatal) refuses but imgwarm
  accepts is compared with its clean seed's output, 8x8 block by block: none may differ
  visibly (a damaged picture must never be published);
- a case that the strict decoder accepts is never refused as corrupt (a picture that
  decodes strictly is never refused).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyvips
import simplejpeg
from PIL import Image

from imgwarm.store.changes import FOLDER as JOURNAL
from imgwarm.store.references import DROPPED, REFS
from tests.support import hostile
from tests.support.images import Credits, jpeg_with_exif, photo, stored_for_orientation

Mutation = Callable[[random.Random, bytes], bytes | None]
VISIBLE = 6.0  # mean absolute difference of an 8x8 block (0..255) that anyone would see
_HEADER_MARKERS = (0xC0, 0xC2, 0xC4, 0xDB, 0xDD, 0xDA, 0xE0, 0xE1, 0xE2, 0xFE)
# Every frame marker (SOFn): Huffman and arithmetic; sequential, progressive, lossless;
# hierarchical or not. Written out here, not taken from the code under test.
FRAMES = (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF)


@dataclass(frozen=True)
class Case:
    name: str  # the file name: number, mutation and seed
    seed: str
    kind: str
    data: bytes


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

def _segments(data: bytes) -> list[tuple[int, int, int]]:
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
    segments = _segments(data)
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
    segments = _segments(data)[:-1]
    if not segments:
        return None
    _, a, b = rng.choice(segments)
    return data[:b] + data[a:b] + data[b:]


def remove_segment(rng: random.Random, data: bytes) -> bytes | None:
    segments = _segments(data)[:-1]
    if not segments:
        return None
    _, a, b = rng.choice(segments)
    return data[:a] + data[b:]


def _damage_table(marker: int) -> Mutation:
    def damage(rng: random.Random, data: bytes) -> bytes | None:
        tables = [(a, b) for m, a, b in _segments(data) if m == marker]
        if not tables:
            return None
        a, b = rng.choice(tables)
        out = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(a + 4, b)] = rng.randrange(256)
        return bytes(out)

    return damage


def odd_dimensions(rng: random.Random, data: bytes) -> bytes | None:
    frames = [a for m, a, _ in _segments(data) if m in (0xC0, 0xC1, 0xC2)]
    if not frames:
        return None
    at = frames[0] + 5
    sizes = [0, 1, 2, 7, 8, 9, 255, 4097, 16384, 65535, rng.randrange(1, 65536)]
    height, width = rng.choice(sizes), rng.choice(sizes)
    return data[:at] + struct.pack(">HH", height, width) + data[at + 4:]


def frame_type(rng: random.Random, data: bytes) -> bytes | None:
    """The frame marker made another SOFn: as a fuzz campaign found, a DCT file labelled
    lossless (SOF3) crashed the shrunk decode."""
    frames = [a for m, a, _ in _segments(data) if m in FRAMES]
    if not frames:
        return None
    at = frames[0] + 1
    marker = rng.choice([f for f in FRAMES if f != data[at]])
    return data[:at] + bytes((marker,)) + data[at + 1:]


def stray_in_header(rng: random.Random, data: bytes) -> bytes | None:
    """Junk before a header marker: harmless, and must give the seed's picture."""
    segments = _segments(data)
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
    "huffman": _damage_table(0xC4),
    "quantisation": _damage_table(0xDB),
    "dimensions": odd_dimensions,
    "frame-type": frame_type,
    "stray-header": stray_in_header,
    "marker-in-scan": marker_in_scan,
    "scan-parameters": scan_parameters,
    "hostile-exif": hostile_exif,
    "hostile-icc": hostile_icc,
}


def make_cases(seeds: dict[str, bytes], count: int, *, seed: int = 7) -> list[Case]:
    """``count`` cases, the same every time for the same seeds: mutations and seeds in turn,
    so that every mutation meets every kind of seed."""
    rng = random.Random(seed)
    names, kinds = sorted(seeds), sorted(MUTATIONS)
    cases: list[Case] = []
    attempt = 0
    while len(cases) < count:
        kind = kinds[attempt % len(kinds)]
        source = names[(attempt // len(kinds)) % len(names)]
        attempt += 1
        mutated = MUTATIONS[kind](rng, seeds[source])
        if mutated is None or mutated == seeds[source]:
            continue
        cases.append(Case(f"{len(cases):05d}-{kind}-{source}", source, kind, mutated))
    return cases


# --- the run and its invariants -----------------------------------------------------------------

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


@dataclass
class Report:
    cases: int = 0
    accepted: int = 0
    refused: int = 0
    strict_refused_accepted: int = 0  # compared block by block with the seed's output
    exit_code: int = 0
    findings: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    accepted_by_kind: Counter[str] = field(default_factory=Counter)
    refused_by_kind: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases, "accepted": self.accepted, "refused": self.refused,
            "strict_refused_but_accepted": self.strict_refused_accepted,
            "findings": len(self.findings), "exit_code": self.exit_code,
            "accepted_by_kind": dict(sorted(self.accepted_by_kind.items())),
            "refused_by_kind": dict(sorted(self.refused_by_kind.items())),
        }


def _reason_class(error: str) -> str:
    text = error.split(": ", 1)[-1]
    for word in ("truncated", "corrupt", "max_pixels", "max_memory", "unsupported",
                 "not a recognised", "cannot read", "too narrow", "bad dimensions"):
        if word in text:
            return word
    return text[:60]


def run_imgwarm(workdir: Path, *folders: Path, widths: str | None = None,
                workers: int = 2) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    options = ["--widths", widths] if widths else []
    return subprocess.run([str(exe), "optimize", "--json", "--workers", str(workers), *options,
                           *map(str, folders)], cwd=workdir, capture_output=True, text=True,
                          env=env, check=False, timeout=3600)


def _widest(result: dict[str, Any]) -> dict[str, Any]:
    return max((v for v in result["variants"] if v["format"] == "webp"), key=lambda v: v["width"])


def _pixels(path: Path) -> np.ndarray[Any, Any]:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=np.float32)


def worst_block(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    """The largest mean absolute difference of any 8x8 block (any channel)."""
    h, w = (a.shape[0] + 7) // 8 * 8, (a.shape[1] + 7) // 8 * 8
    diff = np.zeros((h, w, 3), dtype=np.float32)
    diff[:a.shape[0], :a.shape[1]] = np.abs(a - b)
    blocks = diff.reshape(h // 8, 8, w // 8, 8, 3).mean(axis=(1, 3))
    return float(blocks.max())


def check(workdir: Path, seeds: dict[str, bytes], cases: list[Case],
          widths: str | None = None) -> Report:
    """Write seeds and cases, run imgwarm once over both, check every invariant. Small
    ``widths`` (e.g. "64,120") take the shrink-on-load path; the default decodes small seeds
    at full size."""
    seed_dir, case_dir = workdir / "seeds", workdir / "cases"
    for folder, files in ((seed_dir, seeds), (case_dir, {c.name + ".jpg": c.data for c in cases})):
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
    done = run_imgwarm(workdir, seed_dir, case_dir, widths=widths)
    report = Report(cases=len(cases), exit_code=done.returncode)
    findings = report.findings
    if done.returncode not in (0, 1):
        findings.append(f"exit status {done.returncode}: {done.stderr[-500:]}")
    results: dict[str, dict[str, Any]] = {}
    lines = done.stdout.split("\n")[:-1]  # JSON lines end in "\n" and nothing else
    for line in lines:
        try:
            found = json.loads(line)
        except ValueError:
            findings.append(f"not a JSON line: {line[:200]!r}")
            continue
        results[found["source"]] = found
    inputs = {str(p) for p in [*seed_dir.iterdir(), *case_dir.iterdir()]}
    missing, extra = inputs - set(results), set(results) - inputs
    if missing or extra or len(lines) != len(inputs):
        findings.append(f"JSON lines do not match the inputs: missing {sorted(missing)[:3]}, "
                        f"extra {sorted(extra)[:3]}")
    for found in results.values():
        if "internal error" in (found.get("error") or ""):
            findings.append(f"internal error: {found['error']}")
        if "crashed" in (found.get("error") or ""):  # isolation kept the run, but a crash
            findings.append(f"decoder crash: {found['error']}")
    findings.extend(_check_outputs(workdir, results))
    seed_out = {Path(s).name: r for s, r in results.items() if Path(s).parent == seed_dir}
    for case in cases:
        found = results.get(str(case_dir / (case.name + ".jpg")))
        if found is None:
            continue
        strict = strict_decodes(case.data)
        if found["ok"]:
            report.accepted += 1
            report.accepted_by_kind[case.kind] += 1
            if not strict:
                report.strict_refused_accepted += 1
                findings.extend(_compare(workdir, case, found, seed_out.get(case.seed)))
        else:
            report.refused += 1
            report.refused_by_kind[case.kind] += 1
            report.reasons[_reason_class(found["error"])] += 1
            if strict and any(w in found["error"] for w in ("corrupt", "truncated")):
                findings.append(f"{case.name}: decodes strictly but was refused: "
                                f"{found['error']}")
    return report


def _check_outputs(workdir: Path, results: dict[str, dict[str, Any]]) -> list[str]:
    findings = []
    origin, manifests = workdir / "var" / "origin", workdir / "var" / "manifest"
    expected: dict[str, dict[str, Any]] = {}
    for found in results.values():
        for variant in found.get("variants", []) if found["ok"] else []:
            expected[variant["path"]] = variant
    present = {p.relative_to(origin).as_posix() for p in origin.rglob("*") if p.is_file()} \
        if origin.exists() else set()
    for leftover in sorted(present - set(expected))[:5]:
        findings.append(f"leftover file in the origin: {leftover}")
    manifest_files = [p for p in manifests.rglob("*.json") if p.is_file()
                      and p.relative_to(manifests).parts[0] not in (JOURNAL, REFS, DROPPED)
                      and p.parent != manifests] \
        if manifests.exists() else []
    if len(manifest_files) != sum(1 for r in results.values() if r["ok"]):
        findings.append(f"{len(manifest_files)} manifests for "
                        f"{sum(1 for r in results.values() if r['ok'])} accepted sources")
    for path, variant in expected.items():
        file = origin / path
        if not file.is_file():
            findings.append(f"missing variant {path}")
            continue
        data = file.read_bytes()
        digest = file.name.split(".")[-2]
        if not hashlib.sha256(data).hexdigest().startswith(digest) or len(data) != variant["bytes"]:
            findings.append(f"{path}: does not match its name or size")
        try:
            with Image.open(io.BytesIO(data)) as image:
                image.load()
                size = image.size
        except Exception as error:
            findings.append(f"{path}: does not decode: {error}")
            continue
        if size != (variant["width"], variant["height"]):
            findings.append(f"{path}: is {size}, recorded {variant['width']}x{variant['height']}")
    return findings


def _compare(workdir: Path, case: Case, found: dict[str, Any],
             seed: dict[str, Any] | None) -> list[str]:
    """An accepted case that strict decoding refuses must show the seed's picture."""
    if seed is None or not seed["ok"]:
        return [f"{case.name}: accepted, refused strictly, and its seed gives no picture"]
    mine, theirs = _widest(found), _widest(seed)
    if (mine["width"], mine["height"]) != (theirs["width"], theirs["height"]):
        return [f"{case.name}: accepted, refused strictly, and its size differs from the seed's"]
    origin = workdir / "var" / "origin"
    worst = worst_block(_pixels(origin / mine["path"]), _pixels(origin / theirs["path"]))
    if worst > VISIBLE:
        return [f"{case.name}: accepted, refused strictly, and an 8x8 block differs from the "
                f"seed's output by {worst:.1f} on average"]
    return []
