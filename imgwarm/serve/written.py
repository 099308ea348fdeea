"""Files the serving half writes (configs, pages): whole or not at all, as nginx may read or
reload them at any moment."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_all(files: dict[Path, str]) -> None:
    """Several files, each whole, and none replaced unless every one was written (all temp
    files first, then the renames, which do not fail on a folder that took the temps)."""
    temps: list[tuple[str, Path]] = []
    try:
        for path, text in files.items():
            temps.append((_temporary(path, text), path))
    except BaseException:
        for temp, _ in temps:
            Path(temp).unlink(missing_ok=True)
        raise
    for temp, path in temps:
        os.replace(temp, path)


def _temporary(path: Path, text: str) -> str:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temp, 0o644)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return temp


def write_whole(path: Path, text: str) -> None:
    """``text`` at ``path``, by a temp file in the same folder renamed over it (0644)."""
    write_all({path: text})
