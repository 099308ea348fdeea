"""Where the repository is, and what a folder holds."""

from __future__ import annotations

from pathlib import Path

from imgwarm.store.format import FORMAT_RECORD

REPO = Path(__file__).resolve().parents[2]


def all_files(root: Path) -> list[Path]:
    """Every file under root (none when root does not exist), but an origin's format record
    (``imgwarm-format.json`` at the root: the store's, no source's;
    tests/versions/test_store_format.py looks at it)."""
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*")
                  if p.is_file() and p != root / FORMAT_RECORD)
