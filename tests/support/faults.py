"""Fault injection: every store call a command makes goes through one counter, and the Nth
call (of one kind, or of any) raises StorageError, so that a test can fail each call of a run
in turn and then look at what was left on the real files.

What is counted, by kind:

    read, write, delete, list (files, stamped), stat (exists, size, modified), prune
        the origin's and the manifest store's calls (the references' claim and dropped
        markers included: ``ManifestStore.references`` is built on the store it is given);
    journal (ChangeLog.append), journal-read (since, now);
    tier-read, tier-write, tier-delete, tier-list, tier-stat, tier-prune
        the cache tiers' calls (``Tier`` is a LocalStore).

A rename is not a call of its own: it is inside ``LocalStore.write`` (an unnamed file linked
under its name, or a temp file renamed), which is atomic; so a failing write stands for a
failing rename, and for a failing PUT on S3. By default the fault is raised before the call
does anything (nothing written, nothing removed); with ``after`` the call is made and the
error raised when it returns (a response lost after S3 applied the request).

Only the outermost call counts: ``S3Store.write`` asks ``exists`` first, ``stamped`` lists
with ``files``; those inner calls are part of the one request that may fail. Listings are
read whole inside the call (a lazy listing would be counted when first iterated).

The counter lives in shared memory: warm's copier forks processes (from a local origin) that
read the origin and write the tiers, and their calls count, and fail, like the parent's.

Hooks: ``faulty_stores`` wraps a ``Stores``; ``install`` (with pytest's monkeypatch) makes
``Stores.for_settings`` and the tiers' constructor hand out wrapped ones, for the commands
that build their own (warm, gc).
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import pytest

from imgwarm.exceptions import StorageError
from imgwarm.store import Stores
from imgwarm.store.changes import Batch, ChangeLog
from imgwarm.store.manifests import ManifestStore

STORE_KINDS = ("read", "write", "delete", "list", "stat", "prune")
JOURNAL_KINDS = ("journal", "journal-read")
TIER_KINDS = tuple(f"tier-{kind}" for kind in STORE_KINDS)
KINDS = STORE_KINDS + JOURNAL_KINDS + TIER_KINDS
# The calls that remove or replace something: each is always failed in turn.
MUTATING = frozenset({"write", "delete", "prune", "journal", "tier-write", "tier-delete",
                      "tier-prune"})
_METHODS = {"read": "read", "write": "write", "delete": "delete", "files": "list",
            "stamped": "list", "exists": "stat", "size": "stat", "modified": "stat",
            "prune": "prune"}
_LISTINGS = frozenset({"files", "stamped"})
_TOTAL, _SELECTED, _FIRED = len(KINDS), len(KINDS) + 1, len(KINDS) + 2
T = TypeVar("T")


class InjectedFault(StorageError):
    """The error a harness raises (a StorageError: what a failing disk or S3 gives)."""


class Faults:
    """One counter of every call, shared by threads and forked processes; ``arm`` says which
    call fails. Unarmed, it only counts (a clean run, to know how many calls there are)."""

    def __init__(self) -> None:
        self._counts = multiprocessing.RawArray("q", len(KINDS) + 3)
        self._fired = multiprocessing.RawArray("c", 400)
        self._lock = multiprocessing.Lock()
        self._depth = threading.local()
        self.at = 0  # 0: count only
        self.kinds: frozenset[str] | None = None  # None: any kind
        self.after = False

    def arm(self, at: int, kinds: Iterable[str] | None = None, *, after: bool = False) -> None:
        """Fail the ``at``-th call of ``kinds`` (of any kind when None), counting from now."""
        unknown = set(kinds or ()) - set(KINDS)
        assert not unknown, f"no such kind: {unknown}"
        self.reset()
        self.at, self.after = at, after
        self.kinds = None if kinds is None else frozenset(kinds)

    def reset(self) -> None:
        with self._lock:
            for i in range(len(self._counts)):
                self._counts[i] = 0
            self._fired.value = b""
        self.at, self.kinds, self.after = 0, None, False

    def counts(self) -> dict[str, int]:
        """Calls so far, by kind (those made)."""
        return {kind: self._counts[i] for i, kind in enumerate(KINDS) if self._counts[i]}

    @property
    def total(self) -> int:
        return int(self._counts[_TOTAL])

    @property
    def fired(self) -> str | None:
        """What failed (the kind, its number and the call), None when nothing did."""
        if not self._counts[_FIRED]:
            return None
        return bytes(self._fired.value).decode(errors="replace")

    def _tick(self, kind: str, what: str) -> str | None:
        """Count a call; the message of the fault when this one must fail."""
        with self._lock:
            self._counts[KINDS.index(kind)] += 1
            self._counts[_TOTAL] += 1
            if not self.at or (self.kinds is not None and kind not in self.kinds):
                return None
            self._counts[_SELECTED] += 1
            if self._counts[_SELECTED] != self.at or self._counts[_FIRED]:
                return None
            self._counts[_FIRED] = 1
            scope = "any kind" if self.kinds is None else "/".join(sorted(self.kinds))
            message = f"injected fault: call {self.at} of {scope} ({kind} {what})"
            self._fired.value = message.encode()[:399]
            return message

    def run(self, kind: str, what: str, call: Callable[[], T]) -> T:
        """Make ``call`` as one counted call of ``kind`` (``what``: its key, for messages)."""
        if getattr(self._depth, "n", 0):  # inside a counted call: part of it
            return call()
        message = self._tick(kind, what)
        if message is not None and not self.after:
            raise InjectedFault(message)
        self._depth.n = 1
        try:
            result = call()
        finally:
            self._depth.n = 0
        if message is not None:
            raise InjectedFault(message + ", after it was made")
        return result


_CLASSES: dict[tuple[type, str], type] = {}


def _counted(base: type, name: str, kind: str) -> Callable[..., Any]:
    real = getattr(base, name)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        what = str(args[0]) if args else str(kwargs.get("key", kwargs.get("under", "")))
        if name in _LISTINGS:  # read whole inside the call, handed out as an iterator
            return iter(self._faults.run(kind, what, lambda: list(real(self, *args, **kwargs))))
        return self._faults.run(kind, what, lambda: real(self, *args, **kwargs))

    method.__name__ = name
    return method


def faulty_class(base: type[T], prefix: str = "") -> type[T]:
    """A subclass of a store class (LocalStore, S3Store, Tier) whose Store calls are counted
    (a subclass, not a proxy: imgwarm takes other paths for a LocalStore, and must here too).
    Its instances find their counter in ``_faults``."""
    found = _CLASSES.get((base, prefix))
    if found is None:
        methods = {name: _counted(base, name, prefix + kind) for name, kind in _METHODS.items()
                   if hasattr(base, name)}
        found = type(f"Faulty{base.__name__}", (base,), methods)
        _CLASSES[(base, prefix)] = found
    return found


def faulty(store: T, faults: Faults, prefix: str = "") -> T:
    """The same store (a shallow copy: same root or client), its calls counted."""
    clone = copy.copy(store)
    clone.__class__ = faulty_class(type(store), prefix)
    clone._faults = faults  # type: ignore[attr-defined]
    return clone


class FaultyJournal:
    """A change journal whose calls are counted (an append: ``journal``)."""

    def __init__(self, real: ChangeLog, faults: Faults) -> None:
        self.real = real
        self.faults = faults

    def append(self, key: str) -> None:
        self.faults.run("journal", key, lambda: self.real.append(key))

    def since(self, cursor: str) -> Batch:
        return self.faults.run("journal-read", "since", lambda: self.real.since(cursor))

    def now(self) -> str:
        return self.faults.run("journal-read", "now", self.real.now)

    def readable(self, cursor: str) -> bool:
        return self.real.readable(cursor)


def faulty_stores(real: Stores, faults: Faults) -> Stores:
    """``real`` with every call of its origin, manifest store (and so its references) and
    journal counted. The journal keeps the real store underneath: an S3 append is one PUT,
    counted once, as ``journal``."""
    manifests = real.manifests
    journal = None if manifests.changes is None else FaultyJournal(manifests.changes, faults)
    wrapped = ManifestStore(faulty(manifests.store, faults), real.layout, journal)
    return Stores(faulty(real.origin, faults), wrapped, real.layout)


def install(monkeypatch: pytest.MonkeyPatch, faults: Faults) -> None:
    """Every ``Stores.for_settings`` and every tier made from now on counts into ``faults``
    (warm and gc build their own: warm.open_tiers, gc's collect_tiers, the copier's forked
    processes, which inherit the patched class)."""
    from imgwarm.cache import tiers

    made = Stores.for_settings  # the real one, bound to the class

    def for_settings(cls: type[Stores], settings: Any) -> Stores:
        return faulty_stores(made(settings), faults)

    monkeypatch.setattr(Stores, "for_settings", classmethod(for_settings))
    tier = type("FaultyTier", (faulty_class(tiers.Tier, "tier-"),), {"_faults": faults})
    monkeypatch.setattr(tiers, "Tier", tier)


def shared_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """One boto3 client per endpoint for the whole test: making one loads botocore's service
    model (about 0.1 s), and a fault run builds stores several times (the command, the checks
    before and after, the run again)."""
    from imgwarm.store import s3

    made: dict[tuple[Any, ...], Any] = {}
    real = s3.make_client

    def make_client(settings: Any) -> Any:
        key = (settings.s3_endpoint_url, settings.s3_region, settings.s3_timeout)
        if key not in made:
            made[key] = real(settings)
        return made[key]

    monkeypatch.setattr(s3, "make_client", make_client)


@contextlib.contextmanager
def armed(faults: Faults, at: int, kinds: Iterable[str] | None = None, *,
          after: bool = False) -> Iterator[Faults]:
    """Within the block, the ``at``-th call (of ``kinds``) fails; counting only after it."""
    faults.arm(at, kinds, after=after)
    try:
        yield faults
    finally:
        faults.at = 0


Target = tuple[str, int, bool]  # (kind, number within the kind, fail after the call)


def plan(counts: dict[str, int], *, budget: int | None = None, sample: int | None = None,
         after: bool = False, seed: int = 0) -> list[Target]:
    """Which calls to fail, each as (kind, number within the kind, after it was made):

    - every call (budget and sample None), and with ``after`` every call that removes or
      replaces failing once more, after it was made;
    - ``sample``: every call of the kinds that remove or replace (before, and after when
      asked), and a seeded sample of ``sample`` of the others (reads, listings, look-ups);
    - ``budget``: no more than that many runs, seeded: one call of each kind first (those
      that remove or replace first), then more of those, then of the others; with
      ``after``, those that remove or replace are failed after the call too.
    """
    import random

    rnd = random.Random(seed)
    before = [(kind, n, False) for kind, count in sorted(counts.items())
              for n in range(1, count + 1)]
    late = [(kind, n, True) for kind, n, _ in before if kind in MUTATING] if after else []
    every = before + late
    if budget is None and sample is None:
        return every
    if sample is not None:
        rest = [t for t in before if t[0] not in MUTATING]
        return sorted([t for t in every if t[0] in MUTATING]
                      + rnd.sample(rest, min(sample, len(rest))))
    assert budget is not None
    if len(every) <= budget:
        return every
    chosen: set[Target] = set()
    for kind in sorted(counts, key=lambda k: (k not in MUTATING, k)):
        chosen.add((kind, rnd.randint(1, counts[kind]), False))
    removing = [t for t in every if t[0] in MUTATING]
    others = [t for t in every if t[0] not in MUTATING]
    rnd.shuffle(removing)
    rnd.shuffle(others)
    for target in removing + others:
        if len(chosen) >= budget:
            break
        chosen.add(target)
    return sorted(chosen)
