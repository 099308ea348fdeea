"""Placeable paths: which requested URL paths of a public access log can count as a variant's
hotness. Paths are checked and normalised as they are read, a few thousand at a time (never
kept when unsafe, not of a variant's shape, or of a variant the index does not know), so what
a log costs in memory follows what can be placed, not how many distinct paths the public
sends (logs.Hits.bound)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes

from imgwarm.cache.index import known_in
from imgwarm.exceptions import LayoutError
from imgwarm.store import safe_relative
from imgwarm.store.layout import Layout

NOT_VARIANT = b""  # a safe path that is no variant's (a page, /favicon.ico): not kept


def key_bytes(key: str) -> bytes:
    """A variant key as a log reader keeps it; the one place keys go from text to bytes (a
    name's odd bytes, kept as surrogates, come back as they were)."""
    return key.encode("utf-8", "surrogateescape")


def key_text(key: bytes) -> str:
    """A variant key as the index keeps it; the one place keys go from bytes to text."""
    return key.decode("utf-8", "surrogateescape")

# A plain URL path: segments of unreserved characters, none empty or starting with a dot
# (so no '.', '..' or hidden name), no percent-escapes: its key is itself, with no more checks.
_PLAIN_PATH = re.compile(rb"(?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*+)++")


def url_key(path: bytes, prefix: str) -> str | None:
    """The variant key a requested URL path stands for; None for a path that is unsafe
    (``..``, odd bytes, hidden names) or outside the image prefix: it is never followed."""
    if _PLAIN_PATH.fullmatch(path) and path.startswith(prefix.encode()):
        plain = path[len(prefix):].decode("ascii")
        return plain or None
    try:
        text = unquote_to_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.startswith(prefix):
        return None
    try:
        key = safe_relative(text[len(prefix):])
    except LayoutError:
        return None
    return None if any(p.startswith(".") for p in key.parts) else str(key)


@dataclass(frozen=True)
class Placeable:
    """The check a log reader applies to each requested path (in any process: it forks)."""

    prefix: str
    layout: Layout
    index: str | None = None  # warm's index file: the variants that can be placed
    # in the process that made it, the index's own connection (it sees this run's rows;
    # a forked parser reads what the index file holds, committed)
    lookup: Callable[[list[str]], Collection[str]] | None = field(default=None, compare=False)
    owner: int = field(default_factory=os.getpid, compare=False)

    def __reduce__(self) -> tuple[Any, ...]:  # to a worker: without the connection
        return (Placeable, (self.prefix, self.layout, self.index))

    def key(self, path: bytes) -> bytes | None:
        """The variant key of a requested path (UTF-8), ``NOT_VARIANT`` for a safe path that
        is not a variant's, None for an unsafe one."""
        key = url_key(path, self.prefix)
        if key is None:
            return None
        return key_bytes(key) if _shape(self.layout).fullmatch(key) else NOT_VARIANT

    def spelled(self, key: bytes) -> bytes:
        """The plain URL path of a variant key (as a browser sends it: nothing to escape)."""
        return self.prefix.encode() + key

    def known(self, keys: list[bytes]) -> set[bytes]:
        """Of these keys, those of variants the index knows (all of them without an index)."""
        texts = [key_text(k) for k in keys]
        if self.lookup is not None and os.getpid() == self.owner:
            return {key_bytes(k) for k in self.lookup(texts)}
        if self.index is None:
            return set(keys)  # nothing to ask: every path of a variant's shape stays
        return {key_bytes(k) for k in known_in(self.index, texts)}


@functools.cache
def _shape(layout: Layout) -> re.Pattern[str]:
    """A variant's shape, by pattern (Layout.holds, which also derives the folders from the
    hash, costs 20 times more; the index says the rest): the shard folders, then a name
    ``{slug}.{hash}.{ext}`` or ``{hash}.{ext}``, the hash 16 hex digits or more."""
    width = -(-layout.bits // 4)
    return re.compile(rf"(?:[0-9a-f]{{{width}}}/){{{layout.levels}}}"
                      r"(?:[^/]*\.)?[0-9a-f]{16,}\.[^/.]*")
