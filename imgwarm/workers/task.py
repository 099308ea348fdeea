"""The task: fetch the original by key, run the pipeline, store variants and manifest.

Thin on purpose: arguments are a key and three short strings (the credits), settings come from
the worker's start, and everything else is pipeline code. The pipeline (and so libvips) is
imported in each worker process after the fork, never in the parent.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from celery import Celery
from celery.exceptions import Reject, Retry, SoftTimeLimitExceeded
from celery.signals import worker_process_init

from imgwarm.config import Settings
from imgwarm.exceptions import (
    FormatTooNew,
    ImgwarmError,
    JobFailed,
    TransientError,
    about,
)
from imgwarm.manifest import Credits
from imgwarm.workers.app import DELETE_TASK, SLICE_TASK, TASK_NAME, make_app

if TYPE_CHECKING:
    from imgwarm.events.out import Outbox
    from imgwarm.store import Stores

# per process: a boto3 client and a Redis connection must not cross a fork
_stores: dict[int, Stores] = {}
_outboxes: dict[int, Outbox] = {}
T = TypeVar("T")


def _per_process(made: dict[int, T], make: Callable[[], T]) -> T:
    """What ``make`` gives, made once in each process (after the fork)."""
    pid = os.getpid()
    if pid not in made:
        made.clear()
        made[pid] = make()
    return made[pid]


def process_stores(settings: Settings) -> Stores:
    from imgwarm.store import Stores

    return _per_process(_stores, lambda: Stores.for_settings(settings.store))


def process_outbox(settings: Settings) -> Outbox:
    """This process's outbox (the events stream), made on first use after the fork."""
    from imgwarm.events.out import Outbox

    return _per_process(_outboxes, lambda: Outbox(settings))


def tell(settings: Settings, event: dict[str, Any]) -> None:
    """Add an event to the stream; never fails the job (the outbox logs what it could not)."""
    with contextlib.suppress(Exception):  # a bug in the outbox must not cost a made source
        process_outbox(settings).add(event)


def tell_failed(settings: Settings, key: Any, error: BaseException) -> None:
    """A job that ended for good without its variants: its ``failed`` event (the task's
    on_failure: a JobFailed, a transient fault whose retries ran out, anything unexpected)."""
    from imgwarm.events.out import failed

    line = " ".join(str(error).split()) or type(error).__name__
    tell(settings, failed(str(key), line))


def run_job(key: str, settings: Settings, credits: Credits, *,
            again: bool = False) -> dict[str, Any]:
    """One job: ``{"reused": bool, "manifest": ...}``. Transient faults propagate (the task
    retries them); anything else that stops this source is a JobFailed with its one line.
    ``again``: the job started before and never ended (its worker died)."""
    from imgwarm.pipeline.optimize import optimize_key

    try:
        outcome = optimize_key(key, settings=settings, stores=process_stores(settings),
                               credits=credits, again=again)
    except (TransientError, FormatTooNew):  # retried; left for a newer worker
        raise
    except SoftTimeLimitExceeded:
        fail(key, f"took longer than {settings.queue.task_soft_time_limit:g} s "
             "(task_soft_time_limit)", settings, credits)
    except ImgwarmError as error:
        raise JobFailed(str(error)) from None
    from imgwarm.events.out import published

    # after the manifest and the journal, never before: a follower woken by it finds them
    tell(settings, published(outcome.manifest))
    # "reused" first: the worker log shows the start of the result, and this is what counts
    return {"reused": outcome.reused, "manifest": outcome.manifest.model_dump(mode="json")}


def give_up(key: str, lost: int, settings: Settings, credits: Credits) -> NoReturn:
    """A job whose worker process died ``lost`` times (a source that crashes a decoder or
    eats all memory would otherwise be handed out for ever): fail it, for good."""
    fail(key, f"its worker process died {lost} times while making it (out of memory, or a "
         "crash); not tried again (task_max_lost)", settings, credits)


def fail(key: str, reason: str, settings: Settings, credits: Credits) -> NoReturn:
    """End a job that did not fail on its image, with the reason recorded in the manifest
    store (as one that may pass: enqueueing the same bytes again makes them again)."""
    from imgwarm.pipeline.optimize import record_failure

    with contextlib.suppress(ImgwarmError):  # the job fails all the same, with its reason
        record_failure(key, None, reason, settings=settings, stores=process_stores(settings),
                       credits=credits)
    raise JobFailed(f"{key}: {reason}")


def first_look(settings: Settings) -> None:
    """Before a job touches the store: FormatTooNew (``leave_for_newer``) when its format is
    newer than this worker knows."""
    from imgwarm.store.format import WRITE

    process_stores(settings).check(WRITE)


def leave_for_newer(task: Any, settings: Settings, error: FormatTooNew) -> NoReturn:
    """A job that met a store newer than this worker knows (a rollout under way: before it
    began, or mid-way, once the record was read again, format_refresh): put it back on the
    queue for a newer worker and end this try as a retry: no failure recorded, no
    ``failed`` event, and the try not counted against task_max_retries. It is looked at
    again after retry_backoff_max, by whichever worker takes it. (Stopped mid-way, what it
    had written is what a killed job leaves: the next run, or gc, finishes it.)"""
    wait = settings.queue.retry_backoff_max
    again = task.signature_from_request(task.request, countdown=wait,
                                        retries=task.request.retries)
    try:
        again.apply_async()
    except Exception:  # the broker away: this delivery goes back to the queue instead
        raise Reject(str(error), requeue=True) from None
    raise Retry(str(error), exc=error, when=wait, sig=again) from None


def starts_key(job_id: str) -> str:
    """Redis key counting a job's starts that did not end (its worker process died)."""
    return f"imgwarm:starts:{job_id}"


class StartCounter:
    """Counts, in the result backend's Redis, the starts of a job that never ended. The count
    is cleared when the job ends in any way; a job queued again has a new id."""

    def __init__(self, app: Celery, settings: Settings) -> None:
        self.client = getattr(app.backend, "client", None)  # None: not a Redis backend
        self.ttl = int(settings.queue.visibility_timeout * (settings.queue.task_max_lost + 2))

    def start(self, job: str) -> int:
        """How many times the job has started without ending, this time included."""
        if self.client is None:
            return 1
        try:
            count, _ = self.client.pipeline().incr(starts_key(job)).expire(
                starts_key(job), self.ttl).execute()
        except Exception:  # Redis away for a moment: do the work rather than refuse it
            return 1
        return int(count)

    def end(self, job: str) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.delete(starts_key(job))


def run_delete(key: str, original: bool, settings: Settings, *,
               when_gone: bool = False) -> dict[str, Any]:
    """One takedown: what it removed. Transient faults propagate (the task retries them: a
    delete goes on from where it stopped); anything else is a JobFailed with its line."""
    from imgwarm.events.out import deleted
    from imgwarm.lifecycle.delete import delete

    try:
        done = delete(key, process_stores(settings), original=original, when_gone=when_gone)
    except (TransientError, FormatTooNew):
        raise
    except ImgwarmError as error:
        raise JobFailed(about(key, error)) from None
    if not done.back:  # (an original uploaded anew: nothing was taken down)
        tell(settings, deleted(key, done.variants))
    return done.to_object()


def register(app: Celery, settings: Settings) -> None:
    """Add the optimize, delete and slice tasks to a worker's app."""

    starts = StartCounter(app, settings)

    def on_failure(task: Any, error: BaseException, task_id: str, args: Any, kwargs: Any,
                   info: Any) -> None:
        """Celery calls this once a job has failed for good (never for a retry: a transient
        fault whose retries ran out is re-raised and ends here too)."""
        key = args[0] if args else kwargs.get("source_key", "?")
        tell_failed(settings, key, error)

    @worker_process_init.connect(weak=False)  # type: ignore[untyped-decorator]
    def _start_process(**_: Any) -> None:
        from imgwarm.pipeline import optimize  # noqa: F401  (import once, before the first job)
        from imgwarm.pipeline.budget import steady_malloc
        from imgwarm.pipeline.vipsutil import configure_libvips
        from imgwarm.pipeline.worker import capture_stdout

        steady_malloc()  # a pool process's peak must not grow with the jobs it made before
        configure_libvips(parallel_sources=2)  # one libvips thread per process
        capture_stdout()  # what a library prints from a file: a warning, not the worker's log

    # every task: retried on a transient fault with backoff; JobFailed an expected end
    # (logged in one line, without a traceback)
    retried: dict[str, Any] = {
        "bind": True, "autoretry_for": (TransientError,), "throws": (JobFailed,),
        "retry_backoff": 1, "retry_backoff_max": int(settings.queue.retry_backoff_max),
        "retry_jitter": True, "max_retries": settings.queue.task_max_retries}

    @app.task(  # type: ignore[untyped-decorator]
        name=TASK_NAME,
        **retried,
        on_failure=on_failure,
    )
    def optimize(
        self: Any, source_key: str, description: str | None = None,
        copyright: str | None = None, artist: str | None = None,
    ) -> dict[str, Any]:
        try:
            first_look(settings)
        except FormatTooNew as error:
            leave_for_newer(self, settings, error)
        started = starts.start(self.request.id)
        try:
            try:
                credits = Credits.given(description, copyright, artist)
            except ImgwarmError as error:  # sent by a client that did not check it
                raise JobFailed(f"{source_key}: {error}") from None
            if started > settings.queue.task_max_lost:
                give_up(source_key, started - 1, settings, credits)
            return run_job(source_key, settings, credits, again=started > 1)
        except FormatTooNew as error:
            leave_for_newer(self, settings, error)
        finally:
            from imgwarm.pipeline.budget import give_back

            give_back()  # the job's memory back to the system: the pool process idles small
            starts.end(self.request.id)


    @app.task(  # type: ignore[untyped-decorator]
        name=DELETE_TASK,
        **retried,
    )
    def delete(self: Any, source_key: str, original: bool = False,
               when_gone: bool = False) -> dict[str, Any]:
        try:
            first_look(settings)
            return run_delete(source_key, original, settings, when_gone=when_gone)
        except FormatTooNew as error:
            leave_for_newer(self, settings, error)

    @app.task(  # type: ignore[untyped-decorator]
        name=SLICE_TASK,
        **retried,
    )
    def slice_of(self: Any, kind: str, shard: str, repair: bool = False,
                 grace: float | None = None, now: float | None = None,
                 dry_run: bool = False) -> dict[str, Any]:
        options = {"repair": repair, "grace": grace, "now": now, "dry_run": dry_run}
        try:
            return run_slice(kind, shard, settings, options)
        except FormatTooNew as error:
            leave_for_newer(self, settings, error)


def run_slice(kind: str, shard: str, settings: Settings, options: dict[str, Any]
              ) -> dict[str, Any]:
    """One slice of fsck or gc --full: its report. Transient faults propagate (the task
    retries them: the slice is done again, as a whole pass may be); anything else is a
    JobFailed with its line, naming the slice."""
    from imgwarm.lifecycle.fanout import run_slice as run

    try:
        return run(kind, shard, settings, **options)
    except (TransientError, FormatTooNew):
        raise
    except SoftTimeLimitExceeded:
        raise JobFailed(f"{kind} slice {shard}: took longer than the queue's "
                        "visibility_timeout (run it with more --shards)") from None
    except (ImgwarmError, ValueError, TypeError) as error:
        raise JobFailed(f"{kind} slice {shard}: {error}") from None


def worker_app(settings: Settings) -> Celery:
    """The app a worker runs: the queue's app with the optimize task on it."""
    app = make_app(settings.queue, role="worker")
    register(app, settings)
    return app
