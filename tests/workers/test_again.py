"""A queued job whose worker was killed between writing the manifest and announcing it in the
journal (found by test_queue's kill test on S3): the job is handed out again, finds the
manifest current and has nothing to make, and must still announce it, or ``warm``, which
follows the journal, never hears of the source. Made deterministic with the race point."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from imgwarm.config import Settings
from imgwarm.manifest import Credits
from imgwarm.store import Stores
from imgwarm.workers.task import run_job
from tests.support.files import REPO
from tests.support.servers import clean_env

KEY = "up/ad-7/bike.jpg"
KILLED = """
import os, signal, sys
from imgwarm import racepoints
from imgwarm.config import load_settings
from imgwarm.pipeline.optimize import optimize_key
from imgwarm.store import Stores

settings = load_settings()
with racepoints.at("manifest.written", lambda: os.kill(os.getpid(), signal.SIGKILL)):
    optimize_key(sys.argv[1], settings=settings, stores=Stores.for_settings(settings.store))
"""


def announced(stores: Stores) -> list[str]:
    assert stores.manifests.changes is not None
    return [key for _, key in stores.manifests.changes.since("").entries]


def test_a_job_handed_out_again_announces_a_manifest_its_killed_attempt_wrote(
        settings: Settings, tmp_path: Path) -> None:
    stores = Stores.local(settings.store)
    stores.origin.write(KEY, (REPO / "tests" / "corpus" / "xmp_test.jpg").read_bytes())
    env = clean_env(IMGWARM_ORIGIN_ROOT=str(settings.store.origin_root),
                    IMGWARM_MANIFEST_ROOT=str(settings.store.manifest_root),
                    IMGWARM_WIDTHS="320,640")
    settings = settings.updated(widths="320,640")
    killed = subprocess.run([sys.executable, "-c", KILLED, KEY], env=env, cwd=tmp_path,
                            capture_output=True, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert stores.manifests.get(KEY) is not None and announced(stores) == []

    plain = run_job(KEY, settings, Credits())  # a first start: nothing to say again
    assert plain["reused"] is True and announced(stores) == []
    again = run_job(KEY, settings, Credits(), again=True)  # its worker died before
    assert again["reused"] is True and announced(stores) == [KEY]
