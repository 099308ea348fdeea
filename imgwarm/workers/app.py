"""The Celery app, built from the queue settings (never from a module-level config).

A worker adds the task to it (``task.worker_app``); a client (enqueue, status) uses it as is.
"""

from __future__ import annotations

from typing import Literal

from celery import Celery

from imgwarm.config import QueueSettings

TASK_NAME = "imgwarm.optimize"
DELETE_TASK = "imgwarm.delete"  # a takedown, for web apps (lifecycle/delete.py)
SLICE_TASK = "imgwarm.slice"  # one slice of fsck or gc --full (lifecycle/fanout.py)
QUEUED = "QUEUED"  # our state for a job on the queue that no worker has taken yet

Role = Literal["client", "worker"]


def make_app(settings: QueueSettings, role: Role = "client") -> Celery:
    """The app for a client (enqueue, status: fail fast when Redis is away) or for a worker
    (keep reconnecting)."""
    app = Celery("imgwarm", broker=settings.broker_url, backend=settings.result_backend,
                 set_as_current=False)
    fast = settings.broker_timeout
    transport = {
        # A job taken by a worker that died is handed out again after this long.
        "visibility_timeout": int(settings.visibility_timeout),
        "unacked_restore_interval": max(1, min(10, int(settings.visibility_timeout) // 4)),
        "unacked_restore_throttle": 1,
        # The sweep that hands those jobs out holds a Redis lock; a worker killed inside it
        # leaves the lock for this long (kombu's 5 minutes would stall every lost job).
        "unacked_mutex_expire": max(5, min(60, int(settings.visibility_timeout) // 2)),
    }
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_acks_late=True,  # a job is acknowledged when done, not when taken
        task_reject_on_worker_lost=True,  # a worker process killed mid-job: the job goes back
        worker_prefetch_multiplier=1,  # a worker holds no more jobs than it runs
        task_soft_time_limit=settings.task_soft_time_limit,
        task_time_limit=settings.task_time_limit,
        task_track_started=True,
        result_extended=True,  # retries and arguments are kept with the state
        result_expires=int(settings.result_expires),
        worker_max_tasks_per_child=settings.worker_max_tasks_per_child,
        worker_max_memory_per_child=settings.worker_max_memory_mib * 1024,  # KiB
        broker_transport_options=transport,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=role == "worker",
        task_default_queue="imgwarm",
    )
    if role == "client":
        # Redis away: say so within seconds instead of retrying for a minute.
        app.conf.update(
            broker_connection_timeout=fast,
            broker_connection_max_retries=1,
            broker_transport_options={
                **transport, "socket_connect_timeout": fast, "socket_timeout": fast,
                "max_retries": 1,
            },
            task_publish_retry_policy={"max_retries": 1, "interval_start": 0,
                                       "interval_step": 0.2, "interval_max": 0.2},
            redis_socket_connect_timeout=fast,
            redis_socket_timeout=fast,  # a Redis that accepts but never answers, too
            result_backend_transport_options={
                "retry_policy": {"max_retries": 1, "interval_start": 0, "interval_step": 0.2,
                                 "interval_max": 0.2},
            },
        )
    return app
