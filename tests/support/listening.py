"""`imgwarm listen` as users run it, and what it listens to: an SQS queue behind a real bucket
notification on moto's server, MinIO's access-format events, small photos to upload."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import boto3
from PIL import Image

from tests.support.queues import Queue
from tests.support.servers import IMGWARM, S3Server, wait_for


def photo(seed: int, size: tuple[int, int] = (400, 300)) -> bytes:
    """A small JPEG of its own colours (a different seed: different bytes)."""
    image = Image.new("RGB", size, ((seed * 53) % 256, (seed * 97) % 256, (seed * 31) % 256))
    for x in range(0, size[0], 20):  # some detail, so the encoders have work to do
        for y in range(0, size[1], 20):
            image.putpixel((x, y), (255 - x % 256, y % 256, (x + y + seed) % 256))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def sqs_notification(s3: S3Server, bucket: str, *, visibility: int = 3) -> tuple[Any, str]:
    """A new SQS queue on moto's server and the bucket's notification to it (ObjectCreated
    and ObjectRemoved), configured through the S3 API: (the SQS client, the queue URL)."""
    sqs = boto3.client("sqs", endpoint_url=s3.endpoint, region_name="us-east-1")
    url = sqs.create_queue(QueueName=f"uploads-{uuid.uuid4().hex[:10]}",
                           Attributes={"VisibilityTimeout": str(visibility)})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"]
                                   )["Attributes"]["QueueArn"]
    s3.client.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={
        "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*",
                                                              "s3:ObjectRemoved:*"]}]})
    return sqs, url


def queue_drained(sqs: Any, url: str) -> bool:
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return found["ApproximateNumberOfMessages"] == "0" and \
        found["ApproximateNumberOfMessagesNotVisible"] == "0"


def minio_access(kind: str, bucket: str, key: str, sequencer: str,
                 time: str = "2026-11-27T10:00:00.000Z") -> bytes:
    """What MinIO's Redis target in access format RPUSHes for one event
    (internal/event/target/redis.go: ``[{"Event": [event], "EventTime": ...}]``); the key
    URL-encoded as MinIO does (spaces as '+')."""
    from urllib.parse import quote_plus

    name = "s3:ObjectCreated:Put" if kind == "created" else "s3:ObjectRemoved:Delete"
    record = {
        "eventVersion": "2.0", "eventSource": "minio:s3", "awsRegion": "", "eventTime": time,
        "eventName": name, "userIdentity": {"principalId": "minioadmin"},
        "requestParameters": {"sourceIPAddress": "127.0.0.1"},
        "responseElements": {"x-amz-request-id": "17B2E3D5E8E1A5F0"},
        "s3": {"s3SchemaVersion": "1.0", "configurationId": "Config",
               "bucket": {"name": bucket, "ownerIdentity": {"principalId": "minioadmin"},
                          "arn": f"arn:aws:s3:::{bucket}"},
               "object": {"key": quote_plus(key, safe="/"), "size": 1000, "eTag": "abc",
                          "contentType": "image/jpeg", "userMetadata": {},
                          "sequencer": sequencer}},
        "source": {"host": "127.0.0.1", "port": "", "userAgent": "MinIO (linux; amd64)"},
    }
    return json.dumps([{"Event": [record], "EventTime": time}]).encode()


class Listening:
    """One `imgwarm listen --json` process; its lines read back as objects."""

    def __init__(self, queue: Queue, *args: str, **env: str) -> None:
        self.out = queue.workdir / f"listen-{uuid.uuid4().hex[:6]}.jsonl"
        self.err = self.out.with_suffix(".err")
        with self.out.open("wb") as out, self.err.open("wb") as err:  # the child keeps its own
            self.process = subprocess.Popen(
                [str(IMGWARM), "listen", "--json", *args], cwd=queue.workdir,
                env={**queue.env, **env}, stdout=out, stderr=err)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.read_text().splitlines() if line]

    def events(self, what: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("event") == what]

    def wait(self, what: str, count: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
        def enough() -> list[dict[str, Any]] | None:
            if self.process.poll() is not None:
                raise AssertionError(f"listen exited with {self.process.returncode}: "
                                     f"{self.err.read_text()}")
            found = self.events(what)
            return found if len(found) >= count else None

        return wait_for(enough, f"{count} '{what}' line(s) from listen", timeout)

    def stop(self) -> dict[str, int]:
        """SIGTERM, as a service manager stops it: the summary it printed."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(30) == 0, self.err.read_text()
        return dict(self.lines()[-1]["summary"])

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def wait_made(queue: Queue, keys: list[str], timeout: float = 90) -> None:
    manifests = queue.stores().manifests
    wait_for(lambda: all(manifests.get(k) is not None for k in keys),
             f"manifests of {keys}", timeout)


def log_path(queue: Queue) -> Path:
    return queue.workdir / "worker.log"
