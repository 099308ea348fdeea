"""`imgwarm watch` as the tests drive it: a real process on a folder, its JSON lines, the
records it leaves, and a worker held mid-file by the memory budget."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

from PIL import Image

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.store import Stores, local_key
from tests.support.corpus import corpus_files
from tests.support.processes import children, holding
from tests.support.servers import IMGWARM, clean_env, wait_for

BUDGET = 512 << 20


def corpus(name: str) -> Path:
    """The corpus file of this name (a failure when it is missing)."""
    return corpus_files(name)[0]


class Watching:
    """A real ``imgwarm watch`` process on ``folder``, its output in files."""

    def __init__(self, folder: Path, settings: Settings, *args: str, as_json: bool = True,
                 env: dict[str, str] | None = None) -> None:
        self.folder, self.settings = folder, settings
        work = settings.store.origin_root.parent
        self.out, self.err = work / "watch.out", work / "watch.err"
        self.skip = (len(self.out.read_bytes()) if self.out.exists() else 0,
                     len(self.err.read_bytes()) if self.err.exists() else 0)
        env = clean_env(**{"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
                           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root),
                           "IMGWARM_WORKERS": "1", **(env or {})})
        with self.out.open("ab") as out, self.err.open("ab") as err:
            self.process = subprocess.Popen(
                [str(IMGWARM), "watch", *(["--json"] if as_json else []), *args, str(folder)],
                stdout=out, stderr=err, env=env, cwd=work)
        self.sentinels = 0
        if "--once" not in args:
            wait_for(self._ready, "the watcher to start", timeout=60)

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"watch exited with {self.process.returncode}: {self.stderr()}")
        return "watching " in self.stderr()

    def stdout(self) -> str:
        return self.out.read_bytes()[self.skip[0]:].decode()

    def stderr(self) -> str:
        return self.err.read_bytes()[self.skip[1]:].decode(errors="replace")

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout().splitlines()]

    def of(self, path: Path, event: str) -> list[dict[str, Any]]:
        key = local_key(path)
        return [e for e in self.events() if e["event"] == event
                and (e.get("source") == str(path) or e.get("key") == key)]

    def wait(self, path: Path, event: str, count: int = 1) -> None:
        wait_for(lambda: len(self.of(path, event)) >= count,
                 f"{event} of {path.name} (stdout: {self.stdout()}, stderr: {self.stderr()})",
                 timeout=60)

    def settled(self) -> None:
        """Every event before now acted on: a new file, made after them (one worker, in the
        order their quiet time ends)."""
        self.sentinels += 1
        path = self.folder / f"sentinel-{self.sentinels}.jpg"
        shutil.copy(corpus("01.jpg"), path)
        self.wait(path, "made")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(60) == 0, self.stderr()


def record(settings: Settings, path: Path) -> Any:
    return Stores.local(settings.store).manifests.read(local_key(path))


def check_made(settings: Settings, path: Path, data: bytes) -> Manifest:
    """The file's manifest is of these bytes, and its variants decode at their sizes."""
    manifest = record(settings, path)
    assert isinstance(manifest, Manifest), manifest
    assert manifest.source_sha256 == hashlib.sha256(data).hexdigest()
    assert manifest.variants
    for variant in manifest.variants:
        with Image.open(settings.store.origin_root / variant.path) as image:
            assert image.size == (variant.width, variant.height)
    return manifest


def budget(settings: Settings) -> tuple[Path, dict[str, str]]:
    """The memory budget's file and the environment that makes a watcher use it: while the
    test holds the whole budget, a worker that probed its file waits inside it, budget file
    open (as in tests/pipeline/test_isolate.py): mid-file, deterministically."""
    temp = settings.store.origin_root.parent / "tmp"
    budget_file = temp / f"imgwarm-{os.getuid()}" / "memory"
    budget_file.parent.mkdir(mode=0o700, parents=True)
    return budget_file, {"TMPDIR": str(temp), "IMGWARM_MAX_MEMORY": str(BUDGET)}


def in_hand(watcher: Watching, budget_file: Path) -> int:
    """The worker process that holds a file, waiting for memory."""
    found: int = wait_for(lambda: next((c for c in children(watcher.process.pid)
                                        if holding(c, budget_file)), None),
                          "a worker waiting for memory", timeout=60)
    return found
