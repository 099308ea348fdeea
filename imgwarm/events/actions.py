"""What ``imgwarm watch`` does with a settled file: makes it (or takes it down) in this
process, as ``optimize FILE`` and ``delete FILE`` do; or, with ``--queue``, puts its key on the
queue for the workers, as ``enqueue`` does (the folder then lies in the local origin)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from imgwarm.config import Settings
from imgwarm.events.folder import Folders, inside
from imgwarm.events.out import Outbox, deleted, failed, published
from imgwarm.exceptions import FormatTooNew, ImgwarmError, SettingsError, UnknownSource
from imgwarm.lifecycle.delete import Deletion, delete
from imgwarm.manifest import Credits, SourceResult, Tombstone
from imgwarm.pipeline.batch import Scanned, batch_workers, one_file
from imgwarm.pipeline.isolate import Isolated
from imgwarm.store import Stores, local_key


@dataclass(frozen=True)
class Queued:
    """A job put on the queue for a file: its make, or (``delete``) its takedown."""

    key: str
    job: str
    delete: bool = False

    def to_object(self) -> dict[str, Any]:
        return {"key": self.key, "ok": True, "job": self.job}

    def line(self) -> str:
        return f"queued    {'the delete of ' if self.delete else ''}{self.key}"


Outcome = SourceResult | Deletion | Queued


class Actions(Protocol):
    """Keys of files, and what is done with a file that is complete or gone; a context
    manager (its workers live as long as the watch)."""

    workers: int  # files acted on at once

    def key(self, path: str) -> str: ...

    def path(self, key: str) -> str | None: ...  # the file a record's key names, if any

    def make(self, path: str) -> Outcome | None: ...

    def take_down(self, path: str) -> Outcome | None: ...

    def __enter__(self) -> Actions: ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None: ...


def _standing(stores: Stores, key: str) -> bool:
    """Whether the key has a record that stands (a takedown has something to do)."""
    record = stores.manifests.read(key)
    return record is not None and not isinstance(record, Tombstone)


class Here:
    """Made in this process, its pixel work in worker processes (``pipeline/isolate.py``):
    a file that crashes a decoder fails alone. Each publish, failure and takedown goes to the
    events stream when ``events_redis_url`` is set."""

    def __init__(self, folders: Folders, settings: Settings, credits: Credits) -> None:
        self.folders, self.settings, self.credits = folders, settings, credits
        self.stores = Stores.local(settings.store)
        self.outbox = Outbox(settings, explicit_only=True)
        self.workers = batch_workers(settings, settings.image.effective_workers())
        self._pixels: Isolated | None = None

    def key(self, path: str) -> str:
        return local_key(Path(path))

    def path(self, key: str) -> str | None:
        return key if os.path.isabs(key) else None

    def make(self, path: str) -> Outcome | None:
        assert self._pixels is not None, "make outside the with block"
        result = one_file(Scanned(Path(path), self.folders.within(path)), self.settings,
                          self.stores, self.credits, self._pixels)
        if result.manifest is not None and not result.reused:
            self.outbox.add(published(result.manifest))
        elif result.error is not None:
            self.outbox.add(failed(self.key(path), result.error))
        return result

    def take_down(self, path: str) -> Outcome | None:
        key = self.key(path)
        if not _standing(self.stores, key):
            return None  # never made, or down already
        try:
            done = delete(key, self.stores)
        except UnknownSource:
            return None
        except FormatTooNew:  # the store's, not the file's: the watch stops (watch.py)
            raise
        except ImgwarmError as error:
            return SourceResult(path, error=f"{path}: not taken down: {error}")
        self.outbox.add(deleted(key, done.removed))
        return done

    def __enter__(self) -> Here:
        self._pixels = Isolated(self.workers)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._pixels is not None:
            self._pixels.close()


class OnQueue:
    """Keys put on the queue (``--queue``): the folders lie in the local origin, and a key
    is the path under ``origin_root``, as the workers read it. The workers add the events."""

    workers = 1  # (a message a file: quick, and in the order the files settled)

    def __init__(self, folders: Folders, settings: Settings, credits: Credits) -> None:
        self.settings, self.credits = settings, credits
        self.stores = Stores.local(settings.store)
        self.origin = os.path.realpath(settings.store.origin_root)
        for folder in folders.watched:
            if not inside(folder, self.origin) or folder == self.origin:
                raise SettingsError(f"watch --queue: {folder} is not inside origin_root "
                                    f"({self.origin}): the workers read originals there")

    def key(self, path: str) -> str:
        return Path(os.path.relpath(os.path.realpath(path), self.origin)).as_posix()

    def path(self, key: str) -> str | None:
        return None if os.path.isabs(key) else os.path.join(self.origin, key)

    def make(self, path: str) -> Outcome | None:
        from imgwarm.workers.client import enqueue_all

        key = self.key(path)
        try:
            (job,) = enqueue_all([key], self.settings, self.credits)
        except ImgwarmError as error:
            return SourceResult(path, error=f"{path}: not queued: {error}")
        return Queued(key, job.id)

    def take_down(self, path: str) -> Outcome | None:
        from imgwarm.workers.client import enqueue_delete

        key = self.key(path)
        if not _standing(self.stores, key):
            return None
        try:
            job = enqueue_delete(key, settings=self.settings)
        except ImgwarmError as error:
            return SourceResult(path, error=f"{path}: the delete not queued: {error}")
        return Queued(key, job.id, delete=True)

    def __enter__(self) -> OnQueue:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        pass
