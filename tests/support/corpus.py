"""The corpus as test cases: where it is (tests/corpus/, or IMGWARM_CORPUS), which files are
meant to be refused, and one real ``imgwarm optimize --json`` run over the whole folder that
several test modules compare with.

Expectations come from the files themselves, through independent readers: SOURCES.md (when
the folder has one) and Pillow say which files are bad. No file name is hard-coded.
A corpus that is missing or empty is a failure, never a skip: a loop over no files would pass.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image

from tests.support.files import REPO

CORPUS = REPO / "tests" / "corpus"
NOTES = "SOURCES.md"


def corpus_dir() -> Path:
    """The corpus folder: tests/corpus/ in the repository, or IMGWARM_CORPUS when set (e.g.
    a held-out set of files of the same kinds)."""
    return Path(os.environ.get("IMGWARM_CORPUS") or CORPUS)


def corpus_files(pattern: str = "*") -> list[Path]:
    """The corpus files whose names match ``pattern``, sorted; fails when there are none, so
    that a loop over them cannot pass by doing nothing."""
    folder = corpus_dir()
    found = sorted(p for p in folder.glob(pattern) if p.is_file() and p.name != NOTES)
    assert found, f"no corpus file matches {pattern!r} in {folder} (tests/corpus or IMGWARM_CORPUS)"
    return found


def listed_as_bad(folder: Path) -> dict[str, bool]:
    """File name -> "is it meant to be refused", from the table in SOURCES.md."""
    notes = folder / NOTES
    if not notes.is_file():
        return {}
    verdicts: dict[str, str] = {}
    for line in notes.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\|\s*`([^`]+)`\s*\|", line)
        if match:
            # The first table (Files) says what each file tests; later tables reuse the names.
            verdicts.setdefault(match.group(1), line.rstrip(" |").rsplit("|", 1)[-1].strip())
    return {name: text.startswith("BAD") for name, text in verdicts.items()}


def pillow_says_bad(path: Path) -> bool:
    data = path.read_bytes()
    is_png = data.startswith(b"\x89PNG")
    if not (data.startswith(b"\xff\xd8") or is_png) or (is_png and path.suffix.lower() != ".png"):
        return True
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.width * image.height > 100_000_000:
                return True
            image.load()
    except Exception:
        return True
    return False


@dataclass(frozen=True)
class Case:
    path: Path
    bad: bool

    def __str__(self) -> str:
        return self.path.name


def cases() -> list[Case]:
    listed = listed_as_bad(corpus_dir())
    files = corpus_files()
    # Meant to be refused when SOURCES.md says BAD or when Pillow cannot read it either.
    return [Case(p, listed.get(p.name, False) or pillow_says_bad(p)) for p in files]


CASES = cases()
GOOD = [c for c in CASES if not c.bad]
BAD = [c for c in CASES if c.bad]


@dataclass
class Run:
    workdir: Path
    exit_code: int
    results: dict[str, dict[str, Any]]
    stderr: str

    @property
    def origin(self) -> Path:
        return self.workdir / "var" / "origin"


def imgwarm(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("imgwarm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("IMGWARM_")}
    return subprocess.run([str(exe), *args], cwd=workdir, capture_output=True, text=True,
                          env=env, check=False, timeout=600)


def run_corpus(corpus: Path, workdir: Path) -> Run:
    """One real ``imgwarm optimize --json`` over the whole corpus folder."""
    done = imgwarm(workdir, "optimize", "--json", str(corpus))
    results = {Path(o["source"]).name: o for o in map(json.loads, done.stdout.splitlines())}
    return Run(workdir, done.returncode, results, done.stderr)


