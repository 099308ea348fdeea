"""Measure JPEG XL holding HDR natively against the Ultra HDR JPEG imgwarm makes (an SDR JPEG
with a gain map, pipeline/gainmap.py): bytes at an equal HDR error.

The source is an Ultra HDR photo (default: the corpus's ``ultra-hdr.jpg``). Its HDR rendition
(libvips' ``uhdr2scRGB``: linear light, 1.0 the SDR white, highlights above) resized to
``--width`` is the reference. Contenders:

    ultra hdr       imgwarm's own JPEG of that width (``optimize_file``, formats jpeg): the
                    SDR base at the default quality plus its gain map
    jxl d..e..      JPEG XL from the linear float pixels (PFM), libjxl's ``cjxl`` (Debian's
                    libjxl-tools: pillow-jxl-plugin, which imgwarm encodes with, takes 8-bit
                    RGB only, with no colour encoding: it cannot write HDR), by distance and
                    effort (the PFM tagged linear sRGB, 1.0 at 203 cd/m2)

Error: PSNR after the ST 2084 (PQ) curve with the SDR white at 203 cd/m2 (ITU-R BT.2408),
the usual perceptually even space for HDR differences ("PSNR-PQ"); higher is better. Also
the gain map's share of the JPEG's bytes. Encode times are wall seconds of one
run each (cjxl single-threaded), relative to the Ultra HDR JPEG's whole optimize.

Usage (a quiet machine; needs cjxl and djxl):
    .venv/bin/python bench/jxl_hdr.py [--width 1920] [--source FILE]

Written also to bench/results/jxl_hdr.json.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy
import pyvips
from common import save_results  # bench/common.py

from imgwarm.config import Settings
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import Stores
from tests.support.corpus import corpus_dir

SDR_WHITE = 203.0  # cd/m2 (ITU-R BT.2408)


def pq(linear: numpy.ndarray) -> numpy.ndarray:
    """ST 2084's inverse EOTF of scRGB values (1.0 = SDR white), clipped to its 10,000 cd/m2."""
    y = numpy.clip(linear * SDR_WHITE / 10000.0, 0.0, 1.0)
    m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875
    return ((c1 + c2 * y ** m1) / (1 + c3 * y ** m1)) ** m2


def psnr_pq(reference: numpy.ndarray, other: numpy.ndarray) -> float:
    error = float(numpy.mean((pq(reference) - pq(other)) ** 2))
    return 10 * numpy.log10(1.0 / error) if error else float("inf")


def array(image: pyvips.Image) -> numpy.ndarray:
    return numpy.asarray(image.cast("float").numpy(), dtype=numpy.float64)[..., :3]


def hdr_of_jpeg(data: bytes) -> numpy.ndarray:
    """The HDR rendition a gain-map-aware viewer shows of an Ultra HDR JPEG."""
    return array(pyvips.Image.uhdrload_buffer(data).uhdr2scRGB())


def write_pfm(path: Path, pixels: numpy.ndarray) -> None:
    height, width, _ = pixels.shape
    with path.open("wb") as out:  # bottom row first, little-endian (a negative scale)
        out.write(f"PF\n{width} {height}\n-1.0\n".encode())
        out.write(numpy.ascontiguousarray(pixels[::-1], dtype="<f4").tobytes())


def read_pfm(path: Path) -> numpy.ndarray:
    data = path.read_bytes()
    head: list[str] = []
    at = 0
    while len(head) < 3:
        end = data.index(b"\n", at)
        head.append(data[at:end].decode())
        at = end + 1
    width, height = map(int, head[1].split())
    order = "<f4" if float(head[2]) < 0 else ">f4"
    channels = 3 if head[0] == "PF" else 1
    pixels = numpy.frombuffer(data, dtype=order, count=width * height * channels, offset=at)
    return pixels.reshape(height, width, channels)[::-1].astype(numpy.float64)


def ultra_hdr(source: Path, width: int, work: Path) -> tuple[bytes, float]:
    settings = Settings().updated(origin_root=work / "origin", manifest_root=work / "manifest",
                                  fsync=False, workers=1, formats=["jpeg"], widths=[width],
                                  fallback_widths=[])
    started = time.perf_counter()
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    took = time.perf_counter() - started
    found = [v for v in manifest.variants if v.width == width]
    if len(found) != 1:
        raise SystemExit(f"{source}: no {width}-px variant (is it narrower? give --width)")
    (variant,) = found
    return (work / "origin" / variant.path).read_bytes(), took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--source", type=Path, default=corpus_dir() / "ultra-hdr.jpg")
    parser.add_argument("--distances", default="0.5,1,1.5,2,3,4")
    parser.add_argument("--efforts", default="3,7")
    args = parser.parse_args()
    for tool in ("cjxl", "djxl"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found: apt-get install libjxl-tools")
    try:
        header = pyvips.Image.uhdrload(str(args.source))
    except pyvips.Error as error:
        said = str(error).strip().splitlines()[-1].strip()  # libvips' own reason
        raise SystemExit(f"{args.source}: not an Ultra HDR JPEG ({said})") from None
    if not header.get_typeof("gainmap-data"):
        raise SystemExit(f"{args.source}: not an Ultra HDR JPEG (no gain map)")
    work = Path(tempfile.mkdtemp(prefix="imgwarm-bench-jxl-hdr-"))
    try:
        jpeg, jpeg_time = ultra_hdr(args.source, args.width, work)
        reference_image = header.uhdr2scRGB()
        scale = args.width / reference_image.width
        reference = array(reference_image.resize(scale, kernel="lanczos3"))
        reference = numpy.clip(reference, 0, None)
        shown = hdr_of_jpeg(jpeg)
        if shown.shape != reference.shape:  # the pipeline rounds the height its own way
            lines = min(shown.shape[0], reference.shape[0])
            shown, reference = shown[:lines], reference[:lines]
        gain = len(pyvips.Image.uhdrload_buffer(jpeg).get("gainmap-data"))
        rows: list[dict[str, Any]] = [{
            "contender": "ultra hdr (imgwarm's JPEG + gain map)", "bytes": len(jpeg),
            "psnr_pq": psnr_pq(reference, shown), "seconds": jpeg_time, "gain_map_bytes": gain}]
        pfm = work / "reference.pfm"
        write_pfm(pfm, reference)
        for effort in [int(e) for e in args.efforts.split(",")]:
            for distance in [float(d) for d in args.distances.split(",")]:
                out, back = work / "out.jxl", work / "back.pfm"
                started = time.perf_counter()
                subprocess.run(["cjxl", str(pfm), str(out), "-d", str(distance), "-e",
                                str(effort), "--num_threads=0", "--quiet",
                                "-x", "color_space=RGB_D65_SRG_Rel_Lin",
                                f"--intensity_target={SDR_WHITE:g}"], check=True,
                               capture_output=True)
                took = time.perf_counter() - started
                subprocess.run(["djxl", str(out), str(back), "--quiet"], check=True,
                               capture_output=True)
                rows.append({"contender": f"jxl d{distance:g} e{effort}",
                             "bytes": out.stat().st_size,
                             "psnr_pq": psnr_pq(reference, read_pfm(back)[:reference.shape[0]]),
                             "seconds": took})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first = rows[0]
    print(f"{args.source.name} at {args.width} px wide, HDR error as PSNR-PQ (higher is "
          "better); bytes and time against imgwarm's Ultra HDR JPEG\n")
    print(f"(the gain map: {first['gain_map_bytes']:,} of the JPEG's bytes)\n")
    print("| contender | bytes | PSNR-PQ (dB) | bytes ratio | time ratio |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['contender']} | {row['bytes']:,} | {row['psnr_pq']:.2f} | "
              f"{row['bytes'] / first['bytes']:.2f} | {row['seconds'] / first['seconds']:.2f} |")
    save_results("jxl_hdr", rows)


if __name__ == "__main__":
    main()
