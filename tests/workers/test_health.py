"""`imgwarm health` for a worker: a real worker answers its ping through a real Redis, and a
stopped one does not."""

from __future__ import annotations

import socket
import subprocess

import pytest

from imgwarm.cli.health import role_of
from tests.support.queues import Queue
from tests.support.servers import IMGWARM

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_running_worker_is_healthy_and_a_stopped_one_is_not(local_queue: Queue) -> None:
    worker = local_queue.worker()
    node = worker.name.replace("%h", socket.gethostname())
    done = local_queue.cli("health", "--role", "worker", "--node", node)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == f"worker: healthy: {node} answers a ping"
    other = local_queue.cli("health", "--role", "worker", "--node", "celery@elsewhere")
    assert other.returncode == 1 and "UNHEALTHY" in other.stdout
    worker.stop()
    gone = local_queue.cli("health", "--role", "worker", "--node", node)
    assert gone.returncode == 1 and "does not answer" in gone.stdout


def test_a_broker_that_cannot_be_reached_is_one_line(local_queue: Queue) -> None:
    env = {**local_queue.env, "IMGWARM_BROKER_URL": "redis://127.0.0.1:1/0"}
    done = subprocess.run([str(IMGWARM), "health", "--role", "worker"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "cannot reach the broker" in done.stderr


def test_the_role_comes_from_the_main_process() -> None:
    assert role_of(["/usr/local/bin/python", "/usr/local/bin/imgwarm", "worker", "-c", "2"]) \
        == "worker"
    assert role_of(["imgwarm", "warm", "--every", "5m"]) == "warm"
    assert role_of(["imgwarm", "warm", "--follow"]) == "warm"
    assert role_of(["imgwarm", "warm", "--every=5m", "--json"]) == "warm"
    assert role_of(["imgwarm", "warm"]) == "cli"  # once: nothing to watch
    assert role_of(["imgwarm", "optimize", "/data/in"]) == "cli"
    assert role_of(["imgwarm", "--config", "/etc/imgwarm.toml", "worker"]) == "worker"
    assert role_of(["imgwarm", "optimize", "worker"]) == "cli"  # a folder named worker
    assert role_of([]) == "cli"
