"""The race points' knob, IMGWARM_RACE_YIELD, as a process reads it at start: a value that is
no number, not finite or huge never makes a point raise or hang."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = "from imgwarm import racepoints as r; r.reached('manifest.written'); print(r._YIELD)"


@pytest.mark.parametrize(("given", "seconds"), [
    ("0.05", 0.05), ("inf", 1.0), ("1e400", 1.0), ("1e9", 1.0), ("nan", 0.0), ("-3", 0.0),
    ("junk", 0.0), ("", 0.0),
])
def test_the_yield_is_within_a_second_whatever_is_given(given: str, seconds: float) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], env={"IMGWARM_RACE_YIELD": given},
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == seconds  # the most a point sleeps
