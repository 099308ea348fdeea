"""Where the pixel work runs: in this process, or in worker processes that may die alone.

The decoders and encoders are C (libjpeg, libpng, libwebp, libavif, lcms, OpenCV): a bug in
one of them on one file is a segfault or an abort, and in a thread it takes the whole batch
with it. ``Isolated`` runs each source's pixel work (probe, decode, resize, encode: all of
``make.py``) in one of N worker processes, one source at a time each; the caller's thread
only reads the source, and writes the files and the manifest once the worker has answered.
When a worker dies, the source it held fails with one line (``DecoderCrashed``), nothing of it
has been written, and a new worker takes the next source.

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

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from imgwarm import exceptions
from imgwarm.exceptions import DecoderCrashed

if TYPE_CHECKING:  # (not loaded to start workers ahead: ``prestart`` runs before pydantic is)
    from imgwarm.config import ImageSettings
    from imgwarm.manifest import Credits, Placeholder
    from imgwarm.pipeline.made import Made


class PixelWork(Protocol):
    """The pixel steps of one source, wherever they run (see ``make.make`` and
    ``make.preview``)."""

    def make(self, data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made: ...

    def preview(self, data: bytes, name: str, settings: ImageSettings) -> Placeholder: ...


class InProcess:
    """The pixel work in the calling process (the Python API, a queue worker's job)."""

    def make(self, data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made:
        from imgwarm.pipeline import make

        return make.make(data, name, settings, given)

    def preview(self, data: bytes, name: str, settings: ImageSettings) -> Placeholder:
        from imgwarm.pipeline import make

        return make.preview(data, name, settings)


IN_PROCESS = InProcess()


class _Died(Exception):
    """The worker process ended while it held a job."""

    def __init__(self, exitcode: int | None) -> None:
        super().__init__(exitcode)
        self.exitcode = exitcode


def _what_ended(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown signal"
        if -exitcode == signal.SIGKILL:
            return f"the process making it was killed (signal {-exitcode}, {name}: out of memory?)"
        return f"the decoder crashed on this file (signal {-exitcode}, {name})"
    return f"the process making it exited unexpectedly (status {exitcode})"


_START = "import sys; from imgwarm.pipeline.isolate import serve; serve(*map(int, sys.argv[1:]))"


_READY: list[_Worker] = []  # started ahead (``prestart``), for the next Isolated to take


def prestart(count: int) -> None:
    """Start ``count`` workers now, before the caller loads its settings and lists its
    sources: a worker's start (about a second: libvips, numpy, pydantic) then overlaps the
    caller's own, and the first source does not wait for it. The next ``Isolated`` takes
    them; any it does not need are stopped, and all end with this process."""
    while len(_READY) < count:
        _READY.append(_Worker(count))


class _Worker:
    """One worker process and the socket to it."""

    def __init__(self, parallel: int) -> None:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            # The same modules as here, wherever they came from (a checkout, a test's path).
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            self.process = subprocess.Popen(
                [sys.executable, "-c", _START, str(theirs.fileno()), str(parallel)],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
            # The worker holds the only other end: its death is our end of file.
            self.conn = Connection(ours.detach())

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def call(self, job: tuple[Any, ...]) -> tuple[str, Any]:
        """("value", result) or ("raise", error); _Died when the process ended first."""
        try:
            self.conn.send(job)
            answer: tuple[str, Any] = self.conn.recv()
        except (EOFError, OSError):
            try:
                code: int | None = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            raise _Died(code) from None
        return answer

    def stop(self) -> None:
        self.conn.close()  # the worker reads its end of file and returns
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Isolated:
    """``PixelWork`` in ``workers`` processes, each doing one source at a time; use it as a
    context manager (the processes end with it). Thread-safe: as many calls at once as
    workers, the others wait."""

    def __init__(self, workers: int) -> None:
        self._parallel = workers
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()  # guards _all
        ready = [w for w in _READY if w.alive()]
        for extra in (*ready[workers:], *(w for w in _READY if w not in ready)):
            extra.stop()
        _READY.clear()
        for worker in ready[:workers]:
            self._all.append(worker)
            self._idle.put(worker)
        for _ in range(workers - len(self._all)):
            self._idle.put(self._start())

    def _start(self) -> _Worker:
        worker = _Worker(self._parallel)
        with self._lock:
            self._all.append(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        worker.stop()
        with self._lock:
            self._all.remove(worker)
        return self._start()

    def _run(self, name: str, job: tuple[Any, ...]) -> Any:
        worker = self._idle.get()
        if not worker.alive():  # ended while idle (killed from outside): not this
            worker = self._replace(worker)  # source's doing
        try:
            kind, value = worker.call(job)
        except _Died as died:
            self._idle.put(self._replace(worker))  # the next source gets a fresh process
            raise DecoderCrashed(name, _what_ended(died.exitcode)) from None
        except BaseException:  # Ctrl-C mid-job: its answer may still come; never reuse it
            self._idle.put(self._replace(worker))
            raise
        self._idle.put(worker)
        if kind == "raise":
            raise value
        return value

    def make(self, data: bytes, name: str, settings: ImageSettings, given: Credits) -> Made:
        made: Made = self._run(name, ("make", self._parallel, data, name, settings, given))
        return made

    def preview(self, data: bytes, name: str, settings: ImageSettings) -> Placeholder:
        found: Placeholder = self._run(name, ("preview", self._parallel, data, name, settings))
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


def _portable(error: BaseException) -> BaseException:
    """The error as the caller's process can rebuild it without importing pyvips: our own
    classes by their nearest public one, anything else as its text."""
    if isinstance(error, exceptions.ImgwarmError):
        for kind in type(error).__mro__:
            if kind.__module__ == exceptions.__name__:
                if isinstance(error, exceptions.SourceError):
                    return kind(error.source, error.reason)  # type: ignore[no-any-return]
                return kind(*error.args)  # type: ignore[no-any-return]
    return RuntimeError(f"{type(error).__name__}: {error}")


def serve(fd: int, parallel: int) -> None:
    """A worker's life: jobs in, answers out, until the caller closes its end of ``fd``."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    from imgwarm.pipeline import make
    from imgwarm.pipeline.vipsutil import configure_libvips

    configure_libvips(parallel)
    steps: dict[str, Callable[..., Any]] = {"make": make.make, "preview": make.preview}
    while True:
        try:
            kind, wanted, *arguments = conn.recv()
            if wanted != parallel:  # started ahead for another count of workers
                parallel = wanted
                configure_libvips(parallel)
        except (EOFError, OSError):
            # The caller is done: nothing to flush or tidy, so skip the interpreter's teardown
            # (unloading libvips, numpy and their threads took 0.2 s a worker, in series).
            os._exit(0)
        try:
            answer: tuple[str, Any] = ("value", steps[kind](*arguments))
        except Exception as error:
            answer = ("raise", _portable(error))
        conn.send(answer)
