"""Memory of every source format: what each decoder really takes (a fresh worker-like
process's peak RSS, above an idle one) is within the estimate made on its header, and
max_memory bounds whole runs of every format with 1 and 2 workers."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy
import pytest
import pyvips
from PIL import Image

from imgwarm.config import load_settings
from imgwarm.exceptions import UnsupportedFormat
from imgwarm.pipeline.probe import probe
from tests.support.hostile import plain_jpeg
from tests.support.measure import peak_anon, peak_make

MIB = 1 << 20
LARGE = 4 << 30  # max_memory for the peaks alone: nothing refused, nothing waits


def _pattern(width: int, height: int, bands: int = 3) -> pyvips.Image:
    """Large but quick to encode: memory counts, not file size."""
    x = pyvips.Image.xyz(width, height)
    planes = [x[0] // 97 % 256, x[1] // 89 % 256, (x[0] + x[1]) // 101 % 256, x[0] // 53 % 256]
    picture = planes[0].bandjoin(planes[1:bands]).cast("uchar")
    return picture.copy(interpretation="srgb")


def _deep(width: int, height: int, bands: int = 3) -> pyvips.Image:
    return (_pattern(width, height, bands) * 256).cast("ushort").copy(interpretation="rgb16")


def _gif(width: int, height: int) -> bytes:
    # (Pillow: libvips' gifsave quantises, ten times slower at this size)
    y, x = numpy.mgrid[0:height, 0:width]
    grey = ((x // 97 + y // 89) % 256).astype(numpy.uint8)
    out = io.BytesIO()
    Image.fromarray(grey, "L").convert("P").save(out, "GIF")
    return out.getvalue()


# 12 MP, or 48 MP where the decode's own buffers only outgrow the rest of the work there.
SOURCES: dict[str, Callable[[], bytes]] = {
    "baseline.jpg": lambda: _pattern(4000, 3000).jpegsave_buffer(Q=80),
    "progressive.jpg": lambda: _pattern(4000, 3000).jpegsave_buffer(Q=80, interlace=True),
    "plain.png": lambda: _pattern(4000, 3000).pngsave_buffer(compression=1),
    "interlaced.png": lambda: _pattern(4000, 3000).pngsave_buffer(interlace=True,
                                                                  compression=1),
    "16-bit.png": lambda: _deep(4000, 3000).pngsave_buffer(compression=1),
    "alpha.png": lambda: _pattern(4000, 3000, 4).pngsave_buffer(compression=1),
    "lossy.webp": lambda: _pattern(8000, 6000).webpsave_buffer(Q=80, effort=0),
    "lossless.webp": lambda: _pattern(8000, 6000).webpsave_buffer(lossless=True, effort=0),
    "8-bit.avif": lambda: _pattern(4000, 3000).heifsave_buffer(compression="av1", effort=0),
    "8-bit-alpha-444.avif": lambda: _pattern(4000, 3000, 4).heifsave_buffer(
        compression="av1", effort=0, subsample_mode="off"),
    "10-bit.avif": lambda: _deep(4000, 3000).heifsave_buffer(compression="av1", effort=0,
                                                             bitdepth=10),
    "strips.tif": lambda: _pattern(4000, 3000).tiffsave_buffer(compression="deflate"),
    "tiles.tif": lambda: _pattern(4000, 3000).tiffsave_buffer(compression="deflate",
                                                               tile=True),
    "16-bit.tif": lambda: _deep(4000, 3000).tiffsave_buffer(compression="deflate"),
    "still.gif": lambda: _gif(8000, 6000),
}
# (HEIC: this build's libheif has no HEVC encoder to make one, nor a decoder to read it)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("formats")
    for name, build in SOURCES.items():
        (folder / name).write_bytes(build())
    return folder


@pytest.fixture(scope="module")
def idle_peak(tmp_path_factory: pytest.TempPathFactory) -> int:
    tiny = tmp_path_factory.mktemp("idle") / "tiny.jpg"
    tiny.write_bytes(plain_jpeg())
    return peak_make(tiny, LARGE)[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOURCES))
def test_no_decoder_takes_more_than_its_estimate(name: str, sources: Path,
                                                 idle_peak: int) -> None:
    peak, estimate = peak_make(sources / name, LARGE)
    assert peak - idle_peak <= estimate, (
        f"{name}: {(peak - idle_peak) / MIB:.0f} MiB above an idle process, estimated "
        f"{estimate / MIB:.0f}")


def test_a_tiff_with_samples_it_cannot_use_is_refused_on_the_header() -> None:
    """64 samples a pixel: libvips decodes them all (1,411 MiB at 3000x3000), then fails
    ("linear: vector must have 1 or 65 elements")."""
    many = _pattern(64, 48).bandjoin([_pattern(64, 48)[0]] * 61).copy(interpretation="srgb")
    settings = load_settings().image
    with pytest.raises(UnsupportedFormat, match=r"many\.tif: a TIFF with 64 samples per "
                       r"pixel: imgwarm uses at most 4 for a srgb image \(colour and alpha\); "
                       r"refused before decoding"):
        probe(bytes(many.tiffsave_buffer()), "many.tif", settings)
    cmyk_alpha = _pattern(64, 48, 4).bandjoin(_pattern(64, 48)[0]).copy(interpretation="cmyk")
    assert probe(bytes(cmyk_alpha.tiffsave_buffer()), "cmyk.tif", settings).bands == 5


def _run(sources: list[Path], workers: int, max_memory: int, out: Path) -> tuple[int, int]:
    config = out.with_suffix(".toml")
    config.write_text(f"max_memory = {max_memory}\n")
    return peak_anon(["--config", str(config), "optimize", "--workers", str(workers),
                      "--origin-root", str(out / "o"), "--manifest-root", str(out / "m"),
                      *map(str, sources)], out.parent)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("limit", [256 * MIB, 1 << 30])  # (1G is the default)
def test_a_run_of_every_format_stays_under_max_memory(
    workers: int, limit: int, sources: Path, tmp_path: Path,
) -> None:
    """The memory of the whole run (its worker processes together, above a run of as many
    workers making tiny files) never exceeds max_memory: what is over it alone is refused on
    the header, the rest wait their turn."""
    tiny = []
    for i in range(workers):
        tiny.append(tmp_path / f"tiny-{i}.jpg")
        tiny[-1].write_bytes(plain_jpeg())
    idle_status, idle = _run(tiny, workers, limit, tmp_path / "idle")
    status, peak = _run(sorted(sources.iterdir()), workers, limit, tmp_path / "run")
    assert idle_status == 0 and status in (0, 1)  # (1: some refused, over the limit alone)
    assert peak - idle <= limit, f"{(peak - idle) / MIB:.0f} MiB over an idle run"

