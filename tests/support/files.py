"""Where the repository is, and what a folder holds."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def all_files(root: Path) -> list[Path]:
    """Every file under root (none when root does not exist)."""
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
