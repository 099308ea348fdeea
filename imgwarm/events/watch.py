"""``imgwarm watch``: local folders whose complete files are made as they come, and whose
removed files are taken down, from the kernel's file events (inotify, through watchdog).

A file is complete when the kernel says a writer closed it (IN_CLOSE_WRITE) or it was moved
in (IN_MOVED_TO): a file still open is never read. Each event only marks its path; the path is
acted on once no event has come for it for ``settle`` seconds, as its latest event says:
several closes in a row make it once, with the last bytes; a write that starts again after a
close waits for the next close; a file removed and put back (an editor's save: rename to a
backup, write anew) is made, not taken down. Names that are hidden or temporary, and
imgwarm's own roots, are passed over (``folder.py``).

On start, the catch-up: files changed while no watcher ran (no record, or one older than the
file) are made, and records whose file is gone are taken down. The watch starts first, so
that nothing changed during the catch-up is missed.

What is done with a settled file, made here or queued for the workers: ``actions.py``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)

from imgwarm.config import Settings
from imgwarm.events.actions import Actions, Here, OnQueue, Outcome
from imgwarm.events.folder import Folders, changed, gone, inside
from imgwarm.exceptions import FormatTooNew, ImgwarmError, SettingsError
from imgwarm.manifest import Credits, SourceResult, Tombstone
from imgwarm.store import Stores
from imgwarm.store.format import ACT, WRITE

Kind = Literal["closed", "gone", "writing"]
SETTLE = 0.5  # seconds without an event for a path before it is acted on
TOGETHER = 0.05  # seconds: paths due this close together are one round
WAKE = 1.0  # seconds: the loop looks at its stop flag at least this often


class Watcher:
    """Paths marked by events, acted on once settled, ``workers`` at a time, each path by one
    worker at a time; ``report`` gets each outcome (from several threads: one at a time)."""

    def __init__(self, folders: Folders, settings: Settings, report: Callable[[Outcome], None],
                 *, settle: float = SETTLE, credits: Credits | None = None,
                 queue: bool = False) -> None:
        self.folders = folders
        self.settings = settings
        self.stores = Stores.local(settings.store)
        self.settle = settle
        self.actions: Actions = (OnQueue if queue else Here)(folders, settings,
                                                              credits or Credits())
        self._report = report
        self._shown = threading.Lock()
        self._cond = threading.Condition(threading.RLock())  # (stop() may run in a handler)
        self._pending: dict[str, tuple[Kind, float]] = {}
        self._busy: set[str] = set()
        self._stopping = False
        self._lost = ""  # why the run ended by itself (a watched folder removed)
        self._refused: FormatTooNew | None = None  # the store became too new for this code

    def note(self, path: str, kind: Kind, *, now: bool = False, at: float | None = None
             ) -> None:
        """What an event says of ``path``; ``writing`` only holds back a close not acted on.
        ``at``: when it is due (else after the settle time; ``now``: at once)."""
        if not self.folders.takes(path):
            return
        with self._cond:
            if kind == "writing":
                if self._pending.get(path, ("gone",))[0] == "closed":
                    del self._pending[path]  # its writer's next close marks it again
                return
            due = at if at is not None else time.monotonic() + (0.0 if now else self.settle)
            self._pending[path] = (kind, due)
            self._cond.notify_all()

    def moved(self, source: str, target: str) -> None:
        """A file moved: gone from ``source``, complete at ``target`` (either may be outside
        the folders: empty). Both due together, so that the new name is made first."""
        at = time.monotonic() + self.settle
        if source:
            self.note(source, "gone", at=at)
        if target:
            self.note(target, "closed", at=at)

    def note_folder(self, folder: str, kind: Kind | Literal["created"]) -> None:
        """A folder moved in (each file in it is complete), made (its files closed before
        its own watch was set: those not open for writing) or moved out (each record under
        it)."""
        inner = Folders((folder,), self.folders.skipped)
        if kind == "closed":
            for path, _ in inner.files():
                self.note(path, "closed")
            return
        if kind == "created":
            for path in changed(inner, self.stores, float("inf"), self.actions.key):
                self.note(path, "closed")
            return
        for record in self.stores.manifests.everything():
            named = None if isinstance(record, Tombstone) else self.actions.path(record.key)
            if named is not None and inside(named, folder):
                self.note(named, "gone")

    def stop(self, why: str = "") -> None:
        """End the run: the files in hand are finished, the others wait for the catch-up.
        ``why``: it ends by itself once what is marked is done (the takedowns of a folder
        removed with its files), and ``run`` raises ImgwarmError with this line."""
        with self._cond:
            if why:
                self._lost = self._lost or why
            else:
                self._stopping = True
            self._cond.notify_all()

    def run(self, *, once: bool = False, ready: Callable[[], object] | None = None) -> None:
        """Watch until ``stop`` (``once``: no watch; the catch-up alone, then return);
        ``ready`` is called once the watch is on (before the catch-up). FormatTooNew, before
        anything or once the store's record says so (the files not made wait for the
        catch-up of a newer version)."""
        self.stores.check(ACT if isinstance(self.actions, OnQueue) else WRITE)
        observer = None if once else self._observe()
        since = time.time()  # (after the watch is on: what changes now has its event)
        if ready is not None:
            ready()
        try:
            with self.actions, ThreadPoolExecutor(self.actions.workers) as pool:
                catch_up: list[tuple[Kind, Iterable[str]]] = [
                    ("closed", changed(self.folders, self.stores, since, self.actions.key)),
                    ("gone", gone(self.folders, self.stores, self.actions.path))]
                for kind, paths in catch_up:
                    for path in paths:
                        if self._stopping:  # (SIGTERM during a long walk)
                            break
                        self.note(path, kind, now=True)
                self._loop(pool, once)
                pool.shutdown(wait=True, cancel_futures=True)  # the files in hand end first
        finally:
            if observer is not None:
                observer.stop()
                observer.join()
        if self._refused is not None:
            raise self._refused
        if self._lost:
            raise ImgwarmError(self._lost)

    def _loop(self, pool: ThreadPoolExecutor, once: bool) -> None:
        while True:
            with self._cond:
                due = self._due()
                while not due and not self._stopping:
                    if (once or self._lost) and not self._pending and not self._busy:
                        return
                    waits = [t for p, (_, t) in self._pending.items() if p not in self._busy]
                    self._cond.wait(min([WAKE, *(t - time.monotonic() for t in waits)]))
                    due = self._due()
                if self._stopping:
                    return
                for path in due:
                    kind = self._pending.pop(path)[0]
                    self._busy.add(path)
                    pool.submit(self._act, path, kind)

    def _due(self) -> list[str]:
        """Paths to act on now; files to make first (a file renamed within the folders is
        made at its new name before its old one is taken down: the variants, named by the
        new key, stay in place)."""
        now = time.monotonic() + TOGETHER
        due = [p for p, (_, t) in self._pending.items() if t <= now and p not in self._busy]
        return sorted(due, key=lambda p: self._pending[p][0] != "closed")

    def _act(self, path: str, kind: Kind) -> None:
        try:
            try:
                outcome = self._make(path) if kind == "closed" else self._take_down(path)
            except FormatTooNew as error:  # no file's failure: the run ends, in one line
                self._refused = self._refused or error
                self.stop()
                return
            except Exception as error:  # a bug must cost one file, not the watcher
                outcome = SourceResult(path, error=f"{path}: internal error: {error!r}")
            if outcome is not None:
                with self._shown:
                    self._report(outcome)
        finally:  # (after its line: a path's lines come in the order it was acted on)
            with self._cond:
                self._busy.discard(path)
                self._cond.notify_all()

    def _make(self, path: str) -> Outcome | None:
        try:
            info = os.lstat(path)
        except OSError:
            return None  # gone since: its own event says so
        if not os.path.isfile(path) or os.path.islink(path) or not info.st_size:
            return None  # an empty file is not written yet; links are not followed
        return self.actions.make(path)

    def _take_down(self, path: str) -> Outcome | None:
        if os.path.lexists(path):
            return None  # back already (a save by rename): its close makes it
        return self.actions.take_down(path)

    def _observe(self) -> Any:
        """The watch, on every folder, recursive; started (its inotify watches are set)."""
        try:
            from watchdog.observers.inotify import InotifyObserver
        except ImportError:  # (watchdog's inotify observer exists on Linux only)
            raise SettingsError("watch: needs Linux's inotify (close-write events)") from None
        # full events: a move from or to outside the folders comes as a move with one side
        # empty, not as a create (which a file still being written also gives)
        observer = InotifyObserver(generate_full_events=True)
        handler = _Handler(self)
        try:
            for folder in self.folders.watched:
                observer.schedule(handler, folder, recursive=True, event_filter=_Handler.kinds())
            observer.start()
        except OSError as error:  # ENOSPC: a watch a folder, past fs.inotify.max_user_watches
            raise ImgwarmError(f"watch: cannot watch {', '.join(self.folders.watched)}: "
                               f"{error.strerror or error} (a folder a watch: see "
                               "sysctl fs.inotify.max_user_watches)") from None
        return observer


class _Handler(FileSystemEventHandler):
    """watchdog's events, as marks on the watcher (in watchdog's thread)."""

    def __init__(self, watcher: Watcher) -> None:
        super().__init__()
        self.watcher = watcher

    @staticmethod
    def kinds() -> list[type[FileSystemEvent]]:
        return [FileClosedEvent, FileModifiedEvent, FileDeletedEvent, FileMovedEvent,
                DirMovedEvent, DirCreatedEvent, DirDeletedEvent]

    def on_any_event(self, event: FileSystemEvent) -> None:
        source, target = os.fsdecode(event.src_path), os.fsdecode(event.dest_path)
        note = self.watcher.note
        if event.event_type == "moved":
            if event.is_directory:  # (a move inside the folders: watchdog gives each file's)
                if source and not target:
                    self.watcher.note_folder(source, "gone")
                elif target and not source:
                    self.watcher.note_folder(target, "closed")
                return
            self.watcher.moved(source, target)
        elif event.is_directory:
            if event.event_type == "created":
                self.watcher.note_folder(source, "created")
            elif event.event_type == "deleted" and source in self.watcher.folders.watched:
                self.watcher.stop(f"watch: {source} was removed: nothing left to watch")
        elif event.event_type == "closed":
            note(source, "closed")
        elif event.event_type == "deleted":
            note(source, "gone")
        elif event.event_type == "modified":
            note(source, "writing")


def watch(folders: Iterable[os.PathLike[str] | str], settings: Settings,
          report: Callable[[Outcome], None], **options: Any) -> Watcher:
    """A Watcher of ``folders`` (SettingsError, one line, for one it cannot take); call its
    ``run``."""
    return Watcher(Folders.of(folders, settings), settings, report, **options)
