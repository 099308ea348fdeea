"""Every repository path named in the docs, comments and docstrings exists (``mkdocs --strict``
sees links, not backticked paths, and comments are read by nobody's tool).

What counts as a path: a token with a slash that ends in a file suffix of ours, or that starts
with a top-level folder of the repository (``tests/support/``). It is resolved against the
repository root, then the mentioning file's folder and each folder above it, then as the tail
of a tracked path (``steps/check.py`` inside the cache's docs). Not ours, and not checked:
URLs, absolute paths, patterns and templates (``*``, ``{}``, ``<>``), git's
``commit:path``, paths whose first folder is no folder of this repository
(``imagetype/defs.go``, ``httpx/_client.py``), and SOURCES.md files (they name the files of
the projects our test files came from). ``DESIGN.md`` is named nowhere: a user's clone has no
``../shared`` (the invariants are in docs/architecture.md).
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from functools import cache
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUFFIX = r"(?:py|md|toml|ya?ml|sh|conf|j2|html|json|txt|cfg|ini|js|css)"
TOP = r"(?:imgwarm|tests|docs|bench|docker|\.ci)"
TOKEN = re.compile(rf"(?<![\w./:~$@-])((?:\.?[\w-]+/)+[\w.-]+\.{SUFFIX}|{TOP}/[\w./-]*)(?![\w/-])")
# Made by a command, never committed: each named where it is made (docs/hooks.py builds the
# reference pages; a user copies docker/.env.example; npm installs bench's Lighthouse)
MADE = {"docs/cli.md", "docs/settings.md", "docker/.env", "bench/node", "build/site"}
MADE_UNDER = ("bench/results/",)  # benchmarks' outputs (.gitignore)


@cache
def tracked() -> tuple[str, ...]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    return tuple(listed)


@cache
def folders() -> frozenset[str]:
    return frozenset(PurePosixPath(f).parent.parts[i]
                     for f in tracked() for i in range(len(PurePosixPath(f).parent.parts)))


def _scanned() -> list[str]:
    return [f for f in tracked() if (f.endswith((".py", ".md")) or f in (".ci/run", "test.sh")
            or f.startswith("docker/")) and PurePosixPath(f).name != "SOURCES.md"
            and f != "tests/test_paths.py"]  # (this file names wrong paths on purpose)


def _exists(path: str, where: str) -> bool:
    """Whether ``path``, named in the file ``where``, is a tracked file or folder (tracked:
    what a fresh clone has, not what a run left in this checkout), or made by a command."""
    if path in MADE or any(path == d.rstrip("/") or path.startswith(d) for d in MADE_UNDER):
        return True
    files = set(tracked())
    here = PurePosixPath(where).parent
    for base in (PurePosixPath("."), here, *here.parents):
        candidate = posixpath.normpath(str(base / path))
        if candidate in files or any(f.startswith(candidate + "/") for f in files):
            return True
    return any(f.endswith("/" + path) or f.startswith(path.rstrip("/") + "/") for f in files)


def named_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of each repository path ``text`` names."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in TOKEN.finditer(line):
            path = match.group(1).rstrip(".")
            before = line[max(0, match.start(1) - 3):match.start(1)]
            if "//" in before or any(c in path for c in "*{}<>"):
                continue
            first = PurePosixPath(path.rstrip("/")).parts[0]
            if first not in folders() and first != ".ci":
                continue  # another project's path
            found.append((number, path.rstrip("/")))
    return found


def test_every_path_named_in_the_repository_exists() -> None:
    missing = []
    for name in _scanned():
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        missing += [f"{name}:{n}: {p}" for n, p in named_paths(text) if not _exists(p, name)]
        missing += [f"{name}:{n}: DESIGN.md (not in a clone: docs/architecture.md)"
                    for n, line in enumerate(text.splitlines(), 1)
                    if re.search(r"(?<![\w/])DESIGN\.md", line)]
    assert missing == []


def test_a_wrong_path_is_found_and_the_others_are_not() -> None:
    """The rule itself: what it takes for a path of ours, and what it leaves alone."""
    text = "\n".join([
        "see tests/fuzzing.py and `docs/performance.md`",  # moved, and never here
        "see tests/support/hostile_logs.py, cache/index/schema.py and steps/plan.py",
        "https://github.com/x/y/blob/main/tests/nothing.py /etc/nginx/nginx.conf",
        "imgproxy's imagetype/defs.go, httpx/_client.py, c02f84e:imgwarm/cache/index.py",
    ])
    paths = [p for _, p in named_paths(text)]
    assert paths == ["tests/fuzzing.py", "docs/performance.md", "tests/support/hostile_logs.py",
                     "cache/index/schema.py", "steps/plan.py"]
    assert [p for p in paths if not _exists(p, "imgwarm/cache/warm.py")] == [
        "tests/fuzzing.py", "docs/performance.md"]
