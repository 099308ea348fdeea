"""Cache settings: the tiers a cache server answers from (RAM, NVMe), their budgets, and the
access logs that say what is hot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from imgwarm.config.group import Group
from imgwarm.config.marks import split_csv
from imgwarm.config.units import Budget, Duration


class CacheSettings(Group):
    """Tier roots and budgets, hotness, and where ``warm`` keeps its index."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    nvme_root: Path = Field(
        Path("var/cache/nvme"),
        description="Root of the NVMe (disk) tier: every variant, at its URL path.")
    ram_root: Path = Field(
        # /dev/shm is everyone's: the tier lives in a folder of this user's in it
        Path(f"/dev/shm/imgwarm-{os.geteuid()}/ram"),
        description="Root of the RAM tier: the hottest thumbnails, on a tmpfs (by default in "
        "a folder of the user's own under /dev/shm, made 0755).")
    ram_budget: Budget = Field(
        Budget(percent=80),
        description="Most bytes the RAM tier holds: a size (512K, 300M, 2G) or a percentage "
        "of its tmpfs; never more than the tmpfs has free.")
    nvme_budget: Budget | None = Field(
        None, description="Most bytes the NVMe tier holds (a size or a percentage of its file "
        "system); empty: every variant.")
    ram_max_width: int = Field(
        16383, ge=1, le=16383,
        description="Widest variant the RAM tier takes (hot-list paths go in whatever their "
        "width). The default takes any: the ranking weighs size already, and a cap cost "
        "2-5 points of RAM hits on bursty traces (docs: benchmarks); 640 keeps RAM for "
        "thumbnails.")
    hot_half_life: Duration = Field(
        Duration("4h"), gt=0,
        description="Half-life of a request's weight in the hotness score (30m, 4h, 7d): "
        "yesterday's hot ad cools down. 4h placed best on bursty-upload traces (a new "
        "listing's burst halving every few hours; docs: benchmarks); 24h or more for "
        "steady traffic.")
    access_logs: list[str] = Field(
        [], description="nginx access logs to read (comma-separated paths or globs; rotated "
        "and .gz files included): where hotness comes from.")
    log_format: str = Field(
        "combined", description="The access logs' nginx log_format: 'combined' or the "
        "format string itself.")
    image_prefix: str = Field(
        "/", description="URL path under which variants are served ('/': a variant's path "
        "is its URL path).")
    cache_state: Path = Field(
        Path("var/cache/state"),
        description="Folder where warm keeps its index, log positions and lock.")
    drop_gone: bool = Field(
        True, description="Remove from both tiers the variants that no manifest references "
        "any more (a source deleted or made again with other settings).")
    fill_processes: int = Field(
        1, ge=0, le=256,
        description="Processes that read and parse the manifests on a first or --full warm "
        "(from a local origin), each a slice of the manifest store's shard folders, while "
        "this one writes the index and starts the copies. 0: one a core; 1 (the default): "
        "read in this process, by threads (on 2 cores the copies already take both).")
    ram_allow_non_tmpfs: bool = Field(
        False, description="Let the RAM tier be on a file system that is not tmpfs.")

    @field_validator("access_logs", mode="before")
    @classmethod
    def _csv(cls, value: Any) -> Any:
        return split_csv(value)

    @field_validator("nvme_budget", mode="before")
    @classmethod
    def _no_budget(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value  # every variant

    @field_validator("image_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        stripped = value.strip("/")
        if any(part in ("", ".", "..") for part in stripped.split("/")) and stripped:
            raise ValueError("'..', '.' and empty segments are not allowed")
        return f"/{stripped}/" if stripped else "/"

