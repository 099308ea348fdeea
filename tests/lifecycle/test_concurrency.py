"""Commands at the same time (issue 22): optimize (a source made again with other widths, and
new uploads that are twins of a live source, mostly of the one being deleted), delete (a
live source), gc (usual or full, with the default grace or none) and warm (usual or full) run as
parallel processes of the real CLI on one local origin, in a fixed number of rounds. Each
round starts them together and waits for all; then I1-I4 are checked at rest against the
snapshot taken before the round (tests/support/invariants.py), and warm's index against its
tiers.

Every process runs with IMGWARM_RACE_YIELD, so it sleeps a random moment at each race point
of imgwarm/racepoints.py: the interleavings the races of issue 22 need happen far more often
than by chance; and each starts after a seeded delay of its own, so that which command is at
its critical moment when another is at its own changes from round to round.

gc --grace 0 may remove variants no manifest names (a source made again in the same round
drops its old ones): in those rounds I2 only holds it to what a manifest names.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from tests.support.invariants import (
    check,
    real_stores,
    records,
    snapshot,
    tiers_match_index,
    verdict,
)
from tests.support.scenes import base_scene, cli_env, make, photo_file, warm_scene
from tests.support.servers import IMGWARM

pytestmark = [pytest.mark.usefixtures("ram"), pytest.mark.slow]
# rounds, each seeded (IMGWARM_RACE_ROUNDS: a longer soak; a round takes seconds)
ROUNDS = int(os.environ.get("IMGWARM_RACE_ROUNDS", "3"))
YIELD = "0.05"  # IMGWARM_RACE_YIELD: seconds, at most, a process sleeps at a race point
SLOW_YIELD = "0.4"  # the delete's, racing the uploads of its twins
AFTER = 0.6  # seconds: the delete is aimed to end this long after the uploads
TWINS = 1  # uploads of the same photo in a round (the first claim is the one that races)
STAGGER = 1.5  # seconds: each process of a round starts within this long of the first
SEED = 22
WIDTHS = ("320,640,1280", "480,960", "320,640")
BUSY = "another `imgwarm warm`"  # gc's part in the tiers, or warm, found the other holding them


def ends_apart(sources: Path, settings: Settings, cwd: Path) -> float:
    """How much longer a round's upload runs than a delete (seconds): twins of a source made
    and one deleted, each timed."""
    uploads = [sources / "timing" / f"{n}" / "photo-3.jpg" for n in range(TWINS)]
    for upload in uploads:
        upload.parent.mkdir(parents=True)
        shutil.copyfile(sources / "photo-3.jpg", upload)
    took = {}
    for command in (["optimize", *map(str, uploads)], ["delete", str(uploads[0])]):
        started = time.monotonic()
        subprocess.run([str(IMGWARM), *command], env=cli_env(settings), cwd=cwd, check=True,
                       capture_output=True, timeout=120)
        took[command[0]] = time.monotonic() - started
    return took["optimize"] - took["delete"]


def wait_all(running: dict[str, subprocess.Popen[bytes]], timeout: float = 180.0
             ) -> dict[str, float]:
    """Wait for every process; when each ended (monotonic seconds)."""
    ended: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(ended) < len(running):
        for name, process in running.items():
            if name not in ended and process.poll() is not None:
                ended[name] = time.monotonic()
        if time.monotonic() > deadline:
            for process in running.values():
                process.kill()
            raise AssertionError(f"still running after {timeout:g} s: "
                                 f"{sorted(set(running) - set(ended))}")
        time.sleep(0.01)
    return ended


def live(settings: Settings) -> list[str]:
    return sorted(k for k, r in records(real_stores(settings)).items()
                  if isinstance(r, Manifest))


def test_optimize_delete_gc_and_warm_at_once(request: pytest.FixtureRequest,
                                             settings: Settings, on_tmpfs: Path,
                                             ram: Path) -> None:
    # the default layout: a variant's claims are entries of one folder, and twins pile up
    scene = base_scene("local", request, settings, on_tmpfs, ram, entries=255)
    warm_scene(scene)  # tiers filled, a source deleted, one added, foreign files planted
    site = scene.site
    make(site, photo_file(site, "photo-3.jpg", seed=3))
    settings = site.settings
    lag = ends_apart(site.sources, settings, on_tmpfs)
    rnd = random.Random(SEED)
    started = time.monotonic()
    problems: list[str] = []
    seen: set[str] = set()  # violations reported already (a lost file stays lost)
    rounds = launched = 0
    modes: list[str] = []
    while rounds < ROUNDS:
        # A photo of its own, made now: the source deleted in this round is mostly the only
        # one naming its files (a twin still live would keep them all from going), and the
        # uploads are its twins (the same bytes under the same name): their claims race the
        # delete's removals of the files they share.
        solo = make(site, photo_file(site, f"solo/s{rounds}.jpg", seed=100 + rounds))
        sources = live(settings)
        remake = rnd.choice([k for k in sources if k != solo.key])
        doomed = solo.key if rnd.random() < 0.75 else \
            rnd.choice([k for k in sources if k != remake])
        original = solo.key if rnd.random() < 0.75 else rnd.choice(sources)
        uploads = [site.sources / "up" / f"r{rounds}" / f"{n}" / Path(original).name
                   for n in range(TWINS)]  # each writes or finds the files at its own moment
        for upload in uploads:
            upload.parent.mkdir(parents=True)
            shutil.copyfile(original, upload)
        gc_full, gc_now, warm_full = rnd.random() < 0.5, rnd.random() < 0.5, rnd.random() < 0.5
        commands = {
            "optimize-remake": (["optimize", remake], {"IMGWARM_WIDTHS": rnd.choice(WIDTHS)}),
            "optimize-upload": (["optimize", *map(str, uploads)], {}),
            # lingers at its race points (between the last look at a file's claims and its
            # removal): the uploads' claims land in that window often, not once in a hundred
            "delete": (["delete", doomed], {"IMGWARM_RACE_YIELD": SLOW_YIELD}),
            "gc": (["gc", *["--full"] * gc_full, *["--grace", "0"] * gc_now], {}),
            "warm": (["warm", *["--full"] * warm_full], {}),
        }
        modes.append(f"gc{' --full' * gc_full}{' --grace 0' * gc_now}, "
                     f"warm{' --full' * warm_full}")
        before = snapshot(real_stores(settings), scene.tiers, scene.planted)
        # each starts after its own seeded delay: the same start-up for all would line up
        # their critical moments the same way every round (the deletes before the uploads
        # are made). The delete is started so as to end just after the upload: both remove
        # or write the files they share at their ends.
        delays = {name: rnd.uniform(0.0, STAGGER) for name in commands}
        delays["delete"] = max(0.0, delays["optimize-upload"] + lag + rnd.uniform(-0.4, 0.4))
        offsets = sorted((delay, name) for name, delay in delays.items())
        running: dict[str, subprocess.Popen[bytes]] = {}
        logs = on_tmpfs / "logs" / f"r{rounds}"
        logs.mkdir(parents=True)
        begun = time.monotonic()
        for offset, name in offsets:
            time.sleep(max(0.0, begun + offset - time.monotonic()))
            arguments, extra = commands[name]
            with (logs / name).open("w") as log:  # a file, not a pipe: never full
                running[name] = subprocess.Popen(
                    [str(IMGWARM), *arguments],
                    env=cli_env(settings, **{"IMGWARM_RACE_YIELD": YIELD, **extra}),
                    cwd=on_tmpfs,
                    stdout=subprocess.DEVNULL, stderr=log)
        launched += len(running)
        where = f"round {rounds} ({modes[-1]}; remade {Path(remake).name}, deleted " \
                f"{Path(doomed).relative_to(site.sources)}, uploaded {TWINS} twin(s) of " \
                f"{Path(original).relative_to(site.sources)})"
        ended = wait_all(running)
        # the next round's delete starts so as to end a moment after the upload (its last
        # removals then straddle the upload's claims), as this round went
        lag += 0.7 * (ended["optimize-upload"] + AFTER - ended["delete"])
        for name, process in running.items():
            err = (logs / name).read_text(errors="replace")
            busy = name in ("gc", "warm") and BUSY in err
            if process.returncode != 0 and not busy:
                problems.append(f"{where}: {name} exited {process.returncode}: {err[-400:]}")
        found = check(real_stores(settings), before, grace_passed=gc_now)
        found += tiers_match_index(settings)
        problems += [f"{where}: {p}" for p in found if p not in seen]  # new ones only
        seen.update(found)
        rounds += 1
    print(f"\n{rounds} rounds, {launched} processes in {time.monotonic() - started:.1f} s "
          f"(a delete started {lag:.2f} s after the upload, at the end): "
          + "; ".join(modes))
    assert not problems, verdict(problems, "concurrency")
