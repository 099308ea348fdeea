"""Events out, as the tests see them: the stream's entries, a webhook receiver over real
HTTP, cache boxes running the real `imgwarm warm --follow`, and a Redis restarted."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from imgwarm.events.webhook import verify
from imgwarm.manifest import Manifest
from tests.support.queues import Queue
from tests.support.servers import IMGWARM, RedisServer, wait_for

STREAM = "imgwarm:events"


def events(url: str, stream: str = STREAM) -> list[tuple[str, dict[str, Any]]]:
    """Every entry of the stream, oldest first: (id, its event)."""
    client = redis.Redis.from_url(url)
    try:
        return [(entry.decode(), json.loads(fields[b"event"]))
                for entry, fields in client.xrange(stream)]
    finally:
        client.close()


def of_key(url: str, key: str) -> list[dict[str, Any]]:
    return [event for _, event in events(url) if event["key"] == key]


@dataclass
class Received:
    at: float
    headers: dict[str, str]
    body: bytes
    status: int
    verified: bool


@dataclass
class Receiver:
    """A webhook receiver over real HTTP on loopback, as an application would run it: it
    checks each request's signature (the docs' ``verify``) and answers with the next of
    ``answers`` (then 200)."""

    secret: str
    answers: list[int] = field(default_factory=list)
    got: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ok = verify(receiver.secret, self.headers.get("X-Imgwarm-Signature", ""), body)
                status = receiver.answers.pop(0) if receiver.answers else 200
                status = status if ok else 400
                receiver.got.append(Received(time.time(), dict(self.headers.items()), body,
                                             status, ok))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Box:
    """A cache box: its own tier and state roots in front of the queue's origin, and its
    `imgwarm warm --follow` process (its own process group: killed outright with its copier)."""

    def __init__(self, queue: Queue, name: str, ram: Path, *extra: str) -> None:
        self.root = queue.workdir / name
        self.nvme, self.ram = self.root / "nvme", ram / name
        self.env = {**queue.env, "IMGWARM_NVME_ROOT": str(self.nvme),
                    "IMGWARM_RAM_ROOT": str(self.ram),
                    "IMGWARM_CACHE_STATE": str(self.root / "state"),
                    "IMGWARM_RAM_BUDGET": "8M", "IMGWARM_FSYNC": "false"}
        self.stores = queue.stores()  # the origin, local or S3, to compare bytes with
        self.extra = extra
        self.log = self.root / "warm.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.root.mkdir(parents=True, exist_ok=True)

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(IMGWARM), "warm", "--follow", *self.extra], env=self.env, stdout=out,
                stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
        before = self.runs()
        wait_for(lambda: self._alive() and self.runs() > before,
                 f"{self.root.name}'s first run (log: {self.log})", timeout=60)

    def runs(self) -> int:
        """The runs its log reports (one line each)."""
        return sum(line.startswith(("warm: ", '{"')) for line in self.text().splitlines())

    def _alive(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"warm --follow exited with {self.process.returncode}:\n"
                                 f"{self.text()}")
        return True

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        """SIGTERM: the run in hand finished, exit status returned."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"warm --follow did not stop on SIGTERM:\n{self.text()}") \
                from None

    def holds(self, manifest: Manifest) -> bool:
        """Every variant of the manifest on this box's NVMe, the very bytes of the origin."""
        for variant in manifest.variants:
            placed = self.nvme / variant.path
            if not placed.is_file():
                return False
            origin = self.stores.origin.read(variant.path)
            if origin is None or _digest(placed) != hashlib.sha256(origin).hexdigest():
                raise AssertionError(f"{placed} differs from the origin's")
        return True

    def has_any(self, paths: list[str]) -> list[str]:
        """Which of ``paths`` are in either tier."""
        return [p for p in paths if (self.nvme / p).exists() or (self.ram / p).exists()]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def restart_redis(server: RedisServer) -> None:
    """Stop the redis-server and start a fresh one on the same port (no persistence: it
    comes back empty, its streams and groups gone, as after a crash without a save)."""
    server.stop()
    workdir = Path(server.process.args[-1])  # (its --dir, the last argument)
    executable = shutil.which("redis-server")
    assert executable is not None
    server.process = subprocess.Popen(
        [executable, "--port", str(server.port), "--bind", "127.0.0.1", "--save", "",
         "--databases", "1000", "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: _answers(server), "redis-server to answer again")


def _answers(server: RedisServer) -> bool:
    try:
        return bool(server.client.ping())
    except redis.ConnectionError:
        return False
