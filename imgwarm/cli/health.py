"""``imgwarm health``: is this container's imgwarm doing its job? For HEALTHCHECK."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import click

from imgwarm.cli.common import EXIT_FAILED, EXIT_OK, command, load

ROLES = ("auto", "worker", "warm", "cli")


def role_of(command_line: list[str]) -> str:
    """The role of a process from its command line: `imgwarm worker ...` is a worker,
    `imgwarm warm --every ...` (or ``--follow``) the warm service, anything else a one-off
    command."""
    names = [Path(word).name for word in command_line]
    if "imgwarm" not in names:
        return "cli"
    rest = command_line[names.index("imgwarm") + 1:]
    while rest and rest[0].startswith("--config"):  # the one option before a command
        rest = rest[1:] if "=" in rest[0] else rest[2:]
    command = rest[0] if rest else ""
    if command == "warm" and any(w in ("--every", "--follow") or w.startswith("--every=")
                                 for w in rest):
        return "warm"
    return "worker" if command == "worker" else "cli"


def _main_process() -> list[str]:
    """The command line of the container's first process (empty outside one)."""
    try:
        raw = Path("/proc/1/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


@command()
@click.option("--role", type=click.Choice(ROLES), default="auto", show_default=True,
              help="What to check: a worker answers a ping through the broker; the warm "
              "service finished a run lately, and well; a one-off command's settings load. "
              "auto: the role of the container's first process (PID 1).")
@click.option("--node", metavar="NAME",
              help="The worker to ping (default: celery@ this host's name, Celery's default).")
@click.pass_context
def health(ctx: click.Context, /, role: str, node: str | None) -> None:
    """Say in one line whether this imgwarm is healthy; exit 0 if it is, 1 if not. Made for
    a container's HEALTHCHECK (the image runs it for every role)."""
    settings = load(ctx)
    if role == "auto":
        role = role_of(_main_process())
    healthy, why = True, "settings load"
    if role == "worker":
        from imgwarm.workers.client import ping

        node = node or f"celery@{socket.gethostname()}"
        healthy = ping(settings, node)
        why = f"{node} {'answers' if healthy else 'does not answer'} a ping"
    elif role == "warm":
        from imgwarm.cache.heartbeat import last

        found = last(settings.cache.cache_state)
        if found is None:
            healthy, why = False, f"no run recorded in {settings.cache.cache_state}"
        else:
            healthy, why = found.healthy(time.time())
    click.echo(f"{role}: {'healthy' if healthy else 'UNHEALTHY'}: {why}")
    ctx.exit(EXIT_OK if healthy else EXIT_FAILED)
