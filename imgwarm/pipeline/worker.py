"""One worker process of the pool (``isolate.py``): its start, the socket to it, what native
code prints in it, and its life on the other side (``serve``).

Its stdout and stderr are a file of its own (unlinked, created by the caller), never the
caller's: libultrahdr, for one, prints XML parse errors with text from the file to fd 1, which
would land in ``optimize --json``'s output and on the terminal. What a job printed is read back
after the job and becomes one warning of the source; what a crashed worker printed last (glibc's
"double free", say) is read by the caller and said with the crash. A Celery pool process, which
also makes one source at a time, captures its fd 1 alike (``capture_stdout``).

A worker ends with its caller: when the caller is gone (SIGKILL, an unhandled SIGTERM) its end
of the socket closes, and a thread that waits for exactly that ends the worker at once, even in
the middle of a long decode; an answer that finds no one to read it ends the worker quietly,
never with a BrokenPipeError traceback.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from imgwarm import exceptions
from imgwarm.pipeline.budget import libc
from imgwarm.text import decode_mixed, printable

if TYPE_CHECKING:
    from imgwarm.pipeline.made import Made

_START = "import sys; from imgwarm.pipeline.worker import serve; serve(*map(int, sys.argv[1:]))"
START_TIMEOUT = 120.0  # seconds a new worker may take to be ready (imports, on a busy machine)
_PRINTED_READ = 4096  # bytes of a job's printing read back: a warning needs a line, not a log
_PRINTED_SHOWN = 240  # characters of it said in a warning or a crash's line


class _Died(Exception):
    """The worker process ended while it held a job."""

    def __init__(self, exitcode: int | None, printed: str) -> None:
        super().__init__(exitcode)
        self.exitcode = exitcode
        self.printed = printed


class _NotStarted(Exception):
    """The worker process could not be started, or ended before it was ready (why in str)."""


class _Overdue(Exception):
    """The job ran past its deadline; the worker has been killed."""


def shown(raw: bytes) -> str:
    """What a native library printed, as one bounded line of printable text (it may quote
    the file: escape sequences and odd bytes are shown, never sent to a terminal)."""
    text = " ".join(decode_mixed(raw).split())
    if len(text) > _PRINTED_SHOWN:
        text = text[:_PRINTED_SHOWN].rstrip() + "..."
    return printable(text)


class Worker:
    """One worker process, the socket to it and the file its stdout and stderr go to.
    OSError when the process cannot be started (out of memory, a limit on processes)."""

    def __init__(self, parallel: int) -> None:
        self.ready = False
        self.printed = tempfile.TemporaryFile()  # noqa: SIM115  (lives as long as the worker)
        try:
            ours, theirs = socket.socketpair()
            with ours, theirs:
                # The same modules as here, wherever they came from (a checkout, a test's path).
                env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
                # two malloc arenas, not eight a core: libvips' threads each take one, and
                # what one frees another cannot reuse (the tree's peak 2.5% lower, measured
                # with bench/optimize.py); a value the user set is kept
                env.setdefault("MALLOC_ARENA_MAX", "2")
                self.process = subprocess.Popen(
                    [sys.executable, "-c", _START, str(theirs.fileno()), str(parallel)],
                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                    stdout=self.printed, stderr=self.printed, env=env)
                # The worker holds the only other end: its death is our end of file.
                self.conn = Connection(ours.detach())
        except BaseException:
            self.printed.close()
            raise

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def last_printed(self) -> str:
        """The last line the worker printed (since its last job), for a start or a crash."""
        try:
            raw = os.pread(self.printed.fileno(), 1 << 16, 0)
        except OSError:
            return ""
        lines = [line for line in raw.splitlines() if line.strip()]
        return shown(lines[-1]) if lines else ""

    def wait_ready(self) -> None:
        """Return once the worker has said it is ready; _NotStarted if it ended first or took
        longer than START_TIMEOUT (it is then killed)."""
        if self.ready:
            return
        try:
            if not self.conn.poll(START_TIMEOUT):
                self.kill()
                raise _NotStarted(f"it was not ready within {START_TIMEOUT:g} s")
            self.conn.recv()
        except (EOFError, OSError):
            code = self._ended()
            said = self.last_printed()
            raise _NotStarted(f"it ended as it started (status {code})"
                             + (f": {said}" if said else "")) from None
        self.ready = True

    def call(self, job: tuple[Any, ...], timeout: float | None) -> tuple[str, Any]:
        """("value", result) or ("raise", error), within ``timeout`` seconds (None: no limit).
        _Died when the process ended first, _Overdue (and the process killed) past the time."""
        try:
            self.conn.send(job)
            if not self.conn.poll(timeout):
                self.kill()
                raise _Overdue()
            answer: tuple[str, Any] = self.conn.recv()
        except (EOFError, OSError):
            raise _Died(self._ended(), self.last_printed()) from None
        return answer

    def _ended(self) -> int | None:
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        self.conn.close()  # the worker reads its end of file and returns
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        self.printed.close()


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


def _end_with_caller(fd: int) -> None:
    """End this process as soon as the caller's end of ``fd`` closes (the caller is gone, or
    done), whatever the main thread is doing: a worker never outlives its caller's batch."""
    watch = select.poll()
    watch.register(fd, select.POLLRDHUP)  # the peer's close only, never its data
    while not watch.poll():
        pass
    os._exit(0)


def printed_since() -> bytes:
    """What this process printed to fd 1 (in a worker, fd 2 too: one file) since the last
    call, which empties it. C stdio buffers a file's writes: flushed first, or a line would
    come a job late."""
    flush = getattr(libc(), "fflush", None)
    if flush is not None:
        flush(None)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        raw = os.pread(1, _PRINTED_READ, 0)
        os.ftruncate(1, 0)
        os.lseek(1, 0, os.SEEK_SET)  # (fd 2 shares this offset: one open file)
    except OSError:  # not a file (started by hand): nothing to read back
        return b""
    return raw


def noted(made: Made, raw: bytes) -> Made:
    """``made`` with what native code printed while making it as one more warning."""
    text = shown(raw)
    if not text:
        return made
    return replace(made, warnings=[*made.warnings,
                                   f"a library printed while reading it: {text}"])


_CAPTURING: list[bool] = []


def capture_stdout() -> None:
    """Make this process's fd 1 a file of its own, read back after each source made here
    (``InProcess``): for a Celery pool process, which makes one source at a time and whose
    fd 1 is the worker's log. Its fd 2 stays: Celery logs there."""
    with tempfile.TemporaryFile() as own:
        os.dup2(own.fileno(), 1)
    _CAPTURING.append(True)


def capturing() -> bool:
    return bool(_CAPTURING)


def serve(fd: int, parallel: int) -> None:
    """A worker's life: jobs in, answers out, until the caller closes its end of ``fd``."""
    conn = Connection(fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    threading.Thread(target=_end_with_caller, args=(fd,), daemon=True).start()
    from imgwarm.pipeline import make
    from imgwarm.pipeline.budget import give_back, steady_malloc
    from imgwarm.pipeline.made import Made
    from imgwarm.pipeline.vipsutil import configure_libvips

    steady_malloc()
    configure_libvips(parallel)
    steps: dict[str, Callable[..., Any]] = {"make": make.make, "preview": make.preview}
    printed_since()  # what starting printed is no source's
    _send(conn, ("ready",))
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
        give_back()  # (the job's images are gone with its frame: its memory can go back)
        printed = printed_since()
        if isinstance(answer[1], Made):
            answer = ("value", noted(answer[1], printed))
        _send(conn, answer)


def _send(conn: Connection, message: tuple[str, Any] | tuple[str]) -> None:
    try:
        conn.send(message)
    except OSError:  # the caller is gone (killed, or stopped waiting): end quietly
        os._exit(0)
