"""Heartbeat: when `warm --every` last finished a run, and how it went, for health checks.

A small JSON file in the cache state folder, replaced whole after each run (and once at the
start, so that a first fill that takes hours is known to be under way).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from imgwarm.nesting import check_nesting

NAME = "heartbeat.json"


@dataclass(frozen=True)
class Beat:
    started: float  # when the service started (seconds since the epoch)
    every: float  # seconds between runs
    finished: float | None  # when the last run ended (None: the first is under way)
    ok: bool  # the last run did what it planned

    def healthy(self, now: float, grace: float = 60.0) -> tuple[bool, str]:
        """Healthy, and why in words: the last run went well and the next is not overdue."""
        if self.finished is None:
            return True, f"first run under way for {now - self.started:.0f} s"
        ago = now - self.finished
        if not self.ok:
            return False, f"the last run, {ago:.0f} s ago, did not complete (a tier full, a " \
                          "copy or the run failed: see its log)"
        if ago > 2 * self.every + grace:  # a run takes a while too: one missed is late
            return False, f"no run finished for {ago:.0f} s (every {self.every:.0f} s)"
        return True, f"last run ended {ago:.0f} s ago"


def beat(state: Path, started: float, every: float, finished: float | None, ok: bool) -> None:
    """Record a run (or the start, with ``finished`` None), atomically."""
    state.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"started": started, "every": every, "finished": finished, "ok": ok})
    handle, temp = tempfile.mkstemp(prefix=".heartbeat.", dir=state)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(temp, state / NAME)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def last(state: Path) -> Beat | None:
    """The last beat recorded in ``state``, or None when there is none (or it is unreadable)."""
    try:
        text = (state / NAME).read_text()
        check_nesting(text, 2)  # one flat object
        found = json.loads(text)
        return Beat(float(found["started"]), float(found["every"]),
                    None if found["finished"] is None else float(found["finished"]),
                    bool(found["ok"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
