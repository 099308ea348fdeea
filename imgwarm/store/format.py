"""The store's format version: a small record at the origin's root (``imgwarm-format.json``)
and the gate every command passes before it reads, acts on or writes to a store.

A store without the record is format 1: what imgwarm 0.2.0 wrote, which knew no record. The
record is written when this code first writes to a store (created only where none is: never
replaced, so never downgraded), and holds::

    {"format": 1, "readable_by": 1, "written_by": "imgwarm 0.3.0"}

``format`` covers everything imgwarm keeps in the store: where variants live, manifests and
tombstones, the change journal, the claim markers. A writer or remover (optimize, the worker,
delete, gc, fsck --repair, warm, listen, watch) needs to know the whole format: one older than
the store refuses with ``FormatTooNew``. ``readable_by`` is the oldest format a reader must
know to read the store without misreading it (SQLite's read and write version bytes): a
reading command (picture, status, inspect, fsck without repair) goes on while it knows that
one. A record without it is read as ``readable_by == format``: never guess.

The record is read once a ``FormatGate`` is first asked and kept for ``REFRESH`` seconds
(the ``format_refresh`` setting: a long-running worker, listener or warm --follow sees a store
upgraded under it within that); a refusal is never kept, so the next look reads again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Protocol

from imgwarm.exceptions import FormatTooNew, ObjectTooLarge, StorageError
from imgwarm.racepoints import reached
from imgwarm.store.base import Key

STORE_FORMAT: int = 1  # the newest store format this code reads and writes
FORMAT_RECORD = "imgwarm-format.json"  # at the origin's root (local folder, bucket/prefix)
REFRESH = 60.0  # seconds a record read is trusted before it is read again (format_refresh)
MAX_RECORD = 4096  # bytes: a record is a few dozen

READ, ACT, WRITE = "read", "act", "write"  # what a command does with the store


def imgwarm_version() -> str:
    """This code's version, as records and refusals show it."""
    try:
        return version("imgwarm")
    except PackageNotFoundError:  # a source tree run without being installed
        return "unknown"


@dataclass(frozen=True)
class FormatRecord:
    """What ``imgwarm-format.json`` says."""

    format: int
    readable_by: int
    written_by: str

    @classmethod
    def current(cls) -> FormatRecord:
        return cls(STORE_FORMAT, STORE_FORMAT, f"imgwarm {imgwarm_version()}")

    def to_json(self) -> bytes:
        return (json.dumps({"format": self.format, "readable_by": self.readable_by,
                            "written_by": self.written_by}) + "\n").encode()

    @classmethod
    def parse(cls, raw: bytes, where: str) -> FormatRecord:
        """The record in ``raw``; StorageError naming ``where`` when it is none (a damaged
        record is never guessed at: every command stops on it)."""
        try:
            found = json.loads(raw)
            number = found["format"]
            readable = found.get("readable_by", number)
            written = found.get("written_by", "")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            raise StorageError(f"{where} is not a format record (JSON with a whole "
                               "\"format\" number): fix or restore it") from None
        if not (_whole(number) and _whole(readable) and readable <= number
                and isinstance(written, str)):
            raise StorageError(f"{where} is not a format record: \"format\" and "
                               "\"readable_by\" must be whole numbers from 1, readable_by "
                               "no more than format")
        return cls(number, readable, written)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class RecordStore(Protocol):
    """What the gate needs of the origin (unguarded: the gate's own reads and writes)."""

    def read(self, key: Key, *, limit: int | None = None) -> bytes | None: ...

    def create(self, key: Key, data: bytes) -> bool:
        """Write ``data`` at ``key`` only where nothing is; True when this call wrote it."""
        ...

    def describe(self, key: Key) -> str: ...


def refusal(where: str, record: FormatRecord, mode: str) -> FormatTooNew:
    """The one line of a store too new for this code to ``mode`` it."""
    mine = f"imgwarm {imgwarm_version()} knows formats up to {STORE_FORMAT}"
    if mode == READ:
        what = f"store format {record.format}, readable from format {record.readable_by} on"
        return FormatTooNew(f"{where} is {what}; {mine}: upgrade imgwarm first")
    return FormatTooNew(f"{where} is store format {record.format}; {mine}: upgrade imgwarm "
                        "first")


class FormatGate:
    """The format of one store, read at most once every ``refresh`` seconds, and the check
    each command makes before it reads (``READ``), acts on what it reads (``ACT``: warm
    removes from its tiers what the store says) or writes to or removes from it (``WRITE``:
    which also writes the record when the store has none)."""

    def __init__(self, store: RecordStore, where: str, *, refresh: float = REFRESH,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.where = where  # "origin /srv/origin", "origin s3://bucket/prefix"
        self.refresh = refresh
        self.clock = clock
        self.reads = 0  # how many times the record was read (what the check costs)
        self._lock = threading.Lock()
        self._known: tuple[float, FormatRecord | None] | None = None  # (when read, record)
        # run before this gate writes a record where none is (the store's first write, or
        # a 0.2.0 store's first by this code): store/origin.py marks the references built
        # there when the manifest store is still empty (references.py ``start``)
        self.before_create: Callable[[], None] | None = None

    def check(self, mode: str = WRITE, *, create: bool = True) -> FormatRecord:
        """The store's record (format 1 when it has none), or FormatTooNew when it is newer
        than this code may ``mode``. ``WRITE`` on a store without a record writes one (unless
        not ``create``: a command's look before it knows it will write)."""
        with self._lock:
            record = self._record()
            if record is None and mode == WRITE and create:
                record = self._create()
            found = record or FormatRecord(1, 1, "")
            if (found.readable_by if mode == READ else found.format) > STORE_FORMAT:
                self._known = None  # a refusal is not kept: the next look reads again
                raise refusal(self.where, found, mode)
            return found

    def __call__(self, mode: str) -> None:
        self.check(mode)

    def _record(self) -> FormatRecord | None:
        now = self.clock()
        if self._known is not None and now - self._known[0] < self.refresh:
            return self._known[1]
        self.reads += 1
        try:
            raw = self.store.read(FORMAT_RECORD, limit=MAX_RECORD)
        except ObjectTooLarge as error:
            raise StorageError(f"{self.store.describe(FORMAT_RECORD)} is not a format record "
                               f"({error.size} bytes, over {MAX_RECORD})") from None
        record = None if raw is None else FormatRecord.parse(
            raw, self.store.describe(FORMAT_RECORD))
        self._known = (now, record)
        return record

    def _create(self) -> FormatRecord:
        """Write this code's record where none is. Two writers racing: one creates it, the
        other finds it there and reads it (an S3 put with If-None-Match: *; a hard link on a
        local disk). Read back either way: what counts is what the store holds.

        ``before_create`` runs first: whatever it finds (an empty manifest store) was so
        before any process could write in this format, since every writer passes this gate,
        which writes the record before anything else is written."""
        reached("format.absent")
        if self.before_create is not None:
            self.before_create()
        self.store.create(FORMAT_RECORD, FormatRecord.current().to_json())
        self._known = None
        record = self._record()
        if record is None:  # removed at once: no format is no guess
            raise StorageError(f"{self.store.describe(FORMAT_RECORD)} was written and is "
                               "gone at once: is another process removing it?")
        return record
