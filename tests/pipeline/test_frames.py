"""JPEG frame types: the fast shrunk decode only for the frames it is known to handle; lossless
and arithmetic-coded JPEGs made through libvips like any other photo; what no decoder here
reads refused on the header, in one line; no frame-type mutation ends a run with a signal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import imagecodecs
import numpy as np
import pytest
import pyvips

from imgwarm.pipeline.jpeg import read_header
from tests.support import parts
from tests.support.corpus import corpus_files, imgwarm
from tests.support.files import all_files
from tests.support.fuzzing import FRAMES, lossless_jpeg
from tests.support.images import as_srgb8, decode, mean_abs_diff, photo

pytestmark = pytest.mark.slow


def grey(width: int, height: int) -> np.ndarray:
    image = photo(width, height, seed=5).colourspace("b-w").cast("uchar")
    return np.ndarray(buffer=image.write_to_memory(), dtype=np.uint8, shape=(height, width))


def lossless(width: int, height: int, bands: int) -> bytes:
    image = photo(width, height, seed=5)
    data = lossless_jpeg(image.colourspace("b-w") if bands == 1 else image)
    assert read_header(data).frame == 0xC3  # SOF3: lossless, Huffman-coded
    return data


def optimize(folder: Path, workdir: Path, *options: str) -> tuple[int, dict[str, dict], str]:
    """A real ``imgwarm optimize --json`` run: exit status, results by file name, stderr."""
    done = imgwarm(workdir, "optimize", "--json", *options, str(folder))
    results = {Path(r["source"]).name: r for r in map(json.loads, done.stdout.splitlines())}
    return done.returncode, results, done.stderr


def widest(result: dict, origin: Path, fmt: str = "jpeg") -> pyvips.Image:
    variant = max((v for v in result["variants"] if v["format"] == fmt), key=lambda v: v["width"])
    return decode(origin / variant["path"])


@pytest.mark.parametrize("bands", [3, 1], ids=["rgb", "grey"])
def test_lossless_jpeg_is_made_like_any_photo(tmp_path: Path, bands: int) -> None:
    # 4200 px wide: the 1920 px variant needs a 2x shrink, where the shrunk decode crashed.
    folder = tmp_path / "in"
    folder.mkdir()
    sources = {"big.jpg": lossless(4200, 2800, bands), "small.jpg": lossless(500, 333, bands)}
    for name, data in sources.items():
        (folder / name).write_bytes(data)
    status, results, stderr = optimize(folder, tmp_path)
    assert status == 0, stderr
    for name, data in sources.items():
        result = results[name]
        assert result["ok"], result
        lenient = pyvips.Image.jpegload_buffer(data)  # no warning is fatal
        assert (result["width"], result["height"]) == (lenient.width, lenient.height)
        top = min(1920, lenient.width)
        assert max(v["width"] for v in result["variants"]) == top
        for fmt in ("jpeg", "webp"):
            made = widest(result, tmp_path / "var" / "origin", fmt)
            assert (made.width, made.height) == (top, round(lenient.height * top / lenient.width))
            assert mean_abs_diff(as_srgb8(made), lenient) < 2.5


def test_arithmetic_coded_jpeg_is_made(tmp_path: Path) -> None:
    parts.binary("jpegtran", "libjpeg-turbo-progs")
    folder = tmp_path / "in"
    folder.mkdir()
    plain = tmp_path / "plain.jpg"
    plain.write_bytes(bytes(photo(2600, 1700, seed=3).jpegsave_buffer(Q=90)))
    for name, extra in (("arith.jpg", []), ("arith-progressive.jpg", ["-progressive"])):
        subprocess.run(["jpegtran", "-arithmetic", *extra, "-outfile", str(folder / name),
                        str(plain)], check=True)
        assert read_header((folder / name).read_bytes()).frame in (0xC9, 0xCA)
    status, results, stderr = optimize(folder, tmp_path)
    assert status == 0, stderr
    reference = decode(plain)
    for result in results.values():
        assert result["ok"], result
        assert mean_abs_diff(widest(result, tmp_path / "var" / "origin"), reference) < 2.0


def _with_frame(data: bytes, marker: int) -> bytes:
    at = read_header(data).frame_at
    assert at > 0
    return data[:at] + bytes([marker]) + data[at + 1:]


def test_what_no_decoder_here_reads_is_refused_on_the_header(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    samples = grey(300, 200).astype(np.uint16)
    cases = {
        "twelve.jpg": bytes(imagecodecs.jpeg8_encode(samples * 16, bitspersample=12,
                                                     level=90)),
        "sixteen.jpg": bytes(imagecodecs.jpeg8_encode(samples * 256, bitspersample=16,
                                                      lossless=True)),
        "hierarchical.jpg": _with_frame(bytes(photo(300, 200).jpegsave_buffer()), 0xC5),
    }
    for name, data in cases.items():
        (folder / name).write_bytes(data)
    status, results, _ = optimize(folder, tmp_path)
    assert status == 1
    assert "12-bit JPEG samples are not supported" in results["twelve.jpg"]["error"]
    assert "16-bit JPEG samples are not supported" in results["sixteen.jpg"]["error"]
    assert "hierarchical JPEG (SOF5) is not supported" in results["hierarchical.jpg"]["error"]
    for name in cases:  # one line each, naming the file; nothing left behind
        error = results[name]["error"]
        assert error.startswith(f"{folder / name}: unsupported JPEG coding: ") and "\n" not in error
    assert all_files(tmp_path / "var" / "origin") == []


def _seeds() -> dict[str, bytes]:
    picture_ = photo(1000, 700, seed=9)
    seeds = {
        "baseline.jpg": bytes(picture_.jpegsave_buffer(Q=85)),
        "progressive.jpg": bytes(picture_.jpegsave_buffer(Q=85, interlace=True)),
        "grey.jpg": bytes(picture_.colourspace("b-w").jpegsave_buffer(Q=85)),
        "cmyk.jpg": bytes(picture_.icc_transform("cmyk", input_profile="srgb")
                          .jpegsave_buffer(Q=85)),
        "lossless.jpg": lossless(1000, 700, 3),
    }
    for path in corpus_files("*.jp*g"):
        data = path.read_bytes()
        header = read_header(data)
        # every corpus JPEG with a frame, but no bombs: their refusal is on the header anyway
        if header.frame is not None and header.width * header.height <= 40_000_000:
            seeds[path.name] = data
    return seeds


def test_no_frame_type_mutation_ends_the_run(tmp_path: Path) -> None:
    """Every JPEG's frame marker changed to every other SOFn: each file is made or refused
    with its one line, the decoder never crashes (no "crashed" line: the frame dispatch, not
    the isolation, keeps it alive), and the run ends with an exit status, not a signal."""
    folder = tmp_path / "in"
    folder.mkdir()
    names = []
    for name, data in _seeds().items():
        frame = read_header(data).frame
        for marker in sorted(set(FRAMES) - {frame}):
            mutated = f"{Path(name).stem}-sof{marker - 0xC0}.jpg"
            (folder / mutated).write_bytes(_with_frame(data, marker))
            names.append(mutated)
    assert len(names) >= 5 * 12
    status, results, stderr = optimize(folder, tmp_path, "--widths", "320,1280")
    assert status in (0, 1), stderr[-2000:]
    assert sorted(results) == sorted(names)
    refused = [r for r in results.values() if not r["ok"]]
    assert refused and len(refused) < len(results)  # both verdicts happen
    for result in refused:
        assert "crashed" not in result["error"] and "internal error" not in result["error"]
        assert "\n" not in result["error"]
    for result in results.values():  # what was made decodes, at its recorded size
        for variant in result.get("variants", []):
            made = decode(tmp_path / "var" / "origin" / variant["path"])
            assert (made.width, made.height) == (variant["width"], variant["height"])
