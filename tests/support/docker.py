"""A Docker engine for the tests and the images the compose stack runs on it: the engine that
answers (DOCKER_HOST, /var/run/docker.sock), else a dockerd of Debian's docker.io started here
(as root) on a data root kept between runs; the upstream images stood in for by images built
from a debootstrap base (docker/standins/), and imgwarm's own image, each built once and cached.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import parts
from tests.support.files import REPO

# Outside the repository (CI runs a fresh clone): the daemon's data root, whose images and
# build layers make a second run fast.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "imgwarm-tests" / \
    "docker"
STANDINS = REPO / "docker" / "standins"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BASE = "imgwarm-standin/base:bookworm"
OURS = "imgwarm:local"  # what docker/compose.yaml names the image of docker/Dockerfile
# each stand-in's folder under docker/standins/, its tag, and the compose variable naming it
STANDIN_IMAGES = {
    "python": ("imgwarm-standin/python:3.11-slim", "PYTHON_IMAGE"),
    "redis": ("imgwarm-standin/redis:7.4", "REDIS_IMAGE"),
    "nginx": ("imgwarm-standin/nginx:1.27-alpine", "NGINX_IMAGE"),
    "seaweedfs": ("imgwarm-standin/seaweedfs:4.48", "SEAWEEDFS_IMAGE"),
}


_SHELL = frozenset(["PATH", "HOME", "USER", "LANG", "TMPDIR", "TERM", "XDG_CACHE_HOME",
                    "XDG_RUNTIME_DIR"])


@dataclass(frozen=True)
class Engine:
    """A Docker engine that answers at ``host`` (a DOCKER_HOST value)."""

    host: str

    def env(self, **extra: str) -> dict[str, str]:
        """The environment docker and docker-compose run in: this engine, the legacy builder
        (Debian's docker.io has no buildx), and of the test's own environment only what a
        shell needs: docker-compose takes a variable from its environment before the env file,
        so credentials another fixture exported (moto's AWS_*) would reach the stack."""
        kept = {k: v for k, v in os.environ.items() if k in _SHELL or k.startswith("LC_")}
        return {**kept, "DOCKER_HOST": self.host, "DOCKER_BUILDKIT": "0",
                "COMPOSE_DOCKER_CLI_BUILD": "0", **extra}

    def run(self, *args: str, timeout: float = 120, check: bool = True,
            stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        """``docker ARGS``; a failure (with ``check``) fails the test with docker's words."""
        done = subprocess.run([parts.binary("docker", "docker.io"), *args], env=self.env(),
                              input=stdin.decode("latin-1") if stdin is not None else None,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            pytest.fail(f"docker {' '.join(args[:3])}... failed: {done.stderr[-2000:]}",
                        pytrace=False)
        return done

    def has_image(self, name: str) -> bool:
        return self.run("image", "inspect", name, check=False, timeout=30).returncode == 0


def answers(host: str) -> bool:
    """Whether a Docker engine answers at ``host``."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run([docker, "version", "--format", "{{.Server.Version}}"],
                              env={**os.environ, "DOCKER_HOST": host}, capture_output=True,
                              timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


@contextlib.contextmanager
def engine() -> Iterator[Engine]:
    """The engine that answers; else a dockerd started here (root), stopped at the end with
    its data root kept in CACHE. One such dockerd at a time uses that root (a lock)."""
    parts.binary("docker", "docker.io")
    candidates = [os.environ.get("DOCKER_HOST", "")]
    if Path("/var/run/docker.sock").is_socket():
        candidates.append("unix:///var/run/docker.sock")
    for host in filter(None, candidates):
        if answers(host):
            yield Engine(host)
            return
    parts.root("starting dockerd for the compose stack")
    dockerd = parts.binary("dockerd", "docker.io")
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = Path(tempfile.mkdtemp(prefix="imgwarm-dockerd-"))  # short: socket paths
        host = f"unix://{run}/sock"
        log = open(run / "log", "wb")  # noqa: SIM115 (closed below)
        # No default bridge (-b none): another daemon on this machine may own docker0; the
        # stack's own network comes from an address pool no other daemon here uses, and
        # builds run on the host's network.
        daemon = subprocess.Popen(
            [dockerd, "--data-root", str(CACHE / "root"), "-H", host,
             "--pidfile", str(run / "pid"), "--exec-root", str(run / "exec"),
             "--bridge", "none", "--default-address-pool", "base=10.213.0.0/16,size=24"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 90
            while not answers(host):
                if daemon.poll() is not None or time.monotonic() > deadline:
                    tail = (run / "log").read_text(errors="replace")[-2000:]
                    pytest.fail(f"dockerd did not start: {tail}", pytrace=False)
                time.sleep(0.5)
            yield Engine(host)
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
            log.close()
            shutil.rmtree(run, ignore_errors=True)


def base_image(docker: Engine) -> str:
    """The debootstrap bookworm base every stand-in starts from, imported once."""
    if docker.has_image(BASE):
        return BASE
    parts.root("debootstrap")
    debootstrap = parts.binary("debootstrap")
    root = CACHE / "base-root"
    shutil.rmtree(root, ignore_errors=True)
    done = subprocess.run([debootstrap, "--variant=minbase",
                           "--include=python3,python3-venv,ca-certificates", "bookworm",
                           str(root)], capture_output=True, text=True, timeout=1200,
                          check=False)
    if done.returncode != 0:
        pytest.fail(f"debootstrap failed: {done.stdout[-1500:]}{done.stderr[-500:]}",
                    pytrace=False)
    tar = subprocess.run(["tar", "-C", str(root), "-c", "."], capture_output=True,
                         timeout=600, check=True)
    imported = subprocess.run([parts.binary("docker", "docker.io"), "import", "-", BASE],
                              input=tar.stdout, env=docker.env(), capture_output=True,
                              timeout=600, check=False)
    if imported.returncode != 0:
        pytest.fail(f"docker import failed: {imported.stderr.decode()[-1000:]}", pytrace=False)
    shutil.rmtree(root, ignore_errors=True)
    return BASE


def build(docker: Engine, tag: str, context: Path, dockerfile: Path | None = None,
          **args: str) -> None:
    """``docker build`` on the host's network (the daemon may have no bridge); the layers it
    has already are reused."""
    argv = ["build", "-q", "--network", "host", "-t", tag]
    if dockerfile is not None:
        argv += ["-f", str(dockerfile)]
    for name, value in args.items():
        argv += ["--build-arg", f"{name}={value}"]
    docker.run(*argv, str(context), timeout=1800)


def standins(docker: Engine) -> dict[str, str]:
    """Every stand-in built (the machine's CA bundle in each build context, for apt and pip:
    never in the repository); the compose variables that name them."""
    base_image(docker)
    if not CA_BUNDLE.is_file():
        parts.missing(f"{CA_BUNDLE} (Debian package ca-certificates)")
    names = {}
    for folder, (tag, variable) in STANDIN_IMAGES.items():
        with tempfile.TemporaryDirectory(prefix="imgwarm-standin-") as context:
            shutil.copy(STANDINS / folder / "Dockerfile", context)
            shutil.copy(CA_BUNDLE, Path(context) / "ca-certificates.crt")
            build(docker, tag, Path(context))
        names[variable] = tag
    return names


def imgwarm_image(docker: Engine, python_image: str) -> str:
    """imgwarm's own image from docker/Dockerfile, on the stand-in Python."""
    build(docker, OURS, REPO, REPO / "docker" / "Dockerfile", PYTHON_IMAGE=python_image)
    return OURS
