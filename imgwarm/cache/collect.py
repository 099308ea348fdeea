"""gc's part in a cache server's tiers: variants no source has named for longer than the grace
period, found in warm's index (never a walk of the tiers), removed under warm's lock.

``warm`` removes such variants at once when ``drop_gone`` is on (the default; requests for
them then fall through to the origin, which keeps them until its own gc); this is for tiers
where it is off, and for any left behind.
"""

from __future__ import annotations

from typing import Any

from imgwarm.cache.index import Index
from imgwarm.cache.lock import INDEX, lock
from imgwarm.cache.steps.evict import evict
from imgwarm.cache.tiers import open_tiers
from imgwarm.config import Settings


def collect_tiers(settings: Settings, *, grace: float, now: float,
                  dry_run: bool = False) -> dict[str, Any] | None:
    """Remove from this server's tiers what no source has named since ``now - grace``;
    per tier, what went. None when this machine has no warm index (no tiers of its own)."""
    state = settings.cache.cache_state
    if not (state / INDEX).exists():
        return None
    with lock(state):
        index = Index(state / INDEX)  # (first: one too new touches no tier)
        tiers = open_tiers(settings)
        try:
            rows = index.unreferenced_before(now - grace, now)
            found: dict[str, Any] = {}
            for tier in tiers:
                held = {p: row.bytes for p, row in rows.items() if row.state(tier.name)}
                evict(index, tier, held, dry_run=dry_run)
                found[tier.name] = {"removed": len(held), "bytes": sum(held.values()),
                                    "paths": sorted(held)}
            if not dry_run:
                index.forget_unreferenced()
        finally:
            index.close(keep=not dry_run)
    return found
