"""Memory: estimated on the header, refused above the budget, and the sum of decodes bounded
across threads and processes (peak RSS read back from the kernel)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import pyvips

from imgwarm.config import Settings, load_settings
from imgwarm.exceptions import LimitExceeded
from imgwarm.pipeline.budget import UNIT, MemoryBudget
from imgwarm.pipeline.jpeg import read_header
from imgwarm.pipeline.probe import probe
from tests.support.files import all_files
from tests.support.hostile import plain_jpeg, progressive_cmyk
from tests.support.images import photo
from tests.support.measure import peak_anon, peak_rss
from tests.support.pipeline import run

pytestmark = pytest.mark.alone  # peaks of processes: nothing beside them (tests/support/alone.py)

MIB = 1 << 20


def test_progressive_jpeg_holds_every_coefficient() -> None:
    baseline = plain_jpeg(1000, 600)
    progressive = bytes(photo(1000, 600).jpegsave_buffer(interlace=True, keep="none"))
    assert read_header(baseline).coefficient_bytes() == 0
    # 4:2:0: Y in 125x75 blocks, Cb and Cr in 63x38 each; 128 bytes a block
    assert read_header(progressive).coefficient_bytes() == (125 * 75 + 2 * 63 * 38) * 128


def test_interlaced_png_is_held_whole(settings: Settings) -> None:
    picture = photo(400, 300)
    interlaced = bytes(picture.pngsave_buffer(interlace=True))
    assert probe(interlaced, "i.png", settings.image).buffered == 400 * 300 * 3
    assert probe(bytes(picture.pngsave_buffer()), "p.png", settings.image).buffered == 0


@pytest.mark.slow
def test_a_decode_above_the_budget_alone_is_refused_on_the_header(settings: Settings) -> None:
    data = progressive_cmyk(4000, 4000)  # 122 MiB of coefficients
    cut = data[:len(data) // 3]  # proof that nothing is decoded: the pixels would fail
    tight = settings.updated(max_memory=100 * MIB, widths=[320])
    with pytest.raises(LimitExceeded, match=r"needs about \d+ MiB of memory \(a progressive or "
                       r"multi-scan JPEG holds all of its coefficients; .*over max_memory "
                       r"\(100 MiB\); refused before decoding"):
        run(cut, "big.jpg", tight)
    assert all_files(settings.store.origin_root) == []
    baseline = bytes(photo(4000, 4000).jpegsave_buffer(Q=60, keep="none"))
    assert run(baseline, "baseline.jpg", tight).variants  # decoded at 1/8: it fits


def test_an_interlaced_png_above_the_budget_is_refused_saying_why(settings: Settings) -> None:
    flat = (pyvips.Image.black(4000, 4000, bands=3) + 90).cast("uchar")  # 46 MiB decoded
    # (the resize's line caches hold some 1,500 of its 4000-pixel rows either way)
    tight = settings.updated(max_memory=80 * MIB, widths=[320])
    with pytest.raises(LimitExceeded, match=r"\(an interlaced PNG is decoded whole; "):
        run(bytes(flat.pngsave_buffer(interlace=True)), "i.png", tight)
    assert run(bytes(flat.pngsave_buffer()), "p.png", tight).variants  # read row by row


def test_max_memory_is_a_setting_with_a_floor() -> None:
    from imgwarm.exceptions import SettingsError

    assert load_settings(max_memory=2 << 30).image.max_memory == 2 << 30
    with pytest.raises(SettingsError, match=r"max_memory.*allowed: 64M or more"):
        load_settings(max_memory=1000)


# --- the budget itself ------------------------------------------------------------------------

def _hold(path: str, limit: int, amount: int, log: str, tag: str, pause: float) -> None:
    budget = MemoryBudget(limit, Path(path))
    with budget.reserve(amount):
        with open(log, "a") as out:
            out.write(f"start {tag}\n")
        time.sleep(pause)
        with open(log, "a") as out:
            out.write(f"end {tag}\n")


def _events(log: Path) -> list[str]:
    return log.read_text().split("\n")[:-1]


def _never_overlap(events: list[str]) -> bool:
    return all(events[i].split()[1] == events[i + 1].split()[1]
               for i in range(0, len(events), 2))


def _processes(tmp_path: Path, count: int, amount: int, pause: float) -> list[str]:
    """``count`` processes each holding ``amount`` of a 64-unit budget for ``pause`` seconds;
    the start and end events they logged, in order."""
    log, lock = tmp_path / "log", tmp_path / "budget"
    fork = multiprocessing.get_context("fork")
    workers = [fork.Process(target=_hold, args=(str(lock), 64 * UNIT, amount, str(log),
                                                str(i), pause)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    return _events(log)


def test_processes_whose_reservations_do_not_fit_together_take_turns(tmp_path: Path) -> None:
    events = _processes(tmp_path, 4, 40 * UNIT, 0.2)
    assert len(events) == 8 and _never_overlap(events)


def test_reservations_that_fit_together_run_side_by_side(tmp_path: Path) -> None:
    events = _processes(tmp_path, 3, 20 * UNIT, 1.0)
    assert [e.split()[0] for e in events] == ["start"] * 3 + ["end"] * 3


def test_threads_take_turns_too(tmp_path: Path) -> None:
    log = tmp_path / "log"
    budget = MemoryBudget(64 * UNIT, tmp_path / "budget")

    def hold(tag: str) -> None:
        with budget.reserve(50 * UNIT):
            with log.open("a") as out:
                out.write(f"start {tag}\n")
            time.sleep(0.1)
            with log.open("a") as out:
                out.write(f"end {tag}\n")

    threads = [threading.Thread(target=hold, args=(str(i),)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    events = _events(log)
    assert len(events) == 6 and _never_overlap(events)


def _hold_forever(path: str, limit: int, ready: str) -> None:
    with MemoryBudget(limit, Path(path)).reserve(limit):
        Path(ready).touch()
        time.sleep(3600)


def test_a_killed_holder_gives_its_share_back(tmp_path: Path) -> None:
    lock, ready = tmp_path / "budget", tmp_path / "ready"
    holder = multiprocessing.get_context("fork").Process(
        target=_hold_forever, args=(str(lock), 64 * UNIT, str(ready)))
    holder.start()
    while not ready.exists():
        time.sleep(0.01)
    got = threading.Event()

    def take() -> None:
        with MemoryBudget(64 * UNIT, lock).reserve(64 * UNIT):
            got.set()

    waiter = threading.Thread(target=take, daemon=True)
    waiter.start()
    assert not got.wait(0.5)  # held: it waits
    os.kill(holder.pid or 0, signal.SIGKILL)
    holder.join()
    assert got.wait(30)  # the kernel dropped the dead holder's locks


# --- peak RSS of real runs --------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_progressive(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], list[Path]]:
    folder = tmp_path_factory.mktemp("progressive")
    data = progressive_cmyk(5000, 5000)  # 191 MiB of coefficients each

    def copies(count: int) -> list[Path]:
        paths = [folder / f"cmyk-{i}.jpg" for i in range(count)]
        for path in paths:
            if not path.exists():
                path.write_bytes(data)
        return paths

    return copies


@pytest.mark.slow
def test_the_sum_of_running_decodes_stays_under_max_memory(
    big_progressive: Callable[[int], list[Path]], tmp_path: Path,
) -> None:
    """Three progressive CMYK 5000x5000 files on 3 workers: with a budget that fits one, the
    run (its worker processes together) never holds more than the budget above an idle run;
    with room for all three it does (so the bound is what keeps it down)."""
    sources = [str(p) for p in big_progressive(3)]
    tiny = []  # as many as the sources: an idle run has as many worker processes
    for i in range(3):
        tiny.append(str(tmp_path / f"tiny-{i}.jpg"))
        Path(tiny[-1]).write_bytes(plain_jpeg())
    budget = 400 * MIB  # (estimated 352 MiB each; and it holds 2 workers, not 3: all the same)

    def make(limit: int, *files: str) -> tuple[int, int]:
        out = tmp_path / f"out-{limit}-{len(files)}"
        config = tmp_path / f"imgwarm-{limit}.toml"
        config.write_text(f"max_memory = {limit}\n")
        return peak_anon(["--config", str(config), "optimize", "--workers", "3",
                         "--origin-root", str(out / "o"), "--manifest-root", str(out / "m"),
                         *files], tmp_path)

    idle_status, idle = make(budget, *tiny)
    bounded_status, bounded = make(budget, *sources)
    free_status, free = make(4 << 30, *sources)
    assert (idle_status, bounded_status, free_status) == (0, 0, 0)
    assert bounded - idle <= budget
    assert free - idle > budget


def test_a_waiting_reservation_takes_units_as_they_come_free(tmp_path: Path) -> None:
    """C needs 40 of 64 units while A holds 10 and B 50: it must start once B ends, though
    A still holds its 10 (not wait for one particular holder)."""
    budget = MemoryBudget(64 * UNIT, tmp_path / "budget")
    a_may_end, b_may_end, c_started = threading.Event(), threading.Event(), threading.Event()
    a_held, b_held = threading.Event(), threading.Event()

    def hold(amount: int, held: threading.Event | None, until: threading.Event | None) -> None:
        with budget.reserve(amount * UNIT):
            if held is not None:
                held.set()
            if until is not None:
                assert until.wait(30)
            else:
                c_started.set()

    a = threading.Thread(target=hold, args=(10, a_held, a_may_end))
    b = threading.Thread(target=hold, args=(50, b_held, b_may_end))
    a.start()
    assert a_held.wait(30)
    b.start()
    assert b_held.wait(30)
    c = threading.Thread(target=hold, args=(40, None, None))
    c.start()
    assert not c_started.wait(0.3)  # 4 units free: C waits
    b_may_end.set()
    assert c_started.wait(30)  # B's 50 came free; A still holds 10
    a_may_end.set()
    for thread in (a, b, c):
        thread.join(30)


def test_the_budget_is_never_in_someone_elses_folder(tmp_path: Path) -> None:
    """Anyone who could lock the budget's file could hang imgwarm: the folder must be this
    user's alone, else the budget is kept per process, with a warning."""
    from imgwarm.pipeline.budget import private_file

    mine = private_file(tmp_path / "mine", "memory")
    assert (tmp_path / "mine").stat().st_mode & 0o777 == 0o700 and mine.name == "memory"
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    theirs.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "mine")
    for folder in (theirs, link):
        with pytest.raises(Exception, match="not a folder of this user's alone"):
            private_file(folder, "memory")
    (tmp_path / "mine" / "other").symlink_to("/etc/passwd")
    with pytest.warns(RuntimeWarning, match="kept per process"):
        fallback = MemoryBudget(64 * UNIT, tmp_path / "mine" / "other")  # a planted link
    with fallback.reserve(10 * UNIT):
        pass  # still works, within the process


def _flat_pattern(side: int, bands: int) -> pyvips.Image:
    """Large but well compressed: memory counts, not file size."""
    x = pyvips.Image.xyz(side, side)
    planes = [x[0] // 97 % 256, x[1] // 89 % 256, (x[0] + x[1]) // 101 % 256, x[0] // 53 % 256]
    picture = planes[0].bandjoin(planes[1:bands]).cast("uchar")
    return picture.copy(interpretation="srgb" if bands >= 3 else "b-w")


ESTIMATED = {
    "rgba": lambda: bytes(_flat_pattern(6000, 4).pngsave_buffer(compression=9)),
    "rgba-interlaced": lambda: bytes(_flat_pattern(6000, 4).pngsave_buffer(interlace=True)),
    "grey-alpha": lambda: bytes(_flat_pattern(6000, 2).pngsave_buffer(compression=9)),
    "progressive-cmyk": lambda: progressive_cmyk(4000, 4000),
    "baseline-rgb": lambda: bytes(_flat_pattern(8000, 3).jpegsave_buffer(Q=80)),
}


@pytest.mark.parametrize("kind", sorted(ESTIMATED))
@pytest.mark.slow
def test_the_estimate_is_never_below_what_a_run_takes(kind: str, tmp_path: Path) -> None:
    from imgwarm.pipeline.make import plan

    suffix = "jpg" if kind in ("progressive-cmyk", "baseline-rgb") else "png"
    source = tmp_path / f"{kind}.{suffix}"
    source.write_bytes(ESTIMATED[kind]())
    tiny = tmp_path / "tiny.jpg"
    tiny.write_bytes(plain_jpeg())
    settings = load_settings()
    estimate = plan(str(source), probe(source.read_bytes(), str(source), settings.image),
                    settings.image).cost

    def peak(path: Path) -> int:
        out = tmp_path / f"out-{path.stem}"
        code, found = peak_rss(["optimize", "--workers", "1", "--origin-root", str(out / "o"),
                                "--manifest-root", str(out / "m"), str(path)], tmp_path)
        assert code == 0
        return found

    assert peak(source) - peak(tiny) <= estimate
