"""One run at a time on a cache server's tiers (warm, or gc's part in them): a lock in the
cache state folder, beside the index it guards."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from imgwarm.exceptions import WarmBusy
from imgwarm.roots import make_private

INDEX = "index.sqlite"  # warm's index, in the cache_state folder


@contextlib.contextmanager
def lock(folder: Path) -> Iterator[int]:
    """Hold the tiers of this cache state folder; yields the lock's descriptor. WarmBusy if
    another run holds them."""
    make_private(folder, "the cache state (cache_state)")  # its index says what is trusted
    path = folder / "lock"
    with path.open("a+") as handle:
        try:  # flock, not lockf: it also keeps out a second run in this very process
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise WarmBusy(f"another `imgwarm warm` (pid {holder}) is running on these tiers "
                           f"(lock {path}); this one did nothing") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield handle.fileno()
