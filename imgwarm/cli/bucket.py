"""``imgwarm bucket``: set up an S3 bucket for imgwarm (create it, let nginx read the
variants, tell a queue of uploads), idempotent: for a deploy script or a compose job."""

from __future__ import annotations

import click

from imgwarm.cli.common import command, json_text, load


@command()
@click.option("--create", is_flag=True, help="Create the bucket when it does not exist.")
@click.option("--no-policy", is_flag=True,
              help="Leave the bucket's policy alone (default: anyone may GET the variants' "
              "shard folders, and nothing else, which nginx's origin fallback needs).")
@click.option("--notify", "queue_arn", metavar="ARN",
              help="Send each created or removed original (under originals_prefix) to this "
              "queue: an SQS queue's ARN on AWS (its policy must let the bucket send), or a "
              "MinIO target's (arn:minio:sqs::primary:redis). `imgwarm listen` reads it.")
@click.option("--print-policy", is_flag=True,
              help="Print the policy as JSON and change nothing (for Terraform or `aws s3api`).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: what was done.")
@click.pass_context
def bucket(ctx: click.Context, /, create: bool, no_policy: bool, queue_arn: str | None,
           print_policy: bool, as_json: bool) -> None:
    """Set up the S3 bucket (s3_bucket) for imgwarm; safe to run again.

    \b
    imgwarm bucket --create
    imgwarm bucket --notify arn:aws:sqs:eu-west-1:123456789012:uploads
    imgwarm bucket --print-policy > policy.json

    Originals (which keep their GPS) and manifests stay private: only keys shaped like the
    variants' shard folders are readable. Keep originals under a prefix (originals_prefix,
    e.g. uploads/) that is not three two-character folders deep.
    """
    from imgwarm.store.bucket import read_policy, set_up_bucket

    settings = load(ctx)
    if print_policy:
        click.echo(json_text(read_policy(settings.store.s3_bucket or "BUCKET", settings)))
        return
    done = set_up_bucket(settings, create=create, policy=not no_policy, queue_arn=queue_arn)
    if as_json:
        click.echo(json_text(done.to_object()))
        return
    click.echo(f"bucket {done.bucket}: " + "; ".join(filter(None, [
        "created" if done.created else "exists",
        f"anyone may read {', '.join(done.policy)}" if done.policy else "",
        f"uploads notified to {done.notify}" if done.notify else ""])))
