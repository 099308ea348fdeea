"""Queue settings: Celery on Redis, its time limits, retries and worker processes."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from pydantic import ConfigDict, Field, model_validator

from imgwarm.config.group import Group
from imgwarm.config.units import Duration, Mebibytes, duration_text


def masked_url(url: str) -> str:
    """A broker URL fit to print or log: its password as ``**``."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:**@{host}{port}"))


class QueueSettings(Group):
    """The broker, job limits and worker processes."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    broker_url: str = Field("redis://127.0.0.1:6379/0", description="Celery broker URL.")
    result_backend: str = Field(
        "redis://127.0.0.1:6379/0", description="Celery result backend URL (job states).")
    broker_timeout: Duration = Field(
        Duration("3s"), gt=0, le=120,
        description="How long enqueue and status wait for the broker before failing.")
    task_soft_time_limit: Duration = Field(
        Duration("2m"), ge=1, le=86400,
        description="How long a job may run before it is told to stop.")
    task_time_limit: Duration = Field(
        Duration("3m"), ge=1, le=86400,
        description="How long before a job's worker process is killed (above the soft limit).")
    task_max_retries: int = Field(
        8, ge=0, le=100, description="Retries of a job after transient faults (S3, network).")
    retry_backoff_max: Duration = Field(
        Duration("1m"), ge=1, le=3600,
        description="Longest wait between retries (exponential, with jitter).")
    task_max_lost: int = Field(
        3, ge=1, le=100,
        description="Times a job may lose its worker process (a crash, out of memory) "
        "before it fails for good.")
    visibility_timeout: Duration = Field(
        Duration("10m"), ge=2, le=86400,
        description="How long before a job taken by a worker that died is given to "
        "another; above task_time_limit and retry_backoff_max.")
    worker_max_tasks_per_child: int = Field(
        500, ge=1, description="Jobs a worker process runs before it is replaced.")
    worker_max_memory_mib: Mebibytes = Field(
        Mebibytes(1024), ge=64,
        description="A worker process above this resident memory is replaced after its job "
        "(MiB; or a size: 512M, 2G).")
    result_expires: Duration = Field(
        Duration("7d"), ge=60, description="How long job states are kept for `imgwarm status`.")

    @model_validator(mode="after")
    def _limits_agree(self) -> QueueSettings:
        if self.task_time_limit <= self.task_soft_time_limit:
            raise ValueError(
                f"task_time_limit={duration_text(self.task_time_limit)} must be above "
                f"task_soft_time_limit={duration_text(self.task_soft_time_limit)}")
        if self.visibility_timeout <= max(self.task_time_limit, self.retry_backoff_max):
            raise ValueError(
                f"visibility_timeout={duration_text(self.visibility_timeout)} must be above "
                "task_time_limit and retry_backoff_max, or running jobs would be handed out "
                "twice")
        return self
