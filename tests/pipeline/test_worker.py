"""A worker process's stdout and stderr are its own, and it ends with its caller (issue 38,
items 3 and 10).

libultrahdr prints XML parse errors, with text from the file, to fd 1: a hostile Ultra HDR
JPEG (a DOCTYPE in its gain map's XMP) must leave ``optimize --json`` and ``fsck --repair
--json`` JSON, and what it printed becomes the source's warning, escaped. A caller killed
mid-batch (``timeout``, ``docker stop``) leaves no worker behind and no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from imgwarm.pipeline.budget import MemoryBudget
from tests.support.files import all_files
from tests.support.images import photo
from tests.support.printing import hostile_ultra_hdr
from tests.support.processes import children, ended, holding, sources

pytestmark = pytest.mark.slow

IMGWARM = str(Path(sys.executable).with_name("imgwarm"))


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([IMGWARM, *args], cwd=tmp_path, env=clean_env(),
                          capture_output=True, timeout=300, check=False)


def test_what_a_native_library_prints_stays_out_of_json_and_becomes_a_warning(
        tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "hostile.jpg").write_bytes(hostile_ultra_hdr())
    (folder / "plain.jpg").write_bytes(bytes(photo(400, 300).jpegsave_buffer()))
    made = run(tmp_path, "optimize", "--json", "--workers", "1", str(folder))
    assert made.returncode == 0, made.stderr
    assert b"\x1b" not in made.stdout + made.stderr  # never a raw escape on a terminal
    lines = made.stdout.decode().splitlines()
    results = {Path(r["source"]).name: r for r in map(json.loads, lines)}  # JSON, each line
    assert len(lines) == 2 and all(r["ok"] for r in results.values())
    printed = [w for w in results["hostile.jpg"]["warnings"]
               if w.startswith("a library printed while reading it: ")]
    assert len(printed) == 1 and "<!DOCTYPE x" in printed[0] and "\\x1B[31mEVIL" in printed[0]
    assert len(printed[0]) < 400 and "\n" not in printed[0]
    assert not [w for w in results["plain.jpg"].get("warnings", [])
                if w.startswith("a library printed")]

    # fsck --repair makes it again (a variant lost): its output is one JSON object.
    (victim,) = [p for p in all_files(tmp_path / "var" / "origin")
                 if p.name.startswith("hostile.") and p.suffix == ".jpg"][:1]
    victim.unlink()
    repaired = run(tmp_path, "fsck", "--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    assert b"\x1b" not in repaired.stdout + repaired.stderr
    report = json.loads(repaired.stdout)
    assert victim.exists() and report["missing"]["count"] == 1, report


BUDGET = 512 << 20


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_workers_end_with_their_caller_quietly(tmp_path: Path, how: signal.Signals) -> None:
    """The caller is killed while a worker is mid-source (waiting in the memory budget the
    test holds, as in test_isolate.py): every worker ends at once, and none prints a
    traceback when it finds no one to answer."""
    sources(tmp_path / "in")
    temp = tmp_path / "tmp"
    temp.mkdir()
    budget_file = temp / f"imgwarm-{os.getuid()}" / "memory"
    budget_file.parent.mkdir(mode=0o700)
    env = clean_env() | {"TMPDIR": str(temp), "IMGWARM_MAX_MEMORY": str(BUDGET)}
    with MemoryBudget(BUDGET, path=budget_file).reserve(BUDGET):
        caller = subprocess.Popen(
            [IMGWARM, "optimize", "--workers", "2", str(tmp_path / "in")], cwd=tmp_path,
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and caller.poll() is None and not any(
                holding(w, budget_file) for w in workers):
            workers = children(caller.pid)
            time.sleep(0.01)
        assert any(holding(w, budget_file) for w in workers), "no worker reached the budget"
        caller.send_signal(how)
        assert caller.wait(timeout=10) == -how
        gone = time.monotonic() + 5
        while time.monotonic() < gone and not all(ended(w) for w in workers):
            time.sleep(0.05)
        left = [w for w in workers if not ended(w)]
    # (the budget let go: a worker still there would now finish its source and answer)
    try:
        _, err = caller.communicate(timeout=60)  # ends when no worker holds the pipe
    finally:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert b"Traceback" not in err and b"Error" not in err, err.decode(errors="replace")
    assert left == [], "workers outlived their caller"
