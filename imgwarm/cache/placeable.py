"""Placeable paths: which requested URL paths of a public access log can count as a variant's
hotness. Paths are checked and normalised as they are read, a few thousand at a time (never
kept when unsafe, not of a variant's shape, or of a variant the index does not know), so what
a log costs in memory follows what can be placed, not how many distinct paths the public
sends (logs.Hits.bound)."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from imgwarm.cache.index import IndexReader
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
    """What a log reader may count, as plain data that every process uses alike: a snapshot
    of the variants warm can place. That is the index file as committed, plus the variants
    this run added and has not committed (only a dry run has any: it commits nothing), kept
    as text keys. Without an index, every path of a variant's shape counts."""

    prefix: str
    layout: Layout
    index: str | None = None  # warm's index file
    uncommitted: frozenset[str] = frozenset()

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

    @contextlib.contextmanager
    def checking(self) -> Iterator[Check]:
        """The check in this process (the one that calls: a forked parser opens its own)."""
        check = Check(self)
        try:
            yield check
        finally:
            check.close()


class Check:
    """A ``Placeable`` asked in one process, through that process's own read-only connection
    to the index file (opened at the first question: a run with no new line opens none)."""

    def __init__(self, placeable: Placeable) -> None:
        self.placeable = placeable
        self.reader: IndexReader | None = None

    def known(self, keys: list[bytes]) -> set[bytes]:
        """Of these keys, those of variants the snapshot holds (all of them without an
        index)."""
        index = self.placeable.index
        if index is None:
            return set(keys)  # nothing to ask: every path of a variant's shape stays
        if self.reader is None:
            self.reader = IndexReader(index)
        texts = [key_text(k) for k in keys]
        found = self.reader.known(texts)
        found.update(t for t in texts if t in self.placeable.uncommitted)
        return {key_bytes(k) for k in found}

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()


def checking(placeable: Placeable | None) -> contextlib.AbstractContextManager[Check | None]:
    """``placeable.checking()``, or no check at all (a reader that trusts its logs)."""
    return contextlib.nullcontext() if placeable is None else placeable.checking()


@functools.cache
def _shape(layout: Layout) -> re.Pattern[str]:
    """A variant's shape, by pattern (Layout.holds, which also derives the folders from the
    hash, costs 20 times more; the index says the rest): the shard folders, then a name
    ``{slug}.{hash}.{ext}`` or ``{hash}.{ext}``, the hash 16 hex digits or more."""
    width = -(-layout.bits // 4)
    return re.compile(rf"(?:[0-9a-f]{{{width}}}/){{{layout.levels}}}"
                      r"(?:[^/]*\.)?[0-9a-f]{16,}\.[^/.]*")
