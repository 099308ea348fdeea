"""Isolation: a worker process that dies mid-source (a native crash) fails that source alone,
with one line; nothing of it is left behind; every other source of the run is still made.

The kill lands mid-source deterministically: the test holds the whole shared memory budget
(pipeline/budget.py), so a worker that has probed its source waits inside it, with the budget
file open, until the test lets go. Only then is it sent SIGSEGV, as a crashing decoder would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.exceptions import CorruptImage, DecoderCrashed
from imgwarm.manifest import Credits
from imgwarm.pipeline.budget import MemoryBudget
from imgwarm.pipeline.isolate import Isolated
from imgwarm.store import Stores, local_key
from tests.support.files import all_files
from tests.support.images import photo

pytestmark = pytest.mark.slow

BUDGET = 512 << 20


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (from any of its threads)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text()
                      .split()]
        except OSError:
            continue
    return found


def holding(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path)
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def sources(folder: Path) -> list[Path]:
    folder.mkdir()
    made = []
    for i, (width, height) in enumerate([(1800, 1200), (900, 600), (800, 640), (700, 500)]):
        path = folder / f"photo-{i}.jpg"
        path.write_bytes(bytes(photo(width, height, seed=i).jpegsave_buffer(Q=90)))
        made.append(path)
    return made  # the first is the largest: a batch starts with it


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_killed_mid_source_fails_that_source_alone(tmp_path: Path,
                                                             workers: int) -> None:
    files = sources(tmp_path / "in")
    temp = tmp_path / "tmp"
    temp.mkdir()
    budget_file = temp / f"imgwarm-{os.getuid()}" / "memory"
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env |= {"TMPDIR": str(temp), "IMGWARM_MAX_MEMORY": str(BUDGET)}
    budget_file.parent.mkdir(mode=0o700)
    # Every unit: a worker that has probed its source waits inside it for memory.
    with MemoryBudget(BUDGET, path=budget_file).reserve(BUDGET):
        run = subprocess.Popen(
            [str(Path(sys.executable).with_name("imgwarm")), "optimize", "--json",
             "--workers", str(workers), str(tmp_path / "in")],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        victim = None
        while victim is None and time.monotonic() < deadline and run.poll() is None:
            victim = next((c for c in children(run.pid) if holding(c, budget_file)), None)
            time.sleep(0.01)
        assert victim is not None, "no worker reached the memory budget"
        os.kill(victim, signal.SIGSEGV)
        time.sleep(0.2)
    out, err = run.communicate(timeout=120)
    assert run.returncode == 1, err
    results = {Path(r["source"]).name: r for r in map(json.loads, out.splitlines())}
    assert sorted(results) == sorted(f.name for f in files)
    failed = [name for name, r in results.items() if not r["ok"]]
    assert len(failed) == 1
    if workers == 1:
        assert failed == [files[0].name]  # the one it was making
    error = results[failed[0]]["error"]
    assert error == (f"{tmp_path / 'in' / failed[0]}: the decoder crashed on this file "
                     "(signal 11, SIGSEGV)")
    # Nothing of it is left behind; everything else was made.
    settings = Settings().updated(origin_root=tmp_path / "var" / "origin",
                                  manifest_root=tmp_path / "var" / "manifest")
    manifests = Stores.local(settings.store).manifests
    for path in files:
        record = manifests.record(local_key(path))
        slug = path.stem
        written = [p for p in all_files(tmp_path / "var" / "origin") if p.name.startswith(slug)]
        if path.name in failed:
            assert record is None and written == []
        else:
            assert record is not None and len(written) == len(results[path.name]["variants"])
    assert not [p for p in all_files(tmp_path / "var" / "origin") if p.name.startswith(".")]


def test_errors_cross_back_as_they_were_and_a_dead_worker_is_replaced(tmp_path: Path) -> None:
    settings = Settings().image
    good = bytes(photo(600, 400).jpegsave_buffer())
    with Isolated(1) as pixels:
        made = pixels.make(good, "good.jpg", settings, Credits(description="Вело"))
        assert (made.width, made.height) == (600, 400) and made.credits.description == "Вело"
        with pytest.raises(CorruptImage) as refused:
            pixels.make(good[: len(good) // 2], "cut.jpg", settings, Credits())
        assert str(refused.value) == "cut.jpg: truncated JPEG data (Premature end of JPEG file)"
        # Killed while idle (by the OOM killer, say): not the next source's fault.
        (worker,) = pixels.pids()
        os.kill(worker, signal.SIGKILL)
        while not ended(worker):  # dead before the next source comes (else it is its)
            time.sleep(0.01)
        assert pixels.make(good, "next.jpg", settings, Credits()).width == 600
        assert pixels.pids() != [worker]


def ended(pid: int) -> bool:
    """The process can be reaped by its parent (a zombie whose threads are all gone: its
    main thread shows Z before libvips' threads have ended, and waitpid waits for them),
    or is gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return True
    except ProcessLookupError:  # in the middle of exiting
        return False
    return state == "Z" and threads == 1


def _abort(pid: int) -> None:
    os.kill(pid, signal.SIGABRT)
    os.kill(pid, signal.SIGCONT)


def test_a_crash_is_reported_with_its_signal(tmp_path: Path) -> None:
    with Isolated(1) as pixels:
        (worker,) = pixels.pids()
        # The job goes to a stopped worker, which dies of an abort (as glibc's "double free"
        # does) before it answers.
        os.kill(worker, signal.SIGSTOP)
        threading.Timer(0.3, _abort, [worker]).start()
        with pytest.raises(DecoderCrashed) as crashed:
            pixels.make(b"\xff\xd8" * 10, "x.jpg", Settings().image, Credits())
        assert str(crashed.value) == "x.jpg: the decoder crashed on this file (signal 6, SIGABRT)"
