"""Commands at the same time (issue 22): optimize (a source made again with other widths, and
a new upload that is a twin of a live source), delete (a live source, at times the very twin's
original), gc (usual or full, with the default grace or none) and warm (usual or full) run as
parallel processes of the real CLI on one local origin, in rounds, for a bounded time. Each
round starts them together and waits for all; then I1-I3 are checked at rest against the
snapshot taken before the round (tests/support/invariants.py), and warm's index against its
tiers.

Every process runs with IMGWARM_RACE_YIELD, so it sleeps a random moment at each race point
of imgwarm/racepoints.py: the interleavings the races of issue 22 need happen far more often
than by chance. gc --grace 0 may remove variants no manifest names (a source made again in the
same round drops its old ones): in those rounds I2 only holds it to what a manifest names.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from tests.lifecycle.test_faults import base_scene, make, photo_file, warm_scene
from tests.lifecycle.test_kills import cli_env
from tests.support.invariants import check, real_stores, records, snapshot, tiers_match_index
from tests.support.servers import IMGWARM
from tests.support.tmpfs import mounted_tmpfs

pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]
SECONDS = 25.0  # rounds start until this much time has passed
YIELD = "0.05"  # IMGWARM_RACE_YIELD: seconds, at most, a process sleeps at a race point
SEED = 22
WIDTHS = ("320,640,1280", "480,960", "320,640")
BUSY = "another `imgwarm warm`"  # gc's part in the tiers, or warm, found the other holding them


@pytest.fixture
def on_tmpfs(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "scene", "256m") as root:
        yield root


def live(settings: Settings) -> list[str]:
    return sorted(k for k, r in records(real_stores(settings)).items()
                  if isinstance(r, Manifest))


def test_optimize_delete_gc_and_warm_at_once(request: pytest.FixtureRequest,
                                             settings: Settings, on_tmpfs: Path,
                                             ram: Path) -> None:
    scene = base_scene("local", request, settings, on_tmpfs, ram)
    warm_scene(scene)  # tiers filled, a source deleted, one added, foreign files planted
    site = scene.site
    make(site, photo_file(site, "photo-3.jpg", seed=3))
    settings = site.settings
    rnd = random.Random(SEED)
    started = time.monotonic()
    problems: list[str] = []
    rounds = launched = 0
    modes: list[str] = []
    while time.monotonic() - started < SECONDS or rounds < 3:
        sources = live(settings)
        remake = rnd.choice(sources)
        original = rnd.choice(sources)
        upload = site.sources / "up" / f"r{rounds}" / Path(original).name
        upload.parent.mkdir(parents=True)
        shutil.copyfile(original, upload)  # a twin: the same bytes under the same name
        doomed = rnd.choice([k for k in sources if k != remake] or sources)
        gc_full, gc_now, warm_full = rnd.random() < 0.5, rnd.random() < 0.5, rnd.random() < 0.5
        commands = {
            "optimize-remake": (["optimize", remake], {"IMGWARM_WIDTHS": rnd.choice(WIDTHS)}),
            "optimize-upload": (["optimize", str(upload)], {}),
            "delete": (["delete", doomed], {}),
            "gc": (["gc", *["--full"] * gc_full, *["--grace", "0"] * gc_now], {}),
            "warm": (["warm", *["--full"] * warm_full], {}),
        }
        modes.append(f"gc{' --full' * gc_full}{' --grace 0' * gc_now}, "
                     f"warm{' --full' * warm_full}")
        before = snapshot(real_stores(settings), scene.tiers, scene.planted)
        running = {
            name: subprocess.Popen(
                [str(IMGWARM), *arguments],
                env=cli_env(settings, IMGWARM_RACE_YIELD=YIELD, **extra), cwd=on_tmpfs,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name, (arguments, extra) in commands.items()}
        launched += len(running)
        where = f"round {rounds} ({modes[-1]}; remade {Path(remake).name}, deleted " \
                f"{Path(doomed).relative_to(site.sources)}, uploaded a twin of " \
                f"{Path(original).relative_to(site.sources)})"
        for name, process in running.items():
            _, err = process.communicate(timeout=180)
            busy = name in ("gc", "warm") and BUSY in err
            if process.returncode != 0 and not busy:
                problems.append(f"{where}: {name} exited {process.returncode}: {err[-400:]}")
        found = check(real_stores(settings), before, grace_passed=gc_now)
        found += tiers_match_index(settings)
        problems += [f"{where}: {p}" for p in found]
        rounds += 1
    print(f"\n{rounds} rounds, {launched} processes in {time.monotonic() - started:.1f} s: "
          + "; ".join(modes))
    assert not problems, "\n".join(problems[:30]) + f"\n({len(problems)} in all)"
