"""Store settings: where originals, variants and manifests live (a local folder or S3), and
how files are laid out in folders."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from imgwarm.config.group import Group
from imgwarm.config.marks import OUTPUT
from imgwarm.config.units import Duration


class StoreSettings(Group):
    """The origin: local folders or an S3 bucket; the shard layout."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    origin: Literal["local", "s3"] = Field(
        "local",
        description="Origin storage: local (origin_root and manifest_root) or s3 (s3_bucket).")
    origin_root: Path = Field(
        Path("var/origin"),
        description="Folder where variants are written; the path under it is the URL path.")
    manifest_root: Path = Field(
        Path("var/manifest"),
        description="Folder of the manifest store (one JSON file per source key).")
    max_dir_entries: int = Field(
        255, ge=16, le=65536, json_schema_extra=OUTPUT,
        description="Most entries any folder may hold.")
    shard_levels: int = Field(
        3, ge=1, le=8, json_schema_extra=OUTPUT,
        description="Folder levels between a root and a file; with 255 entries a level, "
        "3 levels hold 16 million files with room to spare.")
    fsync: bool = Field(True, description="fsync each file before renaming it into place.")
    s3_bucket: str | None = Field(None, description="S3 bucket of the origin (origin = s3).")
    s3_prefix: str = Field(
        "", description="Key prefix in the bucket for originals, variants and manifests.")
    s3_endpoint_url: str | None = Field(
        None, description="S3 endpoint for MinIO, Ceph, R2... (default: AWS).")
    s3_region: str | None = Field(None, description="S3 region (default: the AWS chain's).")
    s3_timeout: Duration = Field(
        Duration("10s"), gt=0, le=600,
        description="How long to wait to connect to, or on, the S3 endpoint (10s, 1m).")

    gc_grace: Duration = Field(
        Duration("7d"), ge=0, description="How long a variant no manifest names is kept before gc "
        "removes it (30m, 24h, 7d; 0: at once): HTML that still names it may be cached that "
        "long.")
    format_refresh: Duration = Field(
        Duration("60s"), ge=0, le=3600,
        description="How long a process (a worker, a listener, warm --follow) trusts the "
        "store's format record it read before reading it again (0: every look). A store "
        "upgraded to a newer format is refused by older code within this long.")

    @field_validator("s3_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        prefix = value.strip("/")
        if any(part in ("..", ".") for part in prefix.split("/")) or "//" in prefix:
            raise ValueError("'..', '.' and empty segments are not allowed")
        return f"{prefix}/" if prefix else ""

    @model_validator(mode="after")
    def _s3_needs_a_bucket(self) -> StoreSettings:
        if self.origin == "s3" and not self.s3_bucket:
            raise ValueError("origin = s3 needs s3_bucket (IMGWARM_S3_BUCKET)")
        return self
