"""SIGKILL at random moments (issue 22): the real CLI (optimize, delete, gc --full, warm --full)
runs as a process group on a local origin and is killed, children and all, after a seeded
random delay; the invariants are checked on the real files (tests/support/invariants.py), then
the command runs again to the end and must leave them whole and the work done, as a run that
was never killed does.

The delay is drawn between the interpreter's start-up and nine tenths of a whole run of that
command, both measured first: the kills land in the work (a run that ends first on a less
busy machine is counted apart). The scenes are tests/support/scenes.py's, restored before
each kill.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import Settings
from tests.support.invariants import check, real_stores, snapshot, verdict
from tests.support.scenes import (
    Scene,
    base_scene,
    batch,
    cli_env,
    deleted,
    differences,
    gc_scene,
    made_manifests,
    optimize_scene,
    tiers_held,
    variants_left,
    warm_scene,
)
from tests.support.servers import IMGWARM

pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]
KILLS = 10  # a command
SEED = 22


@dataclass
class Killed:
    """A command to kill: its arguments (given the scene), environment, what a whole run
    leaves, and whether it may remove what no manifest names (gc --grace 0)."""

    arguments: Callable[[Scene], list[str]]
    outcome: Callable[[Scene, Settings], Any]
    extra: dict[str, str]
    grace_passed: bool = False


def optimize_arguments(scene: Scene) -> list[str]:
    return ["optimize", *map(str, batch(scene)), scene.keys["second"]]


def optimize_outcome(scene: Scene, settings: Settings) -> Any:
    keys = [str(p.resolve()) for p in batch(scene)]
    return made_manifests([*keys, "second"])(scene, settings)


KILLED: dict[str, tuple[Callable[[Scene], None], Killed]] = {
    # two identical uploads and a source made again with other widths, in one batch
    "optimize": (optimize_scene, Killed(optimize_arguments, optimize_outcome,
                                        {"IMGWARM_WIDTHS": "480,960"})),
    "delete": (lambda scene: None, Killed(lambda s: ["delete", s.keys["first"]], deleted, {})),
    "gc-full": (gc_scene, Killed(lambda s: ["gc", "--full", "--grace", "0"], variants_left,
                                 {}, grace_passed=True)),
    "warm-full": (warm_scene, Killed(lambda s: ["warm", "--full"], tiers_held, {})),
}


def run(arguments: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(IMGWARM), *arguments], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


def start_up(env: dict[str, str], cwd: Path) -> float:
    """Seconds from exec to a command's first work, about: the interpreter and the CLI."""
    started = time.monotonic()
    run(["--help"], env, cwd)
    return time.monotonic() - started


@pytest.mark.parametrize("name", list(KILLED))
def test_sigkill_at_random_moments(name: str, request: pytest.FixtureRequest,
                                   settings: Settings, on_tmpfs: Path, ram: Path) -> None:
    build, command = KILLED[name]
    scene = base_scene("local", request, settings, on_tmpfs, ram)
    build(scene)
    scene.save()
    cwd = on_tmpfs

    settings = scene.fresh()
    env = cli_env(settings, **command.extra)
    arguments = command.arguments(scene)
    before = snapshot(real_stores(settings), scene.tiers, scene.planted)
    started = time.monotonic()
    whole = run(arguments, env, cwd)
    duration = time.monotonic() - started
    assert whole.returncode == 0, whole.stderr
    expected = command.outcome(scene, settings)
    assert not check(real_stores(settings), before, grace_passed=command.grace_passed)
    early = start_up(env, cwd)

    rnd = random.Random(f"{SEED}-{name}")
    problems: list[str] = []
    killed = 0
    for number in range(KILLS):
        settings = scene.fresh()
        # after the start-up and before the end of a whole run: in the work (a kill in the
        # start-up tests nothing; one after the end is no kill)
        delay = rnd.uniform(early, early + 0.9 * max(duration - early, 0.05))
        process = subprocess.Popen([str(IMGWARM), *arguments], env=env, cwd=cwd,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   start_new_session=True)  # its own group: children too
        try:
            process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            killed += 1
        where = f"{name} kill {number} at {delay:.2f} s"
        found = [f"after the kill: {p}" for p in
                 check(real_stores(settings), before, grace_passed=command.grace_passed)]
        again = run(arguments, env, cwd)
        if again.returncode != 0:
            found.append(f"the run again failed ({again.returncode}): {again.stderr[-500:]}")
        found += [f"after the run again: {p}" for p in
                  check(real_stores(settings), before, grace_passed=command.grace_passed)]
        found += [f"not completed: {d}" for d in
                  differences(command.outcome(scene, settings), expected)]
        problems += [f"{where}: {p}" for p in found]
    print(f"\n{name}: {killed} of {KILLS} runs killed (whole run {duration:.2f} s, start-up "
          f"{early:.2f} s)")
    assert not problems, verdict(problems, f"kills-{name}")
    assert killed > 0, "no kill landed before the end of the run"
