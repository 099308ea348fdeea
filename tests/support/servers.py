"""Real servers for the tests: redis-server, two S3 servers (moto's, and SeaweedFS's `weed
mini`, a real object store) and `imgwarm worker` processes.

Each listens on free loopback ports, so the tests run beside anything else on the machine.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import redis
from botocore.config import Config

from imgwarm.serve.server import free_port as free_port  # the library's, for the tests

IMGWARM = Path(sys.executable).with_name("imgwarm")
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "AWS_DEFAULT_REGION": "us-east-1"}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll until ``check()`` is truthy; fail the test with ``what`` when it never is."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without IMGWARM_* settings from outside, plus moto's credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IMGWARM_", "AWS_"))}
    return {**env, **AWS, **extra}


class RedisServer:
    def __init__(self, workdir: Path) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server is not installed (./test.sh installs it as root)")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = subprocess.Popen(
            [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--databases", "1000",
             "--appendonly", "no", "--dir", str(workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.client = redis.Redis(port=self.port)
        wait_for(self._up, "redis-server to answer")

    def _up(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class S3Endpoint:
    """What the tests ask of an S3 server, whichever it is: its endpoint, a client that signs
    with the test credentials, new buckets, and what a bucket holds (read through the API)."""

    name = ""  # "moto" or "seaweedfs": the test parameter that chose it
    endpoint = ""
    client: Any = None

    def _connect(self) -> None:
        self.client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                                   aws_access_key_id=AWS["AWS_ACCESS_KEY_ID"],
                                   aws_secret_access_key=AWS["AWS_SECRET_ACCESS_KEY"],
                                   # the tests' own setup (an upload, a new bucket) is not what
                                   # they test: on a loaded machine SeaweedFS may answer a 500
                                   # while it grows a volume, which a few retries ride out
                                   config=Config(retries={"mode": "standard",
                                                          "max_attempts": 8}))

    def stop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        raise NotImplementedError

    def new_bucket(self) -> str:
        name = f"imgwarm-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        found: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix):
            found.extend(o["Key"] for o in page.get("Contents", []))
        return sorted(found)

    def multipart_uploads(self, bucket: str) -> list[Any]:
        return list(self.client.list_multipart_uploads(Bucket=bucket).get("Uploads", []))

    def drop_bucket(self, bucket: str) -> None:
        """Empty the bucket and remove it (through the API, as any client would)."""
        for key in self.keys(bucket):
            self.client.delete_object(Bucket=bucket, Key=key)
        self.client.delete_bucket(Bucket=bucket)


class S3Server(S3Endpoint):
    """moto's S3 server over real HTTP on loopback; it can be stopped and started again on
    the same port (its objects live on in this process)."""

    name = "moto"

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request
        self.port = free_port()
        self._make: Callable[[], Any] = lambda: ThreadedMotoServer(
            ip_address="127.0.0.1", port=self.port, verbose=False)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.server = self._make()
        self.server.start()
        self._connect()

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server = self._make()
        self.server.start()


# SeaweedFS's S3 identities: the test credentials, allowed everything (requests are signed
# and checked: a wrong secret is refused).
SEAWEED_IDENTITIES = {"identities": [{
    "name": "imgwarm-tests",
    "credentials": [{"accessKey": AWS["AWS_ACCESS_KEY_ID"],
                     "secretKey": AWS["AWS_SECRET_ACCESS_KEY"]}],
    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
}]}
# Every port `weed mini` would open, chosen free (its defaults are fixed numbers, which two
# test runs on one machine would share); Iceberg, Lance and WebDAV are off.
SEAWEED_PORTS = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                 "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port",
                 "admin.port.grpc"]


class SeaweedServer(S3Endpoint):
    """SeaweedFS (`weed mini`: master, volume, filer and S3 gateway in one process) on free
    loopback ports, its data in ``workdir``; stopped and started again, it keeps its
    objects (they are on disk)."""

    name = "seaweedfs"

    def __init__(self, weed: str, workdir: Path) -> None:
        self.weed = weed
        self.workdir = workdir
        self.ports = {flag: free_port() for flag in SEAWEED_PORTS}
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        config = workdir / "s3.json"
        config.write_text(json.dumps(SEAWEED_IDENTITIES))
        (workdir / "data").mkdir(exist_ok=True)
        self.log = workdir / "weed.log"
        self.args = [
            weed, "mini", f"-dir={workdir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
            f"-s3.config={config}",
            "-s3.autoCreateBucket=false",  # a write to a missing bucket fails, as on AWS
            "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
            "-master.telemetry=false",
            # small volumes: weed counts the volumes it may make as free disk space over
            # their size, and every bucket takes several; at mini's 128 MB a run on a disk
            # with 30 GB free ran out ("no free volumes left"), the tests' objects are tiny
            "-master.volumeSizeLimitMB=16",
        ]
        self.process: subprocess.Popen[bytes] | None = None
        self.start()
        self._connect()

    def _up(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"weed mini exited with {self.process.returncode}:\n"
                                 + self.log.read_text(errors="replace")[-3000:])
        try:  # any S3 answer (403 unsigned) says the gateway is up
            with socket.create_connection(("127.0.0.1", self.ports["s3.port"]), 0.2) as s:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                return s.recv(12).startswith(b"HTTP/1.")
        except OSError:
            return False

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=self.workdir)
        wait_for(self._up, f"weed mini to answer S3 (log: {self.log})")

    def drop_bucket(self, bucket: str) -> None:
        """Removed whole: SeaweedFS removes a bucket with its objects in one request
        (``-s3.allowDeleteBucketNotEmpty``, on by default; AWS answers BucketNotEmpty)."""
        self.client.delete_bucket(Bucket=bucket)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


class Worker:
    """A real ``imgwarm worker`` process (in its own process group, so it can be killed
    outright with its pool), logging to a file; ``program``: another imgwarm's command (an
    earlier release, tests/support/released.py)."""

    def __init__(self, env: dict[str, str], log: Path, *args: str,
                 program: list[str] | None = None) -> None:
        self.log = log
        self.name = f"w{uuid.uuid4().hex[:8]}@%h"
        self.handle = log.open("ab")
        self._skip = len(self.text())
        self.process = subprocess.Popen(
            [*(program or [str(IMGWARM)]), "worker", "--loglevel", "INFO", "--without-mingle",
             "--without-gossip", "-n", self.name, *args],
            env=env, stdout=self.handle, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=log.parent,
        )
        wait_for(self._ready, f"the worker to be ready (log: {log})", timeout=60)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"worker exited with {self.process.returncode}:\n{self.text()}")
        return " ready." in self.text()[self._skip:]

    def pool(self) -> list[int]:
        """The pids of the worker's pool processes (its children)."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def kill(self) -> None:
        """SIGKILL the whole worker: main process and pool, mid-job, as a crash would."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        self.handle.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # warm shutdown: the pool finishes the jobs in hand
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        self.handle.close()
