"""A queue set-up as users drive it: its own Redis database, bucket (or local origin),
settings, worker processes and CLI runs; and what a queue must leave in S3."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

from PIL import Image

from imgwarm.config import Settings, load_settings
from imgwarm.formats import MEDIA_TYPES as CONTENT_TYPES
from imgwarm.manifest import Manifest
from imgwarm.store import Stores
from imgwarm.store.format import FORMAT_RECORD
from imgwarm.store.origin import S3_MANIFEST_FOLDER
from imgwarm.store.s3 import IMMUTABLE
from imgwarm.workers.client import job_status, latest_job_id
from tests.support.servers import IMGWARM, RedisServer, S3Server, Worker, clean_env, wait_for

_databases = itertools.count(1)

# Short limits, so that a job of a killed worker is handed out again within seconds.
FAST = {"visibility_timeout": "10", "task_soft_time_limit": "7", "task_time_limit": "9",
        "retry_backoff_max": "2"}


class Queue:
    """One isolated queue set-up, driven as users drive it: CLI processes and workers."""

    def __init__(self, workdir: Path, redis: RedisServer, s3: S3Server | None,
                 **values: str) -> None:
        self.workdir = workdir
        self.redis = redis
        self.s3 = s3
        url = f"redis://127.0.0.1:{redis.port}/{next(_databases)}"
        self.values: dict[str, Any] = {"broker_url": url, "result_backend": url, **values}
        if s3 is not None:
            self.bucket = s3.new_bucket()
            self.values |= {"origin": "s3", "s3_bucket": self.bucket,
                            "s3_endpoint_url": s3.endpoint}
        else:
            self.values |= {"origin": "local", "origin_root": str(workdir / "origin"),
                            "manifest_root": str(workdir / "manifest")}
        self.workers: list[Worker] = []

    @property
    def env(self) -> dict[str, str]:
        return clean_env(**{f"IMGWARM_{k.upper()}": v for k, v in self.values.items()})

    def settings(self) -> Settings:
        return load_settings(**self.values)

    def stores(self) -> Stores:
        return Stores.for_settings(self.settings().store)

    def put(self, key: str, data: bytes) -> None:
        """Store an original in the origin, as an upload handler would."""
        if self.s3 is not None:
            self.s3.client.put_object(Bucket=self.bucket, Key=key, Body=data)
        else:
            path = self.workdir / "origin" / key
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

    def worker(self, *args: str) -> Worker:
        started = Worker(self.env, self.workdir / "worker.log", *args)
        self.workers.append(started)
        return started

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(IMGWARM), *args], env=self.env, cwd=self.workdir,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def cli_json(self, *args: str) -> tuple[int, dict[str, dict[str, Any]]]:
        done = self.cli(*args, "--json")
        return done.returncode, {o["source"]: o for o in map(json.loads, done.stdout.splitlines())}

    def state(self, key: str) -> str:
        return job_status(key, self.settings()).state

    def meta(self, key: str) -> dict[str, Any]:
        from imgwarm.workers.client import client_app

        return dict(client_app(self.settings()).backend.get_task_meta(self.job(key)))

    def job(self, key: str) -> str:
        """The id of the latest job queued for a key."""
        found = latest_job_id(key, self.settings())
        assert found is not None, f"no job was queued for {key}"
        return found

    def log(self) -> str:
        path = self.workdir / "worker.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def received(self, key: str) -> int:
        """How many times the workers took this key's latest job (from their log)."""
        return self.log().count(f"[{self.job(key)}] received")

    def made(self, job: str) -> int:
        """How many runs of a job made the source (not skipped as already made)."""
        return sum(1 for line in self.log().splitlines()
                   if f"[{job}] succeeded in " in line and "{'reused': False" in line)

    def wait_done(self, keys: list[str], timeout: float = 120) -> None:
        wait_for(lambda: all(self.state(k) in ("done", "failed") for k in keys),
                 f"{len(keys)} jobs to end", timeout)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


def check_s3_outputs(s3: S3Server, bucket: str, manifests: list[Manifest],
                     originals: str) -> None:
    """Every object besides the originals (under ``originals``) and the manifests is a
    variant referenced by a manifest, whole (its bytes hash to its name, it decodes to its
    recorded size), with its Content-Type and Cache-Control; no unfinished multipart upload;
    and the store's format record, left by the first write."""
    referenced = {v.path: v for m in manifests for v in m.variants}
    keys = s3.keys(bucket)
    assert FORMAT_RECORD in keys
    stored = [k for k in keys
              if not k.startswith((S3_MANIFEST_FOLDER, originals)) and k != FORMAT_RECORD]
    assert sorted(stored) == sorted(referenced)
    assert s3.multipart_uploads(bucket) == []
    for path, variant in referenced.items():
        obj = s3.client.get_object(Bucket=bucket, Key=path)
        data = obj["Body"].read()
        assert hashlib.sha256(data).hexdigest().startswith(path.rsplit(".", 2)[-2])
        assert obj["ContentType"] == CONTENT_TYPES["." + path.rsplit(".", 1)[-1]]
        assert obj["CacheControl"] == IMMUTABLE
        with Image.open(io.BytesIO(data)) as image:
            assert image.size == (variant.width, variant.height)
            # (Pillow calls a JPEG with a second picture, an Ultra HDR one's gain map, MPO)
            expected = "mpo" if variant.hdr else variant.format
            assert (image.format or "").lower() == expected, (path, variant)
