"""The queue: a Celery app on a Redis broker and its one task, thin wrappers around pipeline.

``make_app(settings)`` builds the app; ``imgwarm worker`` runs it; ``enqueue`` (also
``imgwarm.enqueue``) puts a source key on the queue; ``job_status`` says where a key stands.
"""

from __future__ import annotations

from imgwarm.workers.app import make_app
from imgwarm.workers.jobs import Job, JobStatus, enqueue, job_status

__all__ = ["Job", "JobStatus", "enqueue", "job_status", "make_app"]
