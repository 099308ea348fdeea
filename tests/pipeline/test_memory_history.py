"""A worker's memory does not grow with the sources it made before: between jobs it is back at
its idle size, and each job's peak above that stays within the job's own estimate, whatever
came before (budget.steady_malloc and give_back; the format fuzzer found a worker at 617 MiB
under max_memory=256M, every decode within its estimate)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import load_settings
from imgwarm.exceptions import ImgwarmError
from imgwarm.manifest import Credits
from imgwarm.pipeline.isolate import Isolated
from imgwarm.pipeline.make import plan
from imgwarm.pipeline.probe import probe
from tests.support.fuzz_formats import gif_seeds
from tests.support.fuzzing import format_cases

pytestmark = [pytest.mark.slow, pytest.mark.alone]

MIB = 1 << 20
SETTLED = 48 * MIB  # what a worker may keep between jobs beyond its idle size (caches, stacks)


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _kept(pid: int, idle: int, wait: float = 1.0) -> int:
    """What the worker keeps above its idle size between jobs. libvips' threads free a large
    decode's buffers just after the worker has answered (measured: 25-90 MiB, gone within
    10 ms), so while the figure is over the bound it is read again, for up to ``wait``."""
    until = time.monotonic() + wait
    kept = _status(pid, "RssAnon") - idle
    while kept > SETTLED and time.monotonic() < until:
        time.sleep(0.005)
        kept = _status(pid, "RssAnon") - idle
    return kept


def test_a_workers_peak_does_not_grow_with_the_sources_before() -> None:
    # GIFs whose frames are wider than their screens (up to 8 MP declared, 14 KB each)
    # among small ones, as uploads come: the order the fuzzer met them in
    cases = format_cases("gif", 200)[:197]
    settings = load_settings(max_memory="256M").image
    estimates: dict[str, int] = {}
    for case in cases:
        try:
            info = probe(case.data, case.name, settings)
            estimates[case.name] = plan(case.name, info, settings).cost
        except ImgwarmError:
            pass  # refused on the header: nothing decoded
    assert max(estimates.values()) > 200 * MIB  # the run holds decodes near the bound
    over: list[str] = []
    with Isolated(1) as pool:
        (pid,) = pool.pids()
        for name, data in gif_seeds().items():  # started and warm: every module loaded
            pool.make(data, name, settings, Credits())
        idle = _status(pid, "RssAnon")

        def made(case: Any) -> list[str]:
            """What one job took above the worker before it, and kept after, over bounds."""
            said = []
            before = _status(pid, "VmRSS")
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from here
            with contextlib.suppress(ImgwarmError):  # a refusal is as good a job as any
                pool.make(case.data, case.name, settings, Credits())
            assert pool.pids() == [pid], f"{case.name}: the worker died"
            peak = _status(pid, "VmHWM") - before
            if peak > estimates.get(case.name, 32 * MIB):
                said.append(f"{case.name}: {peak / MIB:.0f} MiB above the worker before it, "
                            f"estimate {estimates.get(case.name, 0) / MIB:.0f}")
            kept = _kept(pid, idle)
            if kept > SETTLED:
                said.append(f"after {case.name}: the worker keeps {kept / MIB:.0f} MiB")
            return said

        for case in cases:
            # A job over a bound is made once more, at once: memory that grows with the
            # jobs before shows again (they are still before it); what libvips' threads
            # happened to hold when the machine was busy (83-111 MiB kept, 77-78 MiB above
            # an estimate of 69, with a neighbour's load) need not
            if made(case):
                over += made(case)
    assert over == [], "\n".join(over[:10])
