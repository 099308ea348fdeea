"""The queue: a Celery app on a Redis broker and its tasks, optimize, delete and slice (one
slice of fsck or gc --full), thin wrappers around the library (the pipeline, the lifecycle).

    app.py     ``make_app(queue settings)``: the Celery app, for clients and workers
    task.py    the optimize, delete and slice tasks and ``worker_app(settings)``, what
               ``imgwarm worker`` runs
    client.py  ``enqueue`` and ``enqueue_delete`` (also ``imgwarm.enqueue``...), ``Job.wait``,
               ``job_status``, ``ping`` (for ``imgwarm health``)
    fanout.py  ``fan_out``: every slice of a store-wide pass a job, waited for and merged
               (``fsck --queue``, ``gc --full --queue``)

Arrows run one way: client and task use app; nothing here is imported by the library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imgwarm.workers.app import make_app
    from imgwarm.workers.client import Job, JobStatus, enqueue, job_status

__all__ = ["Job", "JobStatus", "enqueue", "job_status", "make_app"]
_WHERE = {"make_app": "app", "Job": "client", "JobStatus": "client", "enqueue": "client",
          "job_status": "client"}


def __getattr__(name: str) -> Any:  # PEP 562: Celery is imported on first use
    if name not in _WHERE:
        raise AttributeError(f"module 'imgwarm.workers' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"imgwarm.workers.{_WHERE[name]}"), name)
