"""`imgwarm bucket`: the policy lets anyone read the variants and nothing else, and the
notification tells a real queue (moto's SQS) of the originals alone."""

from __future__ import annotations

import json
import re
from typing import Any

import boto3

from imgwarm.config import load_settings
from imgwarm.pipeline.optimize import optimize_key
from imgwarm.store import Stores
from tests.support.corpus import corpus_dir
from tests.support.servers import S3Server


def s3_wildcard(pattern: str) -> re.Pattern[str]:
    """An S3 policy's resource wildcard as AWS reads it: ``*`` any run of characters (``/``
    too), ``?`` one character, nothing else special."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern))


def readable(policy: dict[str, Any], bucket: str, key: str) -> bool:
    statement = policy["Statement"][0]
    return statement["Effect"] == "Allow" and statement["Action"] == ["s3:GetObject"] and any(
        s3_wildcard(resource).fullmatch(f"arn:aws:s3:::{bucket}/{key}")
        for resource in statement["Resource"])


def test_the_bucket_job_creates_lets_nginx_read_variants_only_and_notifies_a_queue(
        s3_server: S3Server, run_cli: Any) -> None:
    bucket = f"setup-{id(s3_server) % 100000}"
    env = {"IMGWARM_ORIGIN": "s3", "IMGWARM_S3_BUCKET": bucket, "IMGWARM_S3_PREFIX": "site",
           "IMGWARM_S3_ENDPOINT_URL": s3_server.endpoint, "IMGWARM_S3_REGION": "us-east-1",
           "IMGWARM_ORIGINALS_PREFIX": "uploads", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing"}
    queues = boto3.client("sqs", endpoint_url=s3_server.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    url = queues.create_queue(QueueName=f"{bucket}-uploads")["QueueUrl"]
    arn = queues.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    first = run_cli("bucket", "--create", "--notify", arn, "--json", env=env)
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["created"] is True
    again = run_cli("bucket", "--create", "--notify", arn, "--json", env=env)  # idempotent
    assert again.exit_code == 0 and json.loads(again.stdout)["created"] is False

    settings = load_settings(origin="s3", s3_bucket=bucket, s3_prefix="site",
                             s3_endpoint_url=s3_server.endpoint, s3_region="us-east-1")
    stores = Stores.for_settings(settings.store)
    key = "uploads/2026/11/ab/bike.jpg"
    stores.origin.write(key, (corpus_dir() / "DSCN0010.jpg").read_bytes())
    manifest = optimize_key(key, settings=settings, stores=stores).manifest
    policy = json.loads(s3_server.client.get_bucket_policy(Bucket=bucket)["Policy"])
    keys = s3_server.keys(bucket)
    variants = {f"site/{v.path}" for v in manifest.variants}
    assert variants and variants <= set(keys)
    for found in keys:  # every variant readable; the original, manifests, journal are not
        assert readable(policy, bucket, found) == (found in variants), found
    assert not readable(policy, bucket, "site/ab/cd/ef.jpg")

    config = s3_server.client.get_bucket_notification_configuration(Bucket=bucket)
    [queue] = config["QueueConfigurations"]
    assert queue["QueueArn"] == arn
    assert set(queue["Events"]) == {"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}
    rules = queue["Filter"]["Key"]["FilterRules"]
    assert [(r["Name"].lower(), r["Value"]) for r in rules] == [("prefix", "site/uploads/")]


def test_the_bucket_job_needs_an_s3_origin(run_cli: Any) -> None:
    result = run_cli("bucket", "--create", env={"IMGWARM_ORIGIN": "local"})
    assert result.exit_code == 1
    assert "origin = s3" in result.stderr and result.stdout == ""
