"""Layout: where a hashed file lives under a root, and keeping every path inside its root.

Files are sharded by their hash: ``levels`` folders, each named by the next ``bits`` bits of
the hash in hex, where ``2**bits`` is the largest power of two within the folder entry limit.
With the defaults (255 entries: 7 bits, 3 levels) there are 2,097,152 leaf folders, so 16
million files average under 8 a folder; the store also refuses to overfill a folder.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from imgwarm.exceptions import LayoutError
from imgwarm.formats import OUTPUTS

# A variant's file name (pipeline/naming.py writes it): what gc, delete and warm may remove.
VARIANT_NAME = re.compile(
    rf"(?:[a-z0-9-]+\.)?[0-9a-f]{{16,64}}\.(?:{'|'.join(f.extension for f in OUTPUTS.values())})")

# Control and format characters (C0, C1, bidi overrides, line separators), bytes that were not
# UTF-8 (surrogates) and backslashes: none belongs in a key, and they could hide or rewrite
# what a terminal or log shows.
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def _bad_char(text: str) -> bool:
    if text.isascii():  # the usual key: only C0 controls, DEL and backslashes to look for
        return not text.isprintable() or "\\" in text
    return "\\" in text or any(unicodedata.category(c) in _BAD_CATEGORIES for c in text)


@dataclass(frozen=True)
class Layout:
    max_entries: int = 255
    levels: int = 3

    @property
    def bits(self) -> int:
        """Bits of hash a level: the most whose folders leave a root room for a file of its
        own beside them (a tier's identity, the journal): 7 for 255 entries."""
        return (self.max_entries - 1).bit_length() - 1

    @property
    def leaves(self) -> int:
        return int(2 ** (self.bits * self.levels))

    def folder_for(self, hex_hash: str) -> PurePosixPath:
        """The shard folder of a hash, e.g. ``1f/54/2a``."""
        total = self.bits * self.levels
        digits = -(-total // 4)
        if len(hex_hash) < digits:
            raise LayoutError(f"hash {hex_hash!r} is too short for {self.levels} shard levels")
        value = int(hex_hash[:digits], 16) >> (digits * 4 - total)
        width = -(-self.bits // 4)
        mask = (1 << self.bits) - 1
        parts = [
            f"{(value >> (self.bits * (self.levels - 1 - i))) & mask:0{width}x}"
            for i in range(self.levels)
        ]
        return PurePosixPath(*parts)

    def tops(self) -> list[str]:
        """The first level's folder names (``00`` to ``7f`` with the defaults)."""
        width = -(-self.bits // 4)
        return [f"{i:0{width}x}" for i in range(1 << self.bits)]

    def holds(self, path: str | PurePosixPath) -> bool:
        """Whether ``path`` is a variant's, exactly as imgwarm names one: the shard folders
        its hash puts it in, then ``{slug}.{hash}.{ext}`` or ``{hash}.{ext}`` (slug
        ``a-z0-9-``, hash 16-64 hex digits, ext one of ours). An original's key never is
        (``check_source_key`` refuses a looser shape), and what is not is never removed."""
        found = PurePosixPath(path)
        if len(found.parts) != self.levels + 1 or not VARIANT_NAME.fullmatch(found.name):
            return False
        try:
            return self.path_for_name(found.name) == found
        except LayoutError:
            return False

    def path_for(self, name: str, hex_hash: str) -> PurePosixPath:
        return self.folder_for(hex_hash) / name

    def path_for_name(self, name: str) -> PurePosixPath:
        """The path of a content-addressed file, ``{slug}.{hash}.{ext}``: by its own hash."""
        return self.path_for(name, hash_of_name(name))


def hash_of_name(name: str) -> str:
    """The hex hash a file name claims (``{slug}.{hash}.{ext}`` or ``{hash}.{ext}``)."""
    parts = name.split(".")
    if len(parts) < 2:
        raise LayoutError(f"{name!r} is not a content-addressed name")
    return parts[-2]


def safe_relative(key: str | PurePosixPath) -> PurePosixPath:
    """A key as a relative path that cannot leave its root: no absolute paths, no ``..``,
    no empty or dot segments, no control characters or backslashes."""
    text = str(key)
    if not text or _bad_char(text):
        raise LayoutError(f"refusing key {text!r}: empty or contains control characters")
    path = PurePosixPath(text)
    if path.is_absolute() or text.startswith("/"):
        raise LayoutError(f"refusing key {text!r}: absolute paths are not allowed")
    if any(part in ("..", ".", "") for part in text.split("/")):
        raise LayoutError(f"refusing key {text!r}: '..', '.' and empty segments are not allowed")
    return path


def join_under(root: Path, key: str | PurePosixPath) -> Path:
    """``root / key``, guaranteed to be inside root."""
    target = root / safe_relative(key)
    resolved_root = os.path.realpath(root)
    # A symlink pointing out, or a loop (realpath, unlike Path.resolve, does not raise on one).
    if os.path.commonpath([resolved_root, os.path.realpath(target)]) != resolved_root:
        raise LayoutError(f"refusing key {str(key)!r}: it resolves outside {root}")
    return target
