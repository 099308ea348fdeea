"""The long-running commands stop on SIGTERM or Ctrl-C and put the handlers they found back:
a process forked after one ran in-process (a test's CliRunner, an app embedding the CLI)
still dies of SIGTERM, so ``multiprocessing.Pool.terminate`` does not wait on it for ever."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from imgwarm.cli.signals import stopped_by_signals, then_interrupt
from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.store import Stores
from tests.support.cli import Cli
from tests.support.images import jpeg_with_exif, photo
from tests.support.sites import settings_env


def _dies_of_sigterm() -> bool:
    """A child forked now, sent SIGTERM: did it die of it (within 10 s)?"""
    pid = os.fork()
    if pid == 0:  # the child: waits to be ended
        time.sleep(30)
        os._exit(0)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False


def test_a_signal_in_the_block_stops_and_the_handlers_are_put_back() -> None:
    before = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)}
    stopped = threading.Event()
    with stopped_by_signals(stopped.set):
        os.kill(os.getpid(), signal.SIGTERM)  # handled before kill returns: this is our thread
        assert stopped.wait(5)
        stopped.clear()
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C asks the same, no KeyboardInterrupt
        assert stopped.wait(5)
    assert {n: signal.getsignal(n) for n in before} == before
    assert _dies_of_sigterm()


def test_the_handlers_are_put_back_when_the_block_fails() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RuntimeError), stopped_by_signals(lambda: None):
        assert signal.getsignal(signal.SIGTERM) != before
        raise RuntimeError("the command failed")
    assert signal.getsignal(signal.SIGTERM) == before


def test_off_the_main_thread_nothing_is_set_and_the_block_runs() -> None:
    ran: list[object] = []

    def block() -> None:
        with stopped_by_signals(lambda: None):
            ran.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=block)
    thread.start()
    thread.join(10)
    assert ran == [signal.SIG_DFL]


def test_a_second_signal_does_not_wait() -> None:
    stop = threading.Event()
    stopping = then_interrupt(stop)
    stopping()
    assert stop.is_set()
    with pytest.raises(KeyboardInterrupt):
        stopping()


def test_watch_run_in_process_leaves_sigterm_to_the_processes_forked_after(
        settings: Settings, tmp_path: Path, run_cli: Cli) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "listing.jpg").write_bytes(jpeg_with_exif(photo(640, 480, seed=3), quality=85))
    result = run_cli("watch", "--once", "--json", uploads, env=settings_env(settings))
    assert result.exit_code == 0, result.stderr
    assert '"event": "made"' in result.stdout
    made = [r for r in Stores.local(settings.store).manifests.everything()
            if isinstance(r, Manifest)]
    assert len(made) == 1 and made[0].variants
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert _dies_of_sigterm()
