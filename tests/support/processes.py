"""Worker processes as tests see them: which a process started, what they hold, whether
they have ended; and the sources that keep them busy."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.images import photo


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (from any of its threads)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text()
                      .split()]
        except OSError:
            continue
    return found


def holding(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path)
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def sources(folder: Path) -> list[Path]:
    folder.mkdir()
    made = []
    for i, (width, height) in enumerate([(1800, 1200), (900, 600), (800, 640), (700, 500)]):
        path = folder / f"photo-{i}.jpg"
        path.write_bytes(bytes(photo(width, height, seed=i).jpegsave_buffer(Q=90)))
        made.append(path)
    return made  # the first is the largest: a batch starts with it


def ended(pid: int) -> bool:
    """The process can be reaped by its parent (a zombie whose threads are all gone: its
    main thread shows Z before libvips' threads have ended, and waitpid waits for them),
    or is gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return True
    except ProcessLookupError:  # in the middle of exiting
        return False
    return state == "Z" and threads == 1
