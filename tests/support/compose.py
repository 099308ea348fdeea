"""docker/compose.yaml brought up as a user does (docker-compose 1.29, its own project name, a
free host port for nginx), and driven from the test: services stopped, started, restarted and
scaled, health states read, files fetched through nginx, the S3 service's published port."""

from __future__ import annotations

import http.client
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from tests.support import parts
from tests.support.docker import Engine

T = TypeVar("T")


@dataclass(frozen=True)
class Reply:
    """What nginx answered: status, headers (lower-case names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Stack:
    """One compose project on an engine."""

    docker: Engine
    project: str
    files: list[Path]
    env_file: Path
    http_port: int

    def compose(self, *args: str, timeout: float = 300,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [parts.binary("docker-compose"), "-p", self.project, "--env-file",
                str(self.env_file)]
        for file in self.files:
            argv += ["-f", str(file)]
        done = subprocess.run([*argv, *args], env=self.docker.env(), capture_output=True,
                              text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            pytest.fail(f"docker-compose {' '.join(args)} failed ({done.returncode}): "
                        f"{done.stdout[-1500:]}{done.stderr[-2500:]}", pytrace=False)
        return done

    def ids(self, service: str) -> list[str]:
        """The containers of a service, running or not."""
        return self.compose("ps", "-q", "-a", service).stdout.split()

    def state(self, container: str) -> str:
        """``healthy``, ``unhealthy``, ``starting``, or the run state of a container without
        a health check (``running``, ``exited 0``...)."""
        template = ("{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}"
                    " {{.State.ExitCode}}{{end}}")
        return self.docker.run("inspect", "--format", template, container).stdout.strip()

    def wait_healthy(self, *services: str, timeout: float = 300) -> None:
        """Until every container of each service says healthy (fails with their states and
        the last lines of their logs when the time is up)."""
        def states() -> dict[str, str]:
            return {f"{s}:{c[:12]}": self.state(c) for s in services for c in self.ids(s)}

        found = until(lambda: (lambda now: now if now and all(
            v == "healthy" for v in now.values()) else None)(states()), timeout)
        if found is None:
            logs = self.compose("logs", "--no-color", "--tail", "30", *services,
                                check=False).stdout
            pytest.fail(f"not healthy: {states()}\n{logs[-4000:]}", pytrace=False)

    def port(self, service: str, private: int) -> int:
        """The host port published for a service's ``private`` port."""
        found = self.compose("port", service, str(private)).stdout.strip()
        return int(found.rsplit(":", 1)[1])

    def exec(self, service: str, *argv: str, index: int = 1,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.compose("exec", "-T", "--index", str(index), service, *argv, check=check)

    def get(self, path: str) -> Reply:
        """GET ``path`` from nginx on its published port."""
        connection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()},
                         response.read())
        finally:
            connection.close()


def free_port() -> int:
    """A TCP port nothing listens on now, for a service to publish."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def until(probe: Callable[[], T | None], timeout: float, pause: float = 1.0) -> T | None:
    """``probe()`` again until it gives something, or None when ``timeout`` seconds passed
    (a wait for a state, never a measure of time)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None or time.monotonic() > deadline:
            return found
        time.sleep(pause)
