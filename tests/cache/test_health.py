"""`imgwarm health` for the warm service: a real `warm --every` records its runs, and a run
that is overdue or did not complete makes it unhealthy."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from imgwarm.cache.heartbeat import beat, last
from tests.support.cli import Cli
from tests.support.servers import IMGWARM, clean_env, wait_for
from tests.support.sites import Site

pytestmark = pytest.mark.slow


def test_warm_every_is_healthy_while_it_runs(site: Site) -> None:
    env = clean_env(**site.env())
    state = site.settings.cache.cache_state
    run = subprocess.Popen([str(IMGWARM), "warm", "--every", "1s"], env=env, cwd=site.root,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: (found := last(state)) is not None and found.finished is not None,
                 "a warm run to finish", timeout=60)
        done = Cli()("health", "--role", "warm", env=site.env())
        assert done.exit_code == 0 and done.stdout.startswith("warm: healthy: last run ended")
    finally:
        run.send_signal(signal.SIGINT)
        run.communicate(timeout=30)
    beat_ = last(state)
    assert beat_ is not None and beat_.ok and beat_.every == 1.0


def test_an_overdue_or_failed_run_is_unhealthy(site: Site) -> None:
    state, now = site.settings.cache.cache_state, time.time()
    cases = [(now - 100, 300.0, now - 60, True, True),  # a run a minute ago, every 5 min
             (now - 100, None, None, True, True),  # the first run under way
             (now - 4000, 300.0, now - 3000, True, False),  # overdue
             (now - 100, 300.0, now - 60, False, False)]  # the last run failed
    for started, every, finished, ok, healthy in cases:
        beat(state, started, every or 300.0, finished, ok)
        done = Cli()("health", "--role", "warm", env=site.env())
        assert done.exit_code == (0 if healthy else 1), (every, finished, ok, done.stdout)
        assert ("UNHEALTHY" in done.stdout) != healthy
    (state / "heartbeat.json").unlink()
    done = Cli()("health", "--role", "warm", env=site.env())
    assert done.exit_code == 1 and "no run recorded" in done.stdout
