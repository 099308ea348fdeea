"""Reclaim: remove a variant from the origin unless a source names it.

A source claims a variant (references.py) before it looks whether the file is there: one that
finds it there does not write it again. So a variant is read before it is removed, and the
claims are looked at again after: a claim that came meanwhile gets its file back. The bytes
read are one variant's (tens of KB), and only for a variant that is going.
"""

from __future__ import annotations

from imgwarm.store.base import Store
from imgwarm.store.references import References


def reclaim(origin: Store, references: References, path: str) -> int | None:
    """Remove the variant at ``path``; the bytes freed (0: it was not there), or None when a
    source names it (then it stays, or is put back)."""
    if references.holders(path):
        return None
    data = origin.read(path)
    if data is None:
        return 0
    origin.delete(path)
    if references.holders(path):  # claimed meanwhile: its source may have counted on it
        origin.write(path, data)  # (kept if that source wrote it again itself)
        return None
    return len(data)
