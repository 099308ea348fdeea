"""The manifest store: one JSON record per source key (its manifest, why it failed, or that it
was deleted), kept in any Store, sharded like the variants, with a journal of what changed
(``changes.py``) and the references of each variant (``references.py``)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import PurePosixPath

from imgwarm.exceptions import LayoutError
from imgwarm.manifest import Manifest, Record, Tombstone, named, parse_record
from imgwarm.racepoints import reached
from imgwarm.store.base import Store
from imgwarm.store.changes import ChangeLog
from imgwarm.store.layout import Layout, safe_relative
from imgwarm.store.listing import sharded
from imgwarm.store.local import LocalStore
from imgwarm.store.references import References, key_digest

LISTING_THREADS = 16  # reads in flight from S3
LOCAL_THREADS = 2  # from a local disk (warm uses the cores to copy meanwhile)
LISTING_CHUNK = 1024
RUN = 16  # records a thread reads at a time
_UNREAD = object()  # put() without the previous record: it reads it


class ManifestStore:
    """Records by source key. A key is any string: it is hashed for its place."""

    def __init__(self, store: Store, layout: Layout, changes: ChangeLog | None = None) -> None:
        self.store = store
        self.layout = layout
        self.changes = changes
        self.references = References(store, layout)
        # records ``everything`` found unreadable (damaged, hostile: too deep) and skipped;
        # a record's file is named by its key's digest, so its claims can still stand
        self.damaged: list[PurePosixPath] = []

    def key_path(self, key: str) -> PurePosixPath:
        return self._digest_path(key_digest(key))

    def _digest_path(self, digest: str) -> PurePosixPath:
        return self.layout.path_for(f"{digest}.json", digest)

    def read(self, key: str) -> Record | None:
        """What is known of a key: its manifest, the reason it failed, or None when nothing
        is, or the record is damaged (the source is then made again, which rewrites it; it
        is noted in ``damaged``)."""
        path = self.key_path(key)
        raw = self.store.read(path)
        found = sound(parse_record(raw)) if raw is not None else None
        if raw is not None and found is None:
            self.damaged.append(path)
        return found if found is not None and found.key == key else None

    def record_of(self, digest: str) -> Record | None:
        """The record whose key has this digest (a claim marker's name), as it stands now;
        None when there is none or it cannot be read (a re-read: not noted as damaged again)."""
        return self._parsed(self._digest_path(digest), note=False)

    def get(self, key: str) -> Manifest | None:
        """The manifest of a key; None when there is none (or only a failure)."""
        found = self.read(key)
        return found if isinstance(found, Manifest) else None

    def put(self, record: Record, previous: Record | object | None = _UNREAD, *,
            claimed: bool = False) -> None:
        """Store it, replacing the key's previous record (read when not given), and say so in
        the journal (after: a reader that sees the entry finds the record). The variants it
        names are claimed first (unless ``claimed``: the caller did, before writing them);
        those the previous named and it does not are released after, and noted as dropped.

        All or nothing as far as the store allows: when the journal cannot be appended to,
        the previous record is put back before the error is raised (a record no reader hears
        of would stand for ever: a re-run finds it and has nothing to write). Should that
        fail too, the new record stands, and with it every claim: nothing it names goes."""
        if previous is _UNREAD:
            previous = self.read(record.key)
        old, new = named(previous), named(record)  # type: ignore[arg-type]
        if not claimed:
            self.references.claim(record.key, sorted(new - old))
        path = self.key_path(record.key)
        self.store.write(path, record.to_json().encode(), replace=True)
        reached("manifest.written")
        if self.changes is not None:
            try:
                self.changes.append(record.key)
            except BaseException:
                self._put_back(path, previous)  # type: ignore[arg-type]
                raise
        if old - new:  # the drop noted before the claims go: a gc that finds no claim
            # finds who dropped it (a live source's drop waits the grace, a takedown's not)
            self.references.note_dropped(sorted(old - new), by=key_digest(record.key))
            self.references.release(record.key, sorted(old - new))

    def announce(self, key: str) -> None:
        """Say in the journal, again, that ``key``'s record changed: for a record whose put
        may have been cut short between the record and the journal (a process killed there
        leaves a record no reader hears of; a re-run finds it current and writes nothing)."""
        if self.changes is not None:
            self.changes.append(key)

    def _put_back(self, path: PurePosixPath, previous: Record | None) -> None:
        with contextlib.suppress(Exception):  # the journal's error is the one to report
            if previous is None:
                self.store.delete(path)
            else:
                self.store.write(path, previous.to_json().encode(), replace=True)

    def everything(self) -> Iterator[Record]:
        """Every record: a full listing (a first ``warm``, ``--full``), not for every run.
        Each read is a wait on a disk or the network: read in threads (fewer for a local
        store, where parsing holds the interpreter lock), each a run of records at a time
        (a thread handed one small record at a time spends more on the lock than reading)."""
        paths = (p for p, _ in sharded(self.store, self.layout, times=False) if p.suffix == ".json")
        threads = LOCAL_THREADS if isinstance(self.store, LocalStore) else LISTING_THREADS
        with ThreadPoolExecutor(threads) as pool:
            while chunk := list(itertools.islice(paths, LISTING_CHUNK)):
                runs = [chunk[i:i + RUN] for i in range(0, len(chunk), RUN)]
                for found in pool.map(self._run, runs):
                    yield from found

    def _run(self, paths: list[PurePosixPath]) -> list[Record]:
        return [r for r in map(self._parsed, paths) if r is not None]

    def _parsed(self, path: PurePosixPath, *, note: bool = True) -> Record | None:
        """The record at ``path``; None for a damaged one (noted in ``damaged`` when
        ``note``), an odd name, or a record that is not where its key puts it (a stray)."""
        try:
            raw = self.store.read(path)
        except LayoutError:
            return None
        found = sound(parse_record(raw)) if raw is not None else None
        if note and raw is not None and found is None:
            self.damaged.append(path)  # (list.append: safe from the reading threads)
        return found if found is not None and self.key_path(found.key) == path else None


def sound(record: Record | None) -> Record | None:
    """The record, or None when a variant path it names could leave the origin (``../x.jpg``,
    an absolute path: written by hand or by a hostile writer). Such a record is damaged, as
    an unparsable one is: every store-wide command counts it and goes on (its claims stand,
    nothing is removed on its account), where the path itself would be refused midway."""
    if record is None:
        return None
    paths = record.variants if isinstance(record, Tombstone) else named(record)
    try:
        for path in paths:
            safe_relative(path)
    except LayoutError:
        return None
    return record
