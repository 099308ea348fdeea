"""Peak memory of a real ``imgwarm`` run, as the kernel counted it (tests and bench/)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

# Run by a small interpreter, so that the child's peak starts from that one's size, not from
# the caller's (Linux keeps the peak of the process a child was forked from).
_MEASURE = ("import resource, subprocess, sys; "
            "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode; "
            "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)")


def peak_rss(args: list[str], cwd: Path) -> tuple[int, int]:
    """(exit status, peak RSS in bytes) of ``imgwarm ARGS``."""
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    done = subprocess.run([sys.executable, "-S", "-c", _MEASURE, str(exe), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, check=True, timeout=3600)
    code, peak = done.stdout.split()
    return int(code), int(peak)


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
                todo.extend(int(c) for c in children)
        except OSError:
            continue
    return found


def _anon(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def peak_anon(args: list[str], cwd: Path, interval: float = 0.005) -> tuple[int, int]:
    """(exit status, peak of the anonymous memory of ``imgwarm ARGS`` and all its processes
    together), sampled every ``interval`` seconds: what decodes hold, without the shared
    libraries each worker process maps (the memory budget bounds the sum across processes)."""
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    run = subprocess.Popen([str(exe), *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    peak = 0
    while run.poll() is None:
        peak = max(peak, sum(_anon(p) for p in _tree(run.pid)))
        time.sleep(interval)
    return run.wait(), peak


# The pixel work of a worker process (isolate.serve: one source at a time), in a fresh
# interpreter: its own peak RSS (VmHWM: getrusage's ru_maxrss keeps the peak of the process
# it was forked from), and the estimate its plan reserved.
_MAKE = """
import sys
from imgwarm.config import load_settings
from imgwarm.manifest import Credits
from imgwarm.pipeline import make
from imgwarm.pipeline.probe import probe
from imgwarm.pipeline.vipsutil import configure_libvips

configure_libvips(1)
settings = load_settings().image
data = open(sys.argv[1], "rb").read()
cost = make.plan(sys.argv[1], probe(data, sys.argv[1], settings), settings).cost
make.make(data, sys.argv[1], settings, Credits())
hwm = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(int(hwm[0].split()[1]) * 1024, cost)
"""


def peak_make(source: Path, max_memory: int, threads: int = 0) -> tuple[int, int]:
    """(peak RSS in bytes, estimate) of making ``source`` as a worker process does, alone
    (with ``threads`` libvips threads: else one a core, as a lone worker has)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    env["IMGWARM_MAX_MEMORY"] = str(max_memory)
    if threads:
        env["VIPS_CONCURRENCY"] = str(threads)
    done = subprocess.run([sys.executable, "-c", _MAKE, str(source)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    peak, cost = done.stdout.split()
    return int(peak), int(cost)
