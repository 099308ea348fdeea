"""Fault injection (issue 22): each store call of optimize, delete, gc and warm fails in turn,
on the local origin and on S3 over real HTTP (moto's server, and SeaweedFS's for a subset:
SEAWEEDFS_COMMANDS); after each, the invariants are
checked on the real files (tests/support/invariants.py), then the command runs again without
faults and must leave the invariants whole and the work done, as a clean run does it.

The commands, each on a scene of its own (two sources and a twin of the first that shares
some of its variants, the references built, plus): optimize of two identical uploads at once
(``optimize-batch``), of a source again with other widths (``-remake``), of a source by key
whose original is gone (``-gone``: a redelivered job); delete of the twin's original, on a
store with its references and on one without (``delete-unbuilt``); gc usual and full, with
grace 0 and with the default grace, over variants unnamed every way (a source made again, a
delete stopped after its tombstone, a file no manifest or claim knows); warm and warm --full
after a first warm, a source deleted and one added, with files warm never placed in both
tiers (a dot file, another name, a variant-shaped copy of another state folder).

A scene is built once per test and restored for every fault (local roots copied back, the
tiers hard-linked so that warm's record of the very files it wrote still holds; on moto the
bucket copied inside its backend, which runs in this process; on SeaweedFS by server-side
copies). The pixel work is made
once and remembered (``Remembered``): it touches no store, and decoding for each of several
hundred runs would only cost time.

Each call that removes or replaces (write, delete, prune, journal append, tier write and
delete) is also failed after it was made (a response lost after S3 applied the request).

How many: with ``IMGWARM_FAULTS=all``, every call fails in turn on the local origin; on S3,
where each call is a request to moto (tens of milliseconds each, and a gc or warm makes
hundreds), every call that removes or replaces, and a seeded sample of ``S3_SAMPLE`` of the
others (reads, listings, look-ups). By default (CI: the file within about three minutes),
``LOCAL_BUDGET`` and ``S3_BUDGET`` runs a command, chosen by a seed from the test's name: one
call of each kind, then more of those that remove or replace, then of the others. The
faults injected per command and store are written to ``SUMMARY_FILE`` and printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from imgwarm.config import Settings
from imgwarm.exceptions import StorageError, UnreadableSource
from imgwarm.lifecycle.delete import delete
from imgwarm.lifecycle.gc import gc
from imgwarm.pipeline.optimize import optimize_file
from tests.support.faults import (
    Faults,
    Target,
    armed,
    faulty_stores,
    install,
    plan,
    shared_clients,
)
from tests.support.invariants import (
    check,
    real_stores,
    snapshot,
    verdict,
)
from tests.support.s3 import S3_SERVERS, on_s3
from tests.support.scenes import (
    GONE,
    PIXELS,
    Scene,
    base_scene,
    batch,
    deleted,
    differences,
    gc_scene,
    gone_scene,
    made_manifests,
    optimize_scene,
    remade,
    tiers_held,
    unbuilt_scene,
    variants_left,
    warm_scene,
)

pytestmark = pytest.mark.usefixtures("ram")
EVERY = os.environ.get("IMGWARM_FAULTS") == "all"
S3_SAMPLE = 25  # with EVERY: calls failed on S3 besides every one that removes or replaces
LOCAL_BUDGET, S3_BUDGET = 20, 5  # by default: fault runs a command
RACE_YIELD = 0.02  # seconds, at most, the batch's threads sleep at a race point
SUMMARY: dict[str, dict[str, Any]] = {}
SUMMARY_FILE = Path(f"/tmp/imgwarm-22-faults{'-all' if EVERY else ''}.json")


@pytest.fixture(scope="module", autouse=True)
def summary(request: pytest.FixtureRequest) -> Iterator[None]:
    """The faults injected, per command and store: written to SUMMARY_FILE and printed."""
    yield
    if not SUMMARY:
        return
    SUMMARY_FILE.write_text(json.dumps(SUMMARY, indent=1, sort_keys=True))
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    lines = [f"{name}: {row['injected']} faults injected ({row['after']} after the call) in "
             f"a run of {row['calls']} calls ({row['mode']}), {row['violations']} violations, "
             f"{row['seconds']:.1f} s"
             for name, row in sorted(SUMMARY.items())]
    total = sum(row["injected"] for row in SUMMARY.values())
    lines.append(f"total: {total} faults injected ({SUMMARY_FILE})")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print("\n" + "\n".join(lines))


# --- scenes -----------------------------------------------------------------------------------


# --- commands ---------------------------------------------------------------------------------


@dataclass
class Command:
    """A command, how to run it under the harness, and what a completed run leaves."""

    name: str
    run: Callable[[Scene, Settings, Faults], None]
    outcome: Callable[[Scene, Settings], Any]  # what a clean run leaves, to compare with
    grace_passed: bool = False  # it may remove what no manifest names (gc --grace 0)
    refused: tuple[type[Exception], ...] = ()  # what a clean run raises too


def attempt(command: Command, scene: Scene, settings: Settings, faults: Faults,
            *, faulted: bool) -> str | None:
    """Run the command; None when it ended as expected (a StorageError is, under a fault),
    else what is wrong."""
    try:
        command.run(scene, settings, faults)
    except command.refused:
        return None
    except StorageError as error:
        return None if faulted else f"failed: {error!r}"
    except Exception as error:  # not a storage error: the command broke
        return f"unexpected {error!r}"
    return None


def optimize_batch(scene: Scene, settings: Settings, faults: Faults) -> None:
    """Two identical uploads in one batch, each in a thread of its own as ``run_batch`` does,
    each succeeding or failing on its own. The race points yield a moment (as with
    IMGWARM_RACE_YIELD), so that one upload's cleanup after a fault often meets the other's
    claims on the same files."""
    from imgwarm import racepoints

    stores = faulty_stores(real_stores(settings), faults)

    def one(path: Path) -> StorageError | None:
        try:
            optimize_file(path, settings=settings, stores=stores, pixels=PIXELS)
        except StorageError as error:
            return error
        return None

    was, racepoints._YIELD = racepoints._YIELD, RACE_YIELD
    try:
        with ThreadPoolExecutor(2) as pool:
            failed = [e for e in pool.map(one, batch(scene)) if e is not None]
    finally:
        racepoints._YIELD = was
    if failed:
        raise failed[0]


def optimize_remake(scene: Scene, settings: Settings, faults: Faults) -> None:
    stores = faulty_stores(real_stores(settings), faults)
    optimize_file(Path(scene.keys["second"]), settings=remade(settings), stores=stores,
                  pixels=PIXELS)


def delete_first(scene: Scene, settings: Settings, faults: Faults) -> None:
    delete(scene.keys["first"], faulty_stores(real_stores(settings), faults))


def collecting(grace: float | None, full: bool) -> Callable[[Scene, Settings, Faults], None]:
    def run(scene: Scene, settings: Settings, faults: Faults) -> None:
        gc(settings, grace=grace, full=full)
    return run


def warming(full: bool) -> Callable[[Scene, Settings, Faults], None]:
    def run(scene: Scene, settings: Settings, faults: Faults) -> None:
        from imgwarm.cache.warm import warm

        warm(settings, full=full)
    return run


# --- the scene of each command ------------------------------------------------------------------


def optimize_gone(scene: Scene, settings: Settings, faults: Faults) -> None:
    from imgwarm.pipeline.optimize import optimize_key

    optimize_key(GONE, settings=settings, stores=faulty_stores(real_stores(settings), faults),
                 pixels=PIXELS)


COMMANDS: dict[str, tuple[Callable[[Scene], None], Command]] = {
    "optimize-batch": (optimize_scene, Command(
        "optimize-batch", optimize_batch, lambda s, st: made_manifests(
            [str(p.resolve()) for p in batch(s)])(s, st))),
    "optimize-remake": (lambda scene: None, Command(
        "optimize-remake", optimize_remake, made_manifests(["second"]))),
    "optimize-gone": (gone_scene, Command(
        "optimize-gone", optimize_gone, made_manifests([GONE]), refused=(UnreadableSource,))),
    "delete": (lambda scene: None, Command("delete", delete_first, deleted)),
    "delete-unbuilt": (unbuilt_scene, Command("delete-unbuilt", delete_first, deleted)),
    "gc-grace0": (gc_scene, Command("gc-grace0", collecting(0.0, False), variants_left,
                                    grace_passed=True)),
    "gc-full-grace0": (gc_scene, Command("gc-full-grace0", collecting(0.0, True),
                                         variants_left, grace_passed=True)),
    "gc-default": (gc_scene, Command("gc-default", collecting(None, False), variants_left)),
    "gc-full-default": (gc_scene, Command("gc-full-default", collecting(None, True),
                                          variants_left)),
    "warm": (warm_scene, Command("warm", warming(False), tiers_held)),
    "warm-full": (warm_scene, Command("warm-full", warming(True), tiers_held)),
}


def targets(origin: str, counts: dict[str, int], label: str) -> list[Target]:
    local = origin == "local"
    if EVERY:
        return plan(counts, after=True) if local else plan(counts, sample=S3_SAMPLE, after=True)
    return plan(counts, budget=LOCAL_BUDGET if local else S3_BUDGET, after=True,
                seed=zlib.crc32(label.encode()))


def exercise(scene: Scene, command: Command, faults: Faults, origin: str,
             label: str) -> list[str]:
    """The clean run (counting the calls), then one run a fault (see the module)."""
    started = time.monotonic()
    settings = scene.fresh()
    before = snapshot(real_stores(settings), scene.tiers, scene.planted)
    faults.reset()
    wrong = attempt(command, scene, settings, faults, faulted=False)
    assert wrong is None, f"{label}: a clean run {wrong}"
    counts = faults.counts()
    expected = command.outcome(scene, settings)
    clean = check(real_stores(settings), before, grace_passed=command.grace_passed)
    assert not clean, f"{label}: a clean run breaks the invariants: {clean}"
    assert counts, f"{label}: the harness counted no store call (is it still installed?)"
    chosen = targets(origin, counts, label)
    problems: list[str] = []
    injected = 0
    for kind, number, late in chosen:
        settings = scene.fresh()
        with armed(faults, number, {kind}, after=late):
            wrong = attempt(command, scene, settings, faults, faulted=True)
        if wrong is not None:
            problems.append(f"{label} {kind}#{number}{'/after' * late}: {wrong}")
        fired = faults.fired
        injected += fired is not None
        where = f"{label} {kind}#{number}{'/after' * late} ({fired or 'not reached'})"
        found = [f"after the fault: {p}" for p in
                 check(real_stores(settings), before, grace_passed=command.grace_passed)]
        faults.reset()
        wrong = attempt(command, scene, settings, faults, faulted=False)
        if wrong is not None:
            found.append(f"the run again {wrong}")
        found += [f"after the run again: {p}" for p in
                  check(real_stores(settings), before, grace_passed=command.grace_passed)]
        found += [f"not completed: {d}" for d in differences(
            command.outcome(scene, settings), expected)]
        problems += [f"{where}: {p}" for p in found]
    scene.drop_buckets()
    # most chosen calls are reached (the batch's two threads make the numbering vary a little)
    assert injected >= max(1, len(chosen) // 2), f"{label}: {injected} of {len(chosen)} fired"
    calls = sum(counts.values())
    mode = ("every call" if origin == "local" else
            f"every call that removes or replaces, {S3_SAMPLE} others sampled") if EVERY \
        else f"{len(chosen)} of the calls, seeded"
    SUMMARY[label] = {"calls": calls, "by_kind": counts, "runs": len(chosen),
                      "after": sum(1 for t in chosen if t[2]), "injected": injected,
                      "mode": mode + ("; those that remove or replace also after the call"),
                      "violations": len(problems), "seconds": time.monotonic() - started}
    return problems


# On SeaweedFS (a real object store, beside moto's model of S3) the commands whose calls
# differ in kind, not all eleven: two concurrent creates of the same names (the conditional
# PUT), a delete (removals, the journal), a full gc with no grace (every shard's and claim's
# listing, removals, put-backs) and warm --full (listings, reads into both tiers). The other
# seven make the same calls in other orders; moto runs them all. Each SeaweedFS case costs
# about 9 s (every restore is a bucket of server-side copies), all eleven would add 100 s.
SEAWEEDFS_COMMANDS = ["optimize-batch", "delete", "gc-full-grace0", "warm-full"]
CASES = [pytest.param(origin, name, id=f"{origin}-{name}",
                      marks=[pytest.mark.integration] if on_s3(origin) else [])
         for origin in ["local", *S3_SERVERS] for name in COMMANDS
         if origin != "seaweedfs" or name in SEAWEEDFS_COMMANDS]


@pytest.mark.slow
@pytest.mark.parametrize(("origin", "name"), CASES)
def test_every_call_failing_in_turn(origin: str, name: str, request: pytest.FixtureRequest,
                                    settings: Settings, on_tmpfs: Path, ram: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    build, command = COMMANDS[name]
    shared_clients(monkeypatch)
    scene = base_scene(origin, request, settings, on_tmpfs, ram)
    build(scene)
    scene.save()
    faults = Faults()
    install(monkeypatch, faults)
    problems = exercise(scene, command, faults, origin, f"{name}/{origin}")
    assert not problems, verdict(problems, f"faults-{name}-{origin}")
