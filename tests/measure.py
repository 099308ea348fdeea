"""Peak memory of a real ``imgwarm`` run, as the kernel counted it (tests and bench/)."""

from __future__ import annotations

import os
import subprocess
import sys
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
