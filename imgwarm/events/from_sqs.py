"""``listen --sqs QUEUE_URL``: S3 event notifications from an SQS queue, long-polled 10 at a
time, each deleted only after its jobs were queued.

The endpoint is the queue URL's own (``https://sqs.eu-west-1.amazonaws.com/123/q`` talks to
``https://sqs.eu-west-1.amazonaws.com``, in the region its host names; any other host, such as
moto or ElasticMQ, in s3_region or us-east-1), so no setting is needed. Credentials come from
the AWS chain, as for the S3 origin. Each poll waits at most ``WAIT`` seconds, so a stop asked
for (SIGTERM) is seen within about that; the messages of a batch not yet handled are made
visible again at once for the next listener.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any
from urllib.parse import urlsplit

from imgwarm.config import Settings
from imgwarm.events.listen import Listener, keep_trying
from imgwarm.exceptions import ImgwarmError, SettingsError
from imgwarm.text import printable

WAIT = 1  # seconds a receive waits for messages (SQS allows up to 20)
BATCH = 10  # the most SQS gives at once
_AWS_HOST = re.compile(r"sqs[.-]([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")


def endpoint_of(url: str) -> tuple[str, str | None]:
    """(the endpoint URL, the region its host names or None) of a queue URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or not parts.path.strip("/"):
        raise SettingsError(f"--sqs {printable(url)!r}: not a queue URL (https://sqs.REGION."
                           "amazonaws.com/ACCOUNT/NAME)")
    found = _AWS_HOST.fullmatch(parts.hostname or "")
    return f"{parts.scheme}://{parts.netloc}", found.group(1) if found else None


class SqsSource:
    """One SQS queue."""

    def __init__(self, url: str, settings: Settings) -> None:
        import boto3
        from botocore.config import Config

        self.url = url
        self.name = "sqs"
        endpoint, region = endpoint_of(url)
        timeout = float(settings.store.s3_timeout)
        self.client: Any = boto3.client(
            "sqs", endpoint_url=endpoint,
            region_name=region or settings.store.s3_region or "us-east-1",
            config=Config(connect_timeout=timeout, read_timeout=timeout + WAIT + 5,
                          retries={"max_attempts": 3, "mode": "standard"}))

    def check(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])
        except (BotoCoreError, ClientError) as error:
            raise ImgwarmError(f"--sqs {printable(self.url)}: cannot reach the queue: "
                               f"{printable(str(error))}") from None

    def run(self, listener: Listener, stop: threading.Event) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        while not stop.is_set():
            try:
                found = self.client.receive_message(
                    QueueUrl=self.url, MaxNumberOfMessages=BATCH, WaitTimeSeconds=WAIT)
            except (BotoCoreError, ClientError) as error:  # away for a while: try again
                listener.say("unreachable", str(error), self.name, about="error")
                stop.wait(2)
                continue
            messages = found.get("Messages", [])
            for number, message in enumerate(messages):
                if stop.is_set():
                    self._release(messages[number:])
                    return
                if keep_trying(listener, message.get("Body", "").encode("utf-8",
                               "surrogatepass"), self.name, stop):
                    self._delete(message)
                else:  # stopped while it could not be queued: this one comes back too
                    self._release(messages[number:])
                    return

    def _delete(self, message: dict[str, Any]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        with contextlib.suppress(BotoCoreError, ClientError):  # it comes back: a duplicate
            self.client.delete_message(QueueUrl=self.url,
                                       ReceiptHandle=message["ReceiptHandle"])

    def _release(self, messages: list[dict[str, Any]]) -> None:
        """Messages taken but not handled: visible again now, not after the timeout."""
        with contextlib.suppress(Exception):
            self.client.change_message_visibility_batch(QueueUrl=self.url, Entries=[
                {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for n, m in enumerate(messages)])
