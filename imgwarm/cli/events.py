"""``imgwarm listen``: bucket notifications in (SQS, a Redis list, a webhook), jobs out, and a
periodic reconcile that catches what events missed."""

from __future__ import annotations

import threading
from typing import Any

import click

from imgwarm.cli.common import EXIT_FAILED, EXIT_OK, command, json_text, load
from imgwarm.cli.signals import stopped_by_signals
from imgwarm.text import printable


@command(context_settings={"max_content_width": 100})
@click.option("--sqs", "sqs_urls", multiple=True, metavar="QUEUE_URL",
              help="Long-poll this SQS queue (S3 -> SQS notifications; several: give it again). "
              "Example: --sqs https://sqs.eu-west-1.amazonaws.com/123456789012/uploads")
@click.option("--redis-list", "redis_lists", multiple=True, metavar="KEY",
              help="Take MinIO's Redis target (format access) from this list, in "
              "events_redis_url or the broker's Redis. Example: --redis-list bucketevents")
@click.option("--http", "http_address", metavar="HOST:PORT",
              help="Take POSTed notifications (MinIO's webhook target) here, each with "
              "Authorization: Bearer listen_token. Example: --http 0.0.0.0:9009")
@click.option("--reconcile", is_flag=True,
              help="List the originals once at the start and queue what has no manifest or "
              "an older one (alone, without a source: that, then exit).")
@click.option("--reconcile-every", metavar="DURATION",
              help="Reconcile again every DURATION (10m, 1h): events that never came are "
              "caught.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object a line per event, and the summary as one at the end.")
@click.pass_context
def listen(ctx: click.Context, /, sqs_urls: tuple[str, ...], redis_lists: tuple[str, ...],
           http_address: str | None, reconcile: bool, reconcile_every: str | None,
           as_json: bool) -> None:
    """Queue a job for every upload as the bucket tells of it, and a takedown for every
    removed original.

    \b
    Sources (one or more, each in a thread of this process):
      --sqs URL          AWS S3 -> SQS (put_bucket_notification_configuration with
                         QueueConfigurations, events s3:ObjectCreated:* s3:ObjectRemoved:*);
                         also EventBridge -> SQS, and SNS -> SQS.
      --redis-list KEY   MinIO: MINIO_NOTIFY_REDIS_FORMAT=access, KEY its _KEY; then
                         `mc event add ALIAS/BUCKET arn:minio:sqs::primary:redis
                         --event put,delete`.
      --http HOST:PORT   MinIO's webhook target (MINIO_NOTIFY_WEBHOOK_ENDPOINT=
                         http://HOST:PORT/, _AUTH_TOKEN=listen_token), or any sender.

    Only keys under s3_prefix and originals_prefix are made; imgwarm's own writes
    (variants, manifests, journal) are never taken for uploads. Keys are URL-decoded; an
    s3:TestEvent is ignored; a repeated event is dropped, and an older one (by sequencer, else
    event time) never undoes a newer one. A malformed or oversized message is one line,
    counted. A message is acknowledged only once its jobs are queued.

    Output: one line per event (queued, takedown, duplicate, older, ignored-*, malformed),
    and a summary on stderr at the end. SIGTERM or Ctrl-C: the message in hand is finished.

    Exit status: 0 after a stop asked for, 1 when a source failed for good or cannot be
    reached at the start, 2 for usage errors (no source, --http without listen_token).
    """
    from imgwarm.config.units import parse_duration

    settings = load(ctx)
    try:
        every = parse_duration(reconcile_every) if reconcile_every else None
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--reconcile-every") from None
    if not (sqs_urls or redis_lists or http_address or reconcile or every):
        raise click.UsageError("give a source: --sqs QUEUE_URL, --redis-list KEY or --http "
                               "HOST:PORT (or --reconcile)", ctx)
    failures = _run(settings, sqs_urls, redis_lists, http_address, reconcile, every, as_json)
    for line in failures:
        click.echo(printable(f"listen FAILED: {line}"), err=True)  # (a line, not an error)
    ctx.exit(EXIT_FAILED if failures else EXIT_OK)


def _run(settings: Any, sqs_urls: tuple[str, ...], redis_lists: tuple[str, ...],
         http_address: str | None, reconcile: bool, every: float | None,
         as_json: bool) -> list[str]:
    from imgwarm.events.from_http import HttpSource
    from imgwarm.events.from_redis import RedisListSource
    from imgwarm.events.from_sqs import SqsSource
    from imgwarm.events.listen import Listener, Source, listen
    from imgwarm.events.order import Order
    from imgwarm.events.out import connect, stream_url
    from imgwarm.exceptions import SettingsError

    url = stream_url(settings)
    if url is None:
        raise SettingsError("listen keeps the order of events in Redis: set events_redis_url "
                            "(IMGWARM_EVENTS_REDIS_URL) or a redis:// broker_url")
    sources: list[Source] = [SqsSource(u, settings) for u in sqs_urls]
    sources += [RedisListSource(url, key) for key in redis_lists]
    if http_address:
        sources.append(HttpSource(http_address, settings))
    echo = (lambda line: click.echo(line))  # noqa: E731 (click's, for the terminal's encoding)
    listener = Listener(settings, Order(connect(url, timeout=10)), as_json=as_json, echo=echo,
                        to_json=json_text)
    stop = threading.Event()
    with stopped_by_signals(stop.set):
        if not sources and every is None:  # --reconcile alone: once, then exit
            from imgwarm.events.listen import reconcile_loop

            reconcile_loop(listener, stop, None, True, listener.order.client)()
            failed = listener.counters.reconcile_failed
            failures: list[str] = ["the reconcile failed (its line above)"] if failed else []
        else:
            failures = listen(settings, sources, listener, stop, reconcile_every=every,
                              reconcile_at_start=reconcile)
    click.echo(listener.summary(), err=not as_json)
    return failures
