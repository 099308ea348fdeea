"""Which files in a tier warm may trust: those its index recorded writing there, still the very
files it wrote (cache/identity.py), and whole (the size the index says, bytes that hash to
the name). Only those are removed unasked, or read to copy on (docs/architecture.md, I3)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import PurePosixPath

from imgwarm.cache.identity import unchanged
from imgwarm.cache.run import Run
from imgwarm.cache.tiers import Tier
from imgwarm.store.layout import hash_of_name


def still_ours(run: Run, tier: Tier, paths: Iterable[str]) -> set[str]:
    """Of files the index says a tier holds, those still the very files warm wrote there
    (a copy is read from them): any other is copied from the origin, and replaced."""
    return unchanged(tier, run.index.known_identities(tier.name, paths))


def ours(run: Run, tier: Tier, paths: Iterable[str]) -> set[str]:
    """Of ``paths`` in a tier, those of a variant's shape that this index recorded writing
    there, still the very files it wrote: the only ones it may remove unasked."""
    return still_ours(run, tier, (p for p in paths if run.stores.layout.holds(p)))


def whole(tier: Tier, name: str, size: int) -> bool:
    """The file is the size the index says and its bytes hash to its name."""
    if tier.size_of(name) != size:
        return False
    data = tier.read(name)
    digest = hash_of_name(PurePosixPath(name).name)
    return data is not None and hashlib.sha256(data).hexdigest().startswith(digest)
