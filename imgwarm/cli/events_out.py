"""``imgwarm notify``: the events stream POSTed to the application, signed, until a 2xx."""

from __future__ import annotations

import threading
from contextlib import suppress

import click

from imgwarm.cli.common import EXIT_OK, command, json_text, load
from imgwarm.cli.signals import stopped_by_signals, then_interrupt
from imgwarm.text import printable


@command()
@click.option("--once", is_flag=True,
              help="Deliver what is in the stream now (each event tried once), then exit.")
@click.option("--json", "as_json", is_flag=True,
              help="At the end, one JSON object: delivered, failed tries, dropped, waiting.")
@click.pass_context
def notify(ctx: click.Context, /, once: bool, as_json: bool) -> None:
    """POST every event of the events stream (published, failed, deleted: events_stream) to
    notify_url, signed with notify_secret: X-Imgwarm-Signature: t=UNIX_TIME,v1=HEX, the
    HMAC-SHA256 of "{t}.{body}" (as Stripe signs its webhooks), and X-Imgwarm-Event-Id, the
    same on every retry.

    A 2xx delivers an event; anything else is tried again with backoff (1 s, doubling, at
    most 5 min, jittered) until notify_give_up after the event, then dropped with a line.
    Runs until SIGTERM or Ctrl-C (the POST in hand is finished); a restart resumes what was
    not delivered (its consumer group, imgwarm-webhook). Run one per stream.

    Exit status: 0 when stopped, 1 when the run failed, 2 for usage errors (no notify_url).
    """
    from imgwarm.events.webhook import Deliverer

    settings = load(ctx)
    stop = threading.Event()

    deliverer = Deliverer(settings, stop=stop,
                          say=lambda line: click.echo(printable(line), err=True))
    counts = deliverer.counts  # so far, when a second signal does not wait for the POST in hand
    with stopped_by_signals(then_interrupt(stop)), suppress(KeyboardInterrupt):
        counts = deliverer.run(once=once)
    summary = {"delivered": counts.delivered, "failed": counts.failed,
               "dropped": counts.dropped, "waiting": len(counts.waiting)}
    if as_json:
        click.echo(json_text(summary))
    else:
        click.echo(", ".join(f"{v} {k}" for k, v in summary.items()), err=True)
    ctx.exit(EXIT_OK)
