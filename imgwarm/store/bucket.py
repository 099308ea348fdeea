"""Bucket setup: what an S3 bucket needs for imgwarm to serve from it and hear its uploads.

- An anonymous-read policy on the variants alone (nginx's origin fallback reads S3 without
  credentials): the shard folders the layout makes, one statement per output format. Originals
  (which keep their GPS) and manifests (``.imgwarm/``) stay private: keep originals under a
  prefix (``originals_prefix``, ``uploads/``) that is not as many short folders deep.
- Optionally, a notification of every created and removed original (under the originals'
  prefix only: imgwarm's own writes never trigger it) to a queue: an SQS ARN on AWS, a MinIO
  target's ARN (``arn:minio:sqs::primary:redis``) on MinIO.

Each step is idempotent: run it on every deploy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from imgwarm.config import Settings
from imgwarm.exceptions import StorageError
from imgwarm.formats import OUTPUTS
from imgwarm.store.format import WRITE
from imgwarm.store.layout import Layout
from imgwarm.store.origin import Stores

EVENTS = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]
NOTIFICATION_ID = "imgwarm-originals"


def variant_patterns(settings: Settings) -> list[str]:
    """Object-key patterns (S3 policy wildcards) that match the variants and nothing of a
    key with fewer short folders: ``PREFIX??/??/??/*.webp`` with the default layout."""
    layout = Layout(settings.store.max_dir_entries, settings.store.shard_levels)
    folder = "?" * -(-layout.bits // 4)
    shards = "/".join([folder] * layout.levels)
    return [f"{settings.store.s3_prefix}{shards}/*.{fmt.extension}"
            for fmt in OUTPUTS.values()]


def read_policy(bucket: str, settings: Settings) -> dict[str, Any]:
    """The bucket policy: anyone may GET the variants; nothing else is granted."""
    return {
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "ImgwarmVariantsPublicRead",
            "Effect": "Allow",
            "Principal": {"AWS": ["*"]},
            "Action": ["s3:GetObject"],
            "Resource": [f"arn:aws:s3:::{bucket}/{pattern}"
                         for pattern in variant_patterns(settings)],
        }],
    }


def notification(settings: Settings, queue_arn: str) -> dict[str, Any]:
    """A QueueConfiguration for the originals: created and removed, under their prefix."""
    prefix = settings.store.s3_prefix + settings.events.originals_prefix
    config: dict[str, Any] = {"Id": NOTIFICATION_ID, "QueueArn": queue_arn, "Events": EVENTS}
    if prefix:
        config["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}
    return config


def _exists(client: Any, bucket: str) -> bool:
    try:
        client.head_bucket(Bucket=bucket)
    except Exception as error:  # 404: to be made; anything else: creating says what
        return getattr(error, "response", {}).get("Error", {}).get("Code") not in (
            "404", "NoSuchBucket", "NotFound")
    return True


@dataclass
class BucketSetup:
    """What a setup did."""

    bucket: str
    created: bool = False
    policy: list[str] = field(default_factory=list)  # the patterns anyone may read
    notify: str | None = None  # the queue ARN told of uploads

    def to_object(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "created": self.created, "public_read": self.policy,
                "notify": self.notify}


def set_up_bucket(settings: Settings, *, create: bool = False, policy: bool = True,
                  queue_arn: str | None = None) -> BucketSetup:
    """Create the bucket (``create``), grant anonymous read on the variants (``policy``) and
    point its upload notifications at ``queue_arn``. Other notification configurations of
    the bucket are kept; imgwarm's own (by its Id) is replaced. StorageError names the step
    that failed."""
    from imgwarm.store.s3 import make_client  # boto3 only when used

    bucket = settings.store.s3_bucket
    if settings.store.origin != "s3" or not bucket:
        raise StorageError("the bucket setup needs origin = s3 and s3_bucket "
                           "(IMGWARM_ORIGIN, IMGWARM_S3_BUCKET)")
    client = make_client(settings.store)
    done = BucketSetup(bucket)

    def step(doing: str, call: Any, **kwargs: Any) -> Any:
        try:
            return call(**kwargs)
        except Exception as error:  # botocore's own kinds: say which step
            code = getattr(error, "response", {}).get("Error", {}).get("Code")
            if doing == "creating" and code in ("BucketAlreadyOwnedByYou",
                                                "BucketAlreadyExists"):
                return None
            raise StorageError(f"bucket {bucket}: {doing} failed: {error}") from None

    if create and not _exists(client, bucket):  # (us-east-1 answers 200 to a second create)
        region = settings.store.s3_region
        extra = {"CreateBucketConfiguration": {"LocationConstraint": region}} \
            if region and region != "us-east-1" else {}
        done.created = step("creating", client.create_bucket, Bucket=bucket, **extra) is not None
    if _exists(client, bucket):  # a store newer than this code is left as it is (nothing
        # set); a new one gets its format record
        Stores.s3(settings.store).check(WRITE, create=True)
    if policy:
        step("setting its read policy", client.put_bucket_policy, Bucket=bucket,
             Policy=json.dumps(read_policy(bucket, settings)))
        done.policy = variant_patterns(settings)
    if queue_arn:
        current = step("reading its notifications",
                       client.get_bucket_notification_configuration, Bucket=bucket) or {}
        queues = [q for q in current.get("QueueConfigurations", [])
                  if q.get("Id") != NOTIFICATION_ID]
        kept = {k: v for k, v in current.items()
                if k in ("TopicConfigurations", "LambdaFunctionConfigurations",
                         "EventBridgeConfiguration")}
        step("setting its notifications", client.put_bucket_notification_configuration,
             Bucket=bucket, NotificationConfiguration={
                 **kept, "QueueConfigurations": [*queues, notification(settings, queue_arn)]})
        done.notify = queue_arn
    return done
