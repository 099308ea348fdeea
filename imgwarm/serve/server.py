"""Serve: nginx running a gallery's config on a loopback port, in the foreground, until it is
stopped (Ctrl-C, SIGTERM). For trying the output in a browser at once; a real server
includes the config ``imgwarm nginx`` (or ``imgwarm gallery``) writes in its own nginx."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from imgwarm.config import Settings
from imgwarm.exceptions import NginxError
from imgwarm.serve.gallery import gallery_config
from imgwarm.serve.nginx import main_config

START_SECONDS = 15.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def serve(settings: Settings, folder: Path, *, port: int | None = None,
          binary: str = "nginx", ready: Callable[[str], None] = print) -> int:
    """Run nginx on the gallery in ``folder`` at http://127.0.0.1:PORT/ (a free port unless
    given) until it stops; ``ready`` is told the URL once nginx answers. Returns nginx's exit
    status (0 after Ctrl-C or SIGTERM). NginxError when nginx is missing or does not start."""
    found = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise NginxError("imgwarm serve needs nginx (apt-get install nginx); or include the "
                         f"config in {folder} in your own nginx")
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="imgwarm-serve-") as temp:
        here = Path(temp)
        config = gallery_config(settings, folder, listen=f"127.0.0.1:{port}",
                                access_log=str(here / "access.log"))
        (here / "imgwarm.conf").write_text(config.whole, encoding="utf-8")
        # nginx's workers read the files as the gallery's owner (as root, nginx would
        # otherwise drop to nobody, who may not reach a home folder)
        user = _owner(folder) if os.geteuid() == 0 else None
        (here / "nginx.conf").write_text(
            main_config(here, f"include {here}/imgwarm.conf;\n", user=user), encoding="utf-8")
        if not _free(port):
            raise NginxError(f"127.0.0.1:{port} is taken by another program: give another "
                             "port, or none (a free one is picked)")
        # its own process group: nginx's workers are stopped with their master, whatever
        # stops it (a killed master leaves its workers holding the port otherwise)
        process = subprocess.Popen([found, "-p", temp, "-c", str(here / "nginx.conf"),
                                    "-g", "daemon off;"], start_new_session=True)
        # SIGTERM (a service manager, `timeout`) stops it as Ctrl-C does; a handler can only
        # be set from the main thread
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
        try:
            _started(process, port, here)
            ready(f"http://127.0.0.1:{port}/")
            return process.wait()
        except KeyboardInterrupt:
            return 0
        finally:
            if main and previous is not None:
                signal.signal(signal.SIGTERM, previous)
            _stop(process)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Finish the requests under way (SIGQUIT), then the whole group, workers included."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGQUIT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # workers left behind by a master gone
    process.wait()


def _owner(folder: Path) -> str:
    """``user NAME GROUP`` for nginx: without a group it takes the group named as the user,
    which many users do not have."""
    info = folder.stat()
    try:
        name = pwd.getpwuid(info.st_uid).pw_name
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:  # ids with no name (a container's volume): nginx takes numbers neither
        return "root root" if info.st_uid == 0 else "nobody nogroup"
    return f"{name} {group}"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _started(process: subprocess.Popen[bytes], port: int, here: Path) -> None:
    """Until this nginx answers on the port (its pid file written: not another program)."""
    deadline = time.monotonic() + START_SECONDS
    while not ((here / "nginx.pid").exists() and _listening(port) and process.poll() is None):
        if process.poll() is not None or time.monotonic() > deadline:
            log = here / "error.log"
            said = log.read_text(errors="replace").strip() if log.exists() else ""
            raise NginxError(f"nginx did not start on 127.0.0.1:{port}: "
                             f"{said.replace(str(here), '<config>') or 'no message'}")
        time.sleep(0.05)
