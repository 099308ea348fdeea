"""The previous release of imgwarm (a fixed commit of this repository's history) installed into
an environment of its own, outside the repository, so that the tests run it beside this one.

Built once and kept (keyed by the commit and Python's version) under
``$XDG_CACHE_HOME/imgwarm-tests/`` (default ``~/.cache/imgwarm-tests/``): ``git archive`` of the
commit, a venv with that imgwarm installed from it, not editable and without its
dependencies; those come from the running test venv through a ``.pth`` file naming its
site-packages (a plain path line: the ``.pth`` files in that folder, among them the editable
finder of this checkout's imgwarm, are not run, so the old package is the one imported; every
use checks it). The commit must be in the repository's history (CI clones it whole); a
clone without it skips, and fails on CI, with the reason.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.files import REPO
from tests.support.parts import missing

COMMIT = "c02f84e"  # main at the end of issue 39: the last state that wrote store format 1
VERSION = "0.2.0"  # its pyproject version
DEPS = "_imgwarm_test_dependencies.pth"  # in the old venv: the test venv's site-packages
DONE = "built"  # written last: a folder without it is a build that was interrupted


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "imgwarm-tests"


@dataclass(frozen=True)
class Released:
    """An installed earlier imgwarm: its interpreter and its ``imgwarm`` command."""

    root: Path
    commit: str
    version: str

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def imgwarm(self) -> Path:
        return self.venv / "bin" / "imgwarm"

    def env(self, base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
        """``base`` (default: this process's environment) without what would make the old
        interpreter import this checkout instead (PYTHONPATH, PYTHONHOME), with ``extra``."""
        env = dict(os.environ if base is None else base)
        for name in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"):
            env.pop(name, None)
        return {**env, **extra}

    def command(self, *args: str | Path) -> list[str]:
        """``imgwarm ARGS...`` of this version, for subprocess (``worker`` included)."""
        return [str(self.imgwarm), *map(str, args)]

    def run(self, *args: str | Path, env: dict[str, str] | None = None,
            cwd: Path | None = None, timeout: float = 180.0
            ) -> subprocess.CompletedProcess[str]:
        """Run ``imgwarm ARGS...`` of this version to its end (its output kept)."""
        return subprocess.run(self.command(*args), env=self.env(env), cwd=cwd or self.root,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def identity(self) -> tuple[Path, str]:
        """Where the old interpreter imports imgwarm from, and the version its metadata says
        (run from the cache folder, PYTHONPATH removed: as the tests run it)."""
        done = subprocess.run(
            [str(self.python), "-c", "import imgwarm, importlib.metadata as m; "
             "print(imgwarm.__file__); print(m.version('imgwarm'))"],
            env=self.env(), cwd=self.root, capture_output=True, text=True, timeout=60,
            check=False)
        if done.returncode != 0:
            raise AssertionError(f"the imgwarm of {self.commit} does not import: "
                                 f"{done.stderr.strip()[-400:]}")
        where, version = done.stdout.split()
        return Path(where), version

    def check(self) -> None:
        """The old package, not this checkout's, is what the old interpreter imports."""
        where, version = self.identity()
        if self.venv not in where.parents or version != self.version:
            raise AssertionError(f"the venv of {self.commit} imports imgwarm {version} from "
                                 f"{where}, not {self.version} from {self.venv}")


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, check=False,
                          timeout=120)


def _dependencies() -> list[str]:
    """The running test venv's site-packages (where this imgwarm's dependencies are)."""
    return [p for p in site.getsitepackages() if Path(p).is_dir()]


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if len(found) != 1:
        raise AssertionError(f"{venv}: no single site-packages folder ({found})")
    return found[0]


def _build(root: Path, commit: str) -> None:
    """The archive of ``commit`` unpacked, a venv made, that imgwarm installed into it."""
    shutil.rmtree(root, ignore_errors=True)
    source = root / "source"
    source.mkdir(parents=True)
    archive = _git("archive", "--format=tar", commit)
    if archive.returncode != 0:
        raise AssertionError(f"git archive {commit}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True,
                   timeout=120)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=120)
    # pip of the test venv installs into the old one (--python); not editable, and no
    # dependency fetched: they are the test venv's (the .pth written next)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", "--disable-pip-version-check", "--no-deps", str(source)],
        capture_output=True, text=True, timeout=600, check=False,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_USER")})
    if done.returncode != 0:
        raise AssertionError(f"pip install of imgwarm {commit} failed: "
                             f"{(done.stderr or done.stdout).strip()[-800:]}")
    shutil.rmtree(source)  # installed; the archive is not needed again


def released(commit: str = COMMIT, version: str = VERSION) -> Released:
    """The imgwarm of ``commit``, installed (built at the first call, then reused), checked
    to be the one its interpreter imports; skipped (failed on CI) when the repository's
    history does not hold the commit."""
    if shutil.which("git") is None:
        missing("git (Debian package git), to archive the previous release")
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        missing(f"commit {commit} (the previous release) in {REPO}'s history (a shallow "
                "clone? `git fetch --unshallow` brings it)")
    python = f"py{sys.version_info.major}.{sys.version_info.minor}"
    root = cache_root() / f"released-{commit}-{python}"
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time (parallel test runs)
        if not (root / DONE).exists():
            _build(root, commit)
            (root / DONE).write_text(f"{commit}\n")
        # every time: the test venv may have moved, or be another one
        (_site_packages(root / "venv") / DEPS).write_text("\n".join(_dependencies()) + "\n")
    found = Released(root, commit, version)
    found.check()
    return found

