"""Where the pixel work runs: in this process, or in worker processes that may die alone.

The decoders and encoders are C (libjpeg, libpng, libwebp, libavif, lcms, OpenCV): a bug in
one of them on one file is a segfault or an abort, and in a thread it takes the whole batch
with it. ``Isolated`` runs each source's pixel work (probe, decode, resize, encode: all of
``make.py``) in one of N worker processes, one source at a time each; the caller's thread
only reads the source, and writes the files and the manifest once the worker has answered.
When a worker dies, the source it held fails with one line (``DecoderCrashed``), nothing of it
has been written, and a new worker takes the next source. A job has a deadline (the setting
``job_timeout``): past it, its worker is killed and the source fails (``JobTimedOut``). A worker
that cannot be started (out of memory, a limit on processes) is tried again with backoff; when
none can be, the sources that need one fail (``NoWorker``), never wait. The process itself, its
stdout and stderr, and its end with the caller: ``worker.py``.

Workers are new interpreters, not forks: importing pyvips already starts threads, and a fork
of a threaded process may inherit a held lock. They are started as ``python -c`` on one end
of a socket pair, the other end a ``multiprocessing`` Connection (pickled messages), rather
than with multiprocessing's "spawn", which would import the caller's main script again in
every worker (a script without a ``__main__`` guard would start workers from its workers)
and start a resource-tracker process besides. The caller's process never imports pyvips, so
the workers' start-up (about half a second, on every core at once) replaces the import the
batch made before. ``concurrent.futures.ProcessPoolExecutor`` could not serve: one dead
worker breaks the whole pool (BrokenProcessPool), and ``multiprocessing.Pool`` waits for
ever on a task whose worker died.

Queued jobs need none of this: Celery's prefork pool already runs each job in a process of
its own and fails it alone when that process dies (``workers/task.py``).
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from imgwarm.exceptions import DecoderCrashed, JobTimedOut, NoWorker
from imgwarm.pipeline.worker import Worker, _Died, _NotStarted, _Overdue

if TYPE_CHECKING:  # (not loaded to start workers ahead: ``prestart`` runs before pydantic is)
    from imgwarm.carried import Credits, Placeholder
    from imgwarm.config import ImageSettings
    from imgwarm.pipeline.made import Made


class PixelWork(Protocol):
    """The pixel steps of one source, wherever they run (see ``make.make`` and
    ``make.preview``)."""

    def make(self, data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made: ...

    def preview(self, data: bytes, name: str, settings: ImageSettings) -> Placeholder: ...


class InProcess:
    """The pixel work in the calling process (the Python API, a queue worker's job)."""

    def make(self, data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made:
        from imgwarm.pipeline import make, worker

        if not worker.capturing():
            return make.make(data, name, settings, given)
        worker.printed_since()  # what came before is no source's
        made = make.make(data, name, settings, given)
        return worker.noted(made, worker.printed_since())

    def preview(self, data: bytes, name: str, settings: ImageSettings) -> Placeholder:
        from imgwarm.pipeline import make

        return make.preview(data, name, settings)


IN_PROCESS = InProcess()


def _what_ended(exitcode: int | None, printed: str) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown signal"
        if -exitcode == signal.SIGKILL:
            what = f"the process making it was killed (signal {-exitcode}, {name}: out of memory?)"
        else:
            what = f"the decoder crashed on this file (signal {-exitcode}, {name})"
    else:
        what = f"the process making it exited unexpectedly (status {exitcode})"
    return f"{what}; it printed: {printed}" if printed else what


_READY: list[Worker] = []  # started ahead (``prestart``), for the next Isolated to take

# Waits before each try to start a worker: a fault that passes (memory freed after an OOM
# kill) is ridden out; while starts keep failing, each source that needs one tries once.
_BACKOFF = (0.0, 0.2, 0.5, 1.0, 2.0)


def prestart(count: int) -> None:
    """Start ``count`` workers now, before the caller loads its settings and lists its
    sources: a worker's start (about a second: libvips, numpy, pydantic) then overlaps the
    caller's own, and the first source does not wait for it. The next ``Isolated`` takes
    them; any it does not need are stopped, and all end with this process. A worker that
    cannot be started now is started when a source needs it."""
    while len(_READY) < count:
        try:
            _READY.append(Worker(count))
        except OSError:
            return


class Isolated:
    """``PixelWork`` in ``workers`` processes, each doing one source at a time; use it as a
    context manager (the processes end with it). Thread-safe: as many calls at once as
    workers, the others wait.

    A slot of the pool holds a worker, or None when its worker died and is to be started by
    the next source that takes the slot. A slot whose worker cannot be started is given up
    while other workers live (its sources wait for theirs); with none left, the source fails
    with ``NoWorker`` and the slot stays, so that the next source tries again: a batch never
    waits for a worker that will not come."""

    def __init__(self, workers: int) -> None:
        self._parallel = workers
        self._idle: queue.Queue[Worker | None] = queue.Queue()
        self._all: list[Worker] = []
        self._lock = threading.Lock()  # guards _all and _failing
        self._failing = False  # the last start failed after every try
        ready = [w for w in _READY if w.alive()]
        for extra in (*ready[workers:], *(w for w in _READY if w not in ready)):
            extra.stop()
        _READY.clear()
        for worker in ready[:workers]:
            self._all.append(worker)
            self._idle.put(worker)
        for _ in range(workers - len(self._all)):
            try:
                worker = Worker(self._parallel)  # ready or not, they start side by side
            except OSError:
                self._idle.put(None)
                continue
            self._all.append(worker)
            self._idle.put(worker)

    def _drop(self, worker: Worker) -> None:
        worker.stop()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)

    def _started(self) -> Worker:
        """A new worker, ready; _NotStarted with the last reason when every try failed."""
        with self._lock:
            waits = _BACKOFF[:1] if self._failing else _BACKOFF
        reason = ""
        for wait in waits:
            time.sleep(wait)
            try:
                worker = Worker(self._parallel)
            except OSError as error:
                reason = str(error)
                continue
            try:
                worker.wait_ready()
            except _NotStarted as error:
                worker.stop()
                reason = str(error)
                continue
            with self._lock:
                self._all.append(worker)
                self._failing = False
            return worker
        with self._lock:
            self._failing = True
        raise _NotStarted(reason)

    def _take(self, name: str) -> Worker:
        """A ready worker for the source ``name`` (waiting for one while all are busy)."""
        while True:
            worker = self._idle.get()
            if worker is not None:
                try:
                    worker.wait_ready()
                    if worker.alive():
                        return worker
                except _NotStarted:
                    pass
                self._drop(worker)  # ended while idle (killed from outside): not this source's
            try:
                return self._started()
            except _NotStarted as error:
                with self._lock:
                    others = bool(self._all)
                if not others:
                    self._idle.put(None)
                    raise NoWorker(name, f"no worker process could be started: {error}") \
                        from None
                # others still work: this slot is given up, and the source waits for theirs

    def _run(self, name: str, job: tuple[Any, ...], timeout: float) -> Any:
        worker = self._take(name)
        try:
            kind, value = worker.call(job, timeout)
        except BaseException as error:  # (Ctrl-C mid-job: its answer may still come)
            self._drop(worker)  # never reused: the next source starts a fresh process
            self._idle.put(None)
            if isinstance(error, _Died):
                raise DecoderCrashed(name, _what_ended(error.exitcode, error.printed)) from None
            if isinstance(error, _Overdue):
                from imgwarm.config.units import duration_text

                raise JobTimedOut(name, f"took longer than {duration_text(timeout)} "
                                  "(job_timeout): its process was stopped") from None
            raise
        self._idle.put(worker)
        if kind == "raise":
            raise value
        return value

    def make(self, data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made:
        # (the settings as plain data: a worker never loads pydantic, imageoptions.py)
        made: Made = self._run(name, ("make", self._parallel, data, name, settings.options(),
                                      given), settings.job_timeout)
        return made

    def preview(self, data: bytes, name: str, settings: ImageSettings) -> Placeholder:
        found: Placeholder = self._run(
            name, ("preview", self._parallel, data, name, settings.options()),
            settings.job_timeout)
        return found

    def pids(self) -> list[int]:
        """The worker processes' ids (for monitoring, and for tests that kill one)."""
        with self._lock:
            return [w.pid for w in self._all]

    def close(self) -> None:
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:  # every worker told first: they end together
            worker.conn.close()
        for worker in workers:
            worker.stop()

    def __enter__(self) -> Isolated:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
