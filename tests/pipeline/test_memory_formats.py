"""Memory of every source format: what each decoder really takes (a fresh worker-like
process's peak RSS, above an idle one) is within the estimate made on its header, and
max_memory bounds whole runs of every format with 1 and 2 workers."""

from __future__ import annotations

import io
import warnings
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

pytestmark = pytest.mark.alone  # peaks of processes: nothing beside them (tests/support/alone.py)

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


@pytest.mark.slow
@pytest.mark.parametrize("name", ["plain.png", "alpha.png", "lossy.webp"])
def test_each_libvips_thread_is_counted(name: str, sources: Path, tmp_path: Path) -> None:
    """A lone worker runs one libvips thread a core, each resizing regions of its own: 13 MiB
    a thread for a transparent 4000-pixel source to 1920 (premultiplied floats), 12.5 from an
    8000-pixel one. With 16 (a 16-core machine): alpha.png took 273-328 MiB, estimated 141
    before threads were counted, 490 now."""
    tiny = tmp_path / "tiny.jpg"
    tiny.write_bytes(plain_jpeg())
    idle = peak_make(tiny, LARGE, threads=16)[0]
    peak, estimate = peak_make(sources / name, LARGE, threads=16)
    assert peak - idle <= estimate, (
        f"{name}: {(peak - idle) / MIB:.0f} MiB above an idle process, estimated "
        f"{estimate / MIB:.0f}")


def test_a_tiff_with_samples_it_cannot_use_is_refused_on_the_header() -> None:
    """64 samples a pixel: libvips decodes them all (1,411 MiB at 3000x3000), then fails
    ("linear: vector must have 1 or 65 elements")."""
    many = _pattern(64, 48).bandjoin([_pattern(64, 48)[0]] * 61).copy(interpretation="srgb")
    settings = load_settings().image
    with pytest.raises(UnsupportedFormat, match=r"many\.tif: a TIFF with 64 samples per "
                       r"pixel: imgwarm uses at most 4 \(srgb colour and alpha\); "
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


# Each format once, in its coding with the most memory a pixel (the runs take turns).
RUN = ["progressive.jpg", "interlaced.png", "alpha.png", "lossless.webp", "10-bit.avif",
       "16-bit.tif", "still.gif"]


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
    status, peak = _run([sources / name for name in RUN], workers, limit, tmp_path / "run")
    assert idle_status == 0 and status in (0, 1)  # (1: some refused, over the limit alone)
    assert peak - idle <= limit, f"{(peak - idle) / MIB:.0f} MiB over an idle run"


# --- idle workers ------------------------------------------------------------------------------

def test_an_idle_worker_holds_no_more_than_max_memory_counts_for_it() -> None:
    """A worker that has made a source and waits (libvips, numpy, pydantic loaded)."""
    from imgwarm.config.image import IDLE_WORKER
    from imgwarm.manifest import Credits
    from imgwarm.pipeline.isolate import Isolated

    with Isolated(1) as pool:
        pool.make(plain_jpeg(), "tiny.jpg", load_settings().image, Credits())
        (pid,) = pool.pids()
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))
    assert 40 * MIB < rss <= IDLE_WORKER


def test_max_memory_caps_the_workers_with_a_warning() -> None:
    from imgwarm.cli.make import PRESTART_MOST
    from imgwarm.pipeline.batch import batch_workers

    assert load_settings().image.memory_workers() == PRESTART_MOST == 11  # 1G, the default
    with pytest.warns(RuntimeWarning, match=r"imgwarm: 1 worker\(s\), not 16: max_memory "
                      r"\(64 MiB\) holds 1 idle worker\(s\) at 72 MiB each and one "
                      r"12-megapixel photo's decode \(200 MiB\); raise max_memory for more"):
        assert batch_workers(load_settings(max_memory="64M", workers=16), 20) == 1
    assert batch_workers(load_settings(max_memory="4G", workers=16), 20) == 16
    with warnings.catch_warnings():  # one a core is a default, not asked for: cut silently
        warnings.simplefilter("error")
        assert batch_workers(load_settings(max_memory="64M", workers=0), 20) == 1


@pytest.mark.slow
def test_a_run_never_starts_more_workers_than_max_memory_holds(tmp_path: Path) -> None:
    """16 workers asked for with max_memory=64M held 1.1 GiB idle: now one starts, even ahead
    of the settings (the whole run's own memory, not above anything)."""
    tiny = []
    for i in range(16):
        tiny.append(tmp_path / f"tiny-{i}.jpg")
        tiny[-1].write_bytes(plain_jpeg(seed=i))
    status, peak = _run(tiny, 16, 64 * MIB, tmp_path / "run")
    assert status == 0
    assert peak <= 64 * MIB + IDLE_RUN_CLI, f"{peak / MIB:.0f} MiB"


IDLE_RUN_CLI = 64 * MIB  # the optimize process itself (no pyvips: reads files, writes them)


def test_the_queue_workers_pool_is_read_from_celerys_options() -> None:
    """``imgwarm worker -c N``: N is taken out of Celery's options and capped like
    optimize's workers (worker() passes the capped number on)."""
    from imgwarm.cli.queue import _concurrency

    assert _concurrency(("-c", "4", "-n", "w1")) == (4, ["-n", "w1"])
    assert _concurrency(("-c3", "--concurrency=16", "-l", "DEBUG")) == (16, ["-l", "DEBUG"])
    assert _concurrency(("--loglevel", "INFO")) == (None, ["--loglevel", "INFO"])
    small = load_settings(max_memory="300M").image
    assert small.workers_within_memory(16)[0] == 1
