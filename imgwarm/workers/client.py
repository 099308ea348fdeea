"""The client side of the queue: enqueue source keys, wait on their jobs, tell their state.

Each enqueue is a job of its own id (a run still going for an earlier enqueue of the same key
reports to its own id, never to the new one's); the result backend also keeps, per key, the
id of its latest job, so that ``imgwarm status KEY`` needs nothing but the key.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, TypeVar

from celery import Celery
from celery import states as celery_states
from celery.exceptions import TimeoutError as CeleryTimeout
from celery.result import AsyncResult

from imgwarm.config import QueueSettings, Settings, masked_url
from imgwarm.exceptions import BrokerError, ImgwarmError, StorageError
from imgwarm.manifest import Credits, Failure, Manifest, SourceResult
from imgwarm.store import Stores, check_source_key
from imgwarm.workers.app import DELETE_TASK, QUEUED, TASK_NAME, make_app

State = Literal["queued", "running", "retrying", "done", "failed", "unknown"]
_STATES: dict[str, State] = {
    QUEUED: "queued", celery_states.PENDING: "unknown", celery_states.RECEIVED: "queued",
    celery_states.STARTED: "running", celery_states.RETRY: "retrying",
    celery_states.SUCCESS: "done", celery_states.FAILURE: "failed",
    celery_states.REVOKED: "failed",
}
T = TypeVar("T")


def latest_pointer(key: str) -> str:
    """Result-backend key holding the id of the latest job queued for a source key."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
    return f"imgwarm-latest-{digest[:32]}"


def latest_job_id(key: str, settings: Settings) -> str | None:
    app = client_app(settings)
    found = _broker(settings, f"reading the state of {key}",
                    lambda: app.backend.get(latest_pointer(key)))
    return found.decode() if isinstance(found, bytes) else found


@lru_cache(maxsize=4)
def _client(queue_json: str) -> Celery:
    return make_app(QueueSettings.model_validate_json(queue_json))


def client_app(settings: Settings) -> Celery:
    """One client app per settings, kept: a web app enqueues on every upload."""
    return _client(settings.queue.model_dump_json())


def _broker(settings: Settings, doing: str, call: Callable[[], T]) -> T:
    """Run ``call``; a broker or backend that cannot be reached becomes one BrokerError."""
    try:
        return call()
    except ImgwarmError:
        raise
    except Exception as error:  # kombu, redis-py and Celery each raise their own kinds
        url = masked_url(settings.queue.broker_url)
        raise BrokerError(f"cannot reach the broker at {url} (IMGWARM_BROKER_URL) while "
                          f"{doing}: {str(error).rstrip('.')}") from None


def _message(key: str, error: Any) -> str:
    if isinstance(error, ImgwarmError):
        return str(error)
    return f"{key}: {type(error).__name__}: {error}"


def _ended(job: str, settings: Settings, doing: str, timeout: float | None
           ) -> tuple[AsyncResult, Any]:
    """Wait for a job's end: its result (a TimeoutError when the wait ran out first)."""
    result = AsyncResult(job, app=client_app(settings))

    def get() -> Any:
        try:
            return result.get(timeout=timeout, propagate=False, interval=0.2)
        except CeleryTimeout:
            return TimeoutError("not ended when the wait ran out (it may still run)")

    return result, _broker(settings, doing, get)


@dataclass(frozen=True)
class Job:
    """A key on the queue."""

    key: str
    id: str
    settings: Settings

    def wait(self, timeout: float | None = None) -> SourceResult:
        """Block until the job ends: its manifest, or the reason it failed."""
        result, value = _ended(self.id, self.settings, f"waiting for {self.key}", timeout)
        if isinstance(value, TimeoutError):
            return SourceResult(self.key, error=f"{self.key}: {value}")
        if result.state == celery_states.SUCCESS:
            manifest = Manifest.model_validate(value["manifest"])
            return SourceResult(self.key, manifest=manifest, reused=bool(value["reused"]))
        return SourceResult(self.key, error=_message(self.key, value))


def enqueue_all(keys: list[str], settings: Settings, credits: Credits | None = None) -> list[Job]:
    """Queue one job per key, in order. Every key is checked first; if the broker goes away
    midway, the BrokerError says which keys were queued and which were not."""
    for key in keys:  # unsafe ones (``..``, absolute, control characters, hidden): none queued
        check_source_key(key)
    app = client_app(settings)
    kwargs = (credits or Credits()).arguments()
    jobs: list[Job] = []
    for key in keys:
        job = Job(key, f"imgwarm-{uuid.uuid4().hex}", settings)

        def send(job: Job = job) -> None:
            # QUEUED first: `status` must not say "unknown" while the message waits.
            backend, pointer = app.backend, latest_pointer(job.key)
            backend.store_result(job.id, None, QUEUED)
            backend.set(pointer, job.id)
            try:
                app.send_task(TASK_NAME, args=[job.key], kwargs=kwargs, task_id=job.id)
            except Exception:  # not queued: status falls back to the manifest store
                with contextlib.suppress(Exception):
                    backend.forget(job.id)
                    backend.delete(pointer)
                raise

        try:
            _broker(settings, f"queueing {key}", send)
        except BrokerError as error:
            if jobs:
                left = len(keys) - len(jobs)
                raise BrokerError(f"{error}; {len(jobs)} key(s) were queued, {left} were "
                                  f"not, from {key} on") from None
            raise BrokerError(f"{error}; nothing was queued") from None
        jobs.append(job)
    return jobs


def enqueue(
    key: str, *, description: str | None = None, copyright: str | None = None,
    artist: str | None = None, settings: Settings | None = None,
) -> Job:
    """Queue one source key for the workers (the call for a web app's upload handler)."""
    from imgwarm.config import load_settings

    credits = Credits.given(description=description, copyright=copyright, artist=artist)
    return enqueue_all([key], settings or load_settings(), credits)[0]


@dataclass(frozen=True)
class DeleteJob:
    """A takedown on the queue."""

    key: str
    id: str
    settings: Settings

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until it ends: what it removed (``Deletion.to_object``), or ``{"key", "ok":
        False, "error"}``."""
        result, value = _ended(self.id, self.settings, f"waiting for the delete of {self.key}",
                               timeout)
        if isinstance(value, TimeoutError):
            return {"key": self.key, "ok": False, "error": f"{self.key}: {value}"}
        if result.state == celery_states.SUCCESS:
            return dict(value)
        return {"key": self.key, "ok": False, "error": _message(self.key, value)}


def enqueue_delete(key: str, *, original: bool = False, when_gone: bool = False,
                   settings: Settings | None = None) -> DeleteJob:
    """Queue the takedown of a source key (the call for a web app's delete handler): its
    variants leave the origin, and every cache server's next warm removes them.
    ``when_gone``: only if its original is still gone when the job runs (a bucket event's)."""
    from imgwarm.config import load_settings

    check_source_key(key)
    settings = settings or load_settings()
    app = client_app(settings)
    job = DeleteJob(key, f"imgwarm-delete-{uuid.uuid4().hex}", settings)
    # (when_gone only when set: a worker of an earlier version takes the rest)
    kwargs = {"original": original} | ({"when_gone": True} if when_gone else {})
    _broker(settings, f"queueing the delete of {key}", lambda: app.send_task(
        DELETE_TASK, args=[key], kwargs=kwargs, task_id=job.id))
    return job


@dataclass(frozen=True)
class JobStatus:
    key: str
    state: State
    manifest: Manifest | None = None
    error: str | None = None

    def to_object(self) -> dict[str, Any]:
        """The optimize ``--json`` object (when done or failed), with the state."""
        if self.state in ("done", "failed"):
            ended = SourceResult(self.key, manifest=self.manifest, error=self.error)
            return {**ended.to_object(), "state": self.state}
        found = {"source": self.key, "state": self.state}
        return found | ({"last_fault": self.error} if self.error else {})


def job_status(key: str, settings: Settings, stores: Stores | None = None) -> JobStatus:
    """Where a key stands: the result backend knows queued, running, retrying and recent
    ends; the manifest store knows every end, for good."""
    app = client_app(settings)
    latest = latest_job_id(key, settings)
    meta: dict[str, Any] = {} if latest is None else _broker(
        settings, f"reading the state of {key}", lambda: app.backend.get_task_meta(latest))
    state = _STATES.get(str(meta.get("status")), "unknown")
    if state in ("queued", "running"):
        return JobStatus(key, state)
    if state in ("retrying", "failed"):  # the last fault, or why it failed
        return JobStatus(key, state, error=_message(key, meta.get("result")))
    try:
        record = (stores or Stores.for_settings(settings.store)).manifests.read(key)
    except StorageError as error:
        raise ImgwarmError(f"cannot read the manifest of {key}: {error}") from None
    if isinstance(record, Manifest):
        return JobStatus(key, "done", manifest=record)
    if isinstance(record, Failure):
        return JobStatus(key, "failed", error=f"{key}: {record.failed}")
    return JobStatus(key, "unknown")


def ping(settings: Settings, node: str, timeout: float = 3.0) -> bool:
    """Does the worker named ``node`` (``celery@host``) answer through the broker? What
    `celery inspect ping -d NODE` asks, for a container's health check."""
    app = client_app(settings)
    answers = _broker(settings, f"pinging {node}",
                      lambda: app.control.ping(destination=[node], timeout=timeout))
    return any(node in answer for answer in answers or [])
