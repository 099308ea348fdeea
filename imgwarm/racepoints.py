"""Race points: named moments in the commands that remove or replace files, where a test makes
another command run in between (``at``), so that each race of the lifecycle is a deterministic
test rather than a hope. With ``IMGWARM_RACE_YIELD`` set (seconds), each point sleeps a random
time up to that long instead: the concurrency test's processes then interleave at exactly
these moments far more often than by chance. Unset, a point costs one dictionary lookup.

The points (name: the moment just after):
    format.absent         a first write found no format record, before it looks whether the
                          manifest store is empty (references.json) and creates the record
    references.empty      that look found the manifest store empty, before references.json
    optimize.claimed      a source's new variants are claimed, before they are written
    optimize.written      its variants are written, before its manifest is
    optimize.published    its manifest is written, before the claims it found made by another
                          run of the same key are made again
    optimize.undoing      a failed make has read its key's record, before it releases the
                          claims it made
    optimize.released     a failed make released the claims it made, before it reads its
                          key's record again
    manifest.written      a record is written, before the journal says so
    delete.tombstoned     the tombstone is written, before any variant is removed
    reclaim.read          a variant's claims were looked up (none) and its bytes read, before
                          it is removed
    gc.records_read       a full pass has read every record, before it lists the claims
    gc.claims_listed      a full pass has listed the claims (of a folder), before it sets them right
    gc.candidates         the candidates are known, before any is removed
    warm.listed           warm --full has listed a tier, before it removes strays
    fill.read             a first warm's reading process has read a folder's records, before
                          it hands them back
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_HOOKS: dict[str, Callable[[], None]] = {}
_LOCK = threading.Lock()


def _yield_seconds() -> float:
    """IMGWARM_RACE_YIELD as seconds within [0, 1] (a test's knob: a value that is no number,
    or is not finite, is none; a longer one is a second, so a point never hangs or raises)."""
    try:
        seconds = float(os.environ.get("IMGWARM_RACE_YIELD", "0"))
    except ValueError:
        return 0.0
    return min(1.0, seconds) if seconds > 0 else 0.0  # (nan > 0 is False)


_YIELD = _yield_seconds()


def reached(name: str) -> None:
    """Mark the point ``name``: run its hook (once: a hook may itself pass points), or yield."""
    if _HOOKS:
        with _LOCK:
            hook = _HOOKS.pop(name, None)
        if hook is not None:
            hook()
            return
    if _YIELD:
        time.sleep(random.uniform(0.0, _YIELD))


@contextmanager
def at(name: str, hook: Callable[[], None]) -> Iterator[None]:
    """Within the block, the first time ``name`` is reached, ``hook`` runs there."""
    with _LOCK:
        _HOOKS[name] = hook
    try:
        yield
    finally:
        with _LOCK:
            _HOOKS.pop(name, None)
