"""Isolation: a worker process that dies mid-source (a native crash) fails that source alone,
with one line; nothing of it is left behind; every other source of the run is still made.

The kill lands mid-source deterministically: the test holds the whole shared memory budget
(pipeline/budget.py), so a worker that has probed its source waits inside it, with the budget
file open, until the test lets go. Only then is it sent SIGSEGV, as a crashing decoder would.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import Settings
from imgwarm.exceptions import CorruptImage, DecoderCrashed, NoWorker
from imgwarm.manifest import Credits
from imgwarm.pipeline.budget import MemoryBudget
from imgwarm.pipeline.isolate import Isolated
from imgwarm.store import Stores, local_key
from tests.support.files import all_files
from tests.support.images import photo
from tests.support.processes import children, ended, holding, sources

pytestmark = pytest.mark.slow

BUDGET = 512 << 20


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
        record = manifests.read(local_key(path))
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


def _abort(pid: int) -> None:
    os.kill(pid, signal.SIGABRT)
    os.kill(pid, signal.SIGCONT)


def test_a_crash_is_reported_with_its_signal(tmp_path: Path) -> None:
    with Isolated(1) as pixels:
        # Ready first: a worker that dies before it is ready is a start that failed, and the
        # job goes to another (test_an_unusable_interpreter_fails_only_the_sources...).
        pixels.make(bytes(photo(64, 48).jpegsave_buffer()), "ready.jpg", Settings().image,
                    Credits())
        (worker,) = pixels.pids()
        # The job goes to a stopped worker, which dies of an abort (as glibc's "double free"
        # does) before it answers.
        os.kill(worker, signal.SIGSTOP)
        threading.Timer(0.3, _abort, [worker]).start()
        with pytest.raises(DecoderCrashed) as crashed:
            pixels.make(b"\xff\xd8" * 10, "x.jpg", Settings().image, Credits())
        assert str(crashed.value) == "x.jpg: the decoder crashed on this file (signal 6, SIGABRT)"


@pytest.mark.parametrize("python", ["/nonexistent/python3", "/bin/false"])
def test_an_unusable_interpreter_fails_only_the_sources_that_need_a_worker(
        monkeypatch: pytest.MonkeyPatch, python: str) -> None:
    """A killed worker whose replacement cannot start (exec fails; or it ends before it is
    ready): the sources that need one fail with one line, none waits, and once workers can
    start again the next source gets one."""
    settings = Settings().image
    good = bytes(photo(200, 150).jpegsave_buffer())
    with Isolated(1) as pixels:
        assert pixels.make(good, "first.jpg", settings, Credits()).width == 200
        (worker,) = pixels.pids()
        os.kill(worker, signal.SIGKILL)
        while not ended(worker):
            time.sleep(0.01)
        monkeypatch.setattr(sys, "executable", python)  # what workers are started with
        for name in ("second.jpg", "third.jpg"):
            with pytest.raises(NoWorker) as refused:
                pixels.make(good, name, settings, Credits())
            assert str(refused.value).startswith(
                f"{name}: no worker process could be started: ")
        why = str(refused.value)
        assert ("No such file or directory" in why if python.startswith("/nonexistent")
                else "it ended as it started (status 1)" in why), why
        monkeypatch.undo()
        assert pixels.make(good, "fourth.jpg", settings, Credits()).width == 200


def lines(run: subprocess.Popen[str], count: int, timeout: float) -> list[dict[str, Any]]:
    """The next ``count`` JSON lines of ``run``'s stdout, or fail after ``timeout`` s."""
    assert run.stdout is not None
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(found) < count:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([run.stdout], [], [], max(0.0, left))
        assert ready, f"no line within {timeout} s; got {found}"
        line = run.stdout.readline()
        assert line, f"stdout ended; got {found}"
        found.append(json.loads(line))
    return found


PIDS = Path("/sys/fs/cgroup/pids")


@pytest.mark.parametrize("limit_pids", [False, True])
def test_a_job_past_its_deadline_is_stopped_and_the_batch_goes_on(tmp_path: Path,
                                                                  limit_pids: bool) -> None:
    """One worker, four sources; the first waits (in the memory budget the test holds) past
    job_timeout: its worker is killed and it fails with one line. With limit_pids, the
    process limit is then at its end (a pids cgroup, as after an OOM kill): the next source
    fails with "no worker process could be started", never waits; the limit lifted, the
    rest are made by a new worker."""
    cgroup = PIDS / f"imgwarm-test-{os.getpid()}-{tmp_path.name}"
    if limit_pids:
        if os.geteuid() != 0 or not os.access(PIDS, os.W_OK):
            pytest.skip("a pids cgroup needs root and cgroup v1's pids controller")
        cgroup.mkdir()
    files = sources(tmp_path / "in")
    temp = tmp_path / "tmp"
    temp.mkdir()
    budget_file = temp / f"imgwarm-{os.getuid()}" / "memory"
    budget_file.parent.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env |= {"TMPDIR": str(temp), "IMGWARM_MAX_MEMORY": str(BUDGET), "IMGWARM_JOB_TIMEOUT": "5"}
    run = None
    try:
        with MemoryBudget(BUDGET, path=budget_file).reserve(BUDGET):
            run = subprocess.Popen(
                [str(Path(sys.executable).with_name("imgwarm")), "optimize", "--json",
                 "--workers", "1", str(tmp_path / "in")],
                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            if limit_pids:
                (cgroup / "cgroup.procs").write_text(str(run.pid))
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and run.poll() is None and not any(
                        holding(c, budget_file) for c in children(run.pid)):
                    time.sleep(0.01)
                (cgroup / "pids.max").write_text("1")  # no new process, no new thread
            (first,) = lines(run, 1, timeout=60)
            assert first == {"source": str(files[0]), "ok": False, "error":
                             f"{files[0]}: took longer than 5s (job_timeout): its process "
                             "was stopped"}
            if limit_pids:
                (second,) = lines(run, 1, timeout=30)
                assert second["source"] == str(files[1]) and not second["ok"]
                assert second["error"] == (f"{files[1]}: no worker process could be started: "
                                           "[Errno 11] Resource temporarily unavailable")
                (cgroup / "pids.max").write_text("max")
        made = lines(run, 3 - limit_pids, timeout=120)
        out, err = run.communicate(timeout=60)
        assert out == "" and run.returncode == 1, err
        assert [r["source"] for r in made] == [str(f) for f in files[1 + limit_pids:]]
        assert all(r["ok"] for r in made), made
        assert "Traceback" not in err
    finally:
        if run is not None and run.poll() is None:
            run.kill()
            run.wait()
        if limit_pids:
            (cgroup / "pids.max").write_text("max")
            while cgroup.exists():  # empty once its processes have ended
                try:
                    cgroup.rmdir()
                except OSError:
                    time.sleep(0.1)


def test_a_crash_is_reported_with_the_last_line_its_process_printed() -> None:
    """What glibc prints as it aborts (``free(): invalid pointer``) goes to the worker's own
    stderr, a file: the crash's line says it, escaped."""
    with Isolated(1) as pixels:
        pixels.make(bytes(photo(64, 48).jpegsave_buffer()), "ready.jpg", Settings().image,
                    Credits())
        (worker,) = pixels.pids()
        with open(f"/proc/{worker}/fd/2", "ab") as stderr:  # as the C library would write
            stderr.write(b"some noise\nfree(): invalid pointer \x1b[2J\n")
        os.kill(worker, signal.SIGSTOP)
        threading.Timer(0.3, _abort, [worker]).start()
        with pytest.raises(DecoderCrashed) as crashed:
            pixels.make(b"\xff\xd8" * 10, "x.jpg", Settings().image, Credits())
        assert str(crashed.value) == ("x.jpg: the decoder crashed on this file (signal 6, "
                                      "SIGABRT); it printed: free(): invalid pointer \\x1b[2J")


def test_while_a_worker_lives_a_slot_that_cannot_start_one_costs_no_source(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers, one killed and not replaceable: its slot is given up, and every source is
    made by the other."""
    settings = Settings().image
    good = bytes(photo(200, 150).jpegsave_buffer())
    with Isolated(2) as pixels:
        first, second = pixels.pids()
        os.kill(first, signal.SIGKILL)
        while not ended(first):
            time.sleep(0.01)
        monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
        for i in range(4):  # one of them takes the dead worker's slot first
            assert pixels.make(good, f"{i}.jpg", settings, Credits()).width == 200
        assert pixels.pids() == [second]
