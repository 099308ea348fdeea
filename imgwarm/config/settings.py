"""The Settings model and its loader."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from imgwarm.exceptions import SettingsError

Format = Literal["avif", "webp", "jpeg"]
FORMAT_ORDER: tuple[Format, ...] = ("avif", "webp", "jpeg")  # best first, as <picture> wants
ENV_PREFIX = "IMGWARM_"
DEFAULT_CONFIG_FILE = Path("imgwarm.toml")


def _split_csv(value: Any) -> Any:
    """Accept "320,640" (env, CLI) as well as real lists (TOML, Python)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Everything imgwarm can be told. Each field is also ``IMGWARM_<NAME>``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    origin_root: Path = Field(
        Path("var/origin"),
        description="Folder where variants are written; the path under it is the URL path.",
    )
    manifest_root: Path = Field(
        Path("var/manifest"),
        description="Folder of the manifest store (one JSON file per source key).",
    )
    widths: Annotated[list[int], NoDecode] = Field(
        [320, 640, 1280, 1920],
        description="Variant widths in pixels (comma-separated); each 1..16383. "
        "Widths below the source's are made, plus the source width capped at the largest.",
    )
    formats: Annotated[list[Format], NoDecode] = Field(
        ["webp", "jpeg"],
        description="Output formats (comma-separated) among avif, webp, jpeg.",
    )
    webp_quality: int = Field(80, ge=1, le=100, description="WebP quality.")
    webp_effort: int = Field(4, ge=0, le=6, description="WebP encoder effort (slower = smaller).")
    jpeg_quality: int = Field(82, ge=1, le=100, description="Progressive JPEG quality.")
    avif_quality: int = Field(55, ge=1, le=100, description="AVIF quality.")
    avif_effort: int = Field(
        4, ge=0, le=10, description="AVIF encoder effort, 0..10 (slower = smaller)."
    )
    accept_png: bool = Field(
        True, description="Also accept PNG sources (when their bytes and their name say PNG)."
    )
    max_pixels: int = Field(
        100_000_000, ge=1, description="Refuse sources with more pixels (checked on the header)."
    )
    max_bytes: int = Field(
        64 * 1024 * 1024, ge=1, description="Refuse source files larger than this many bytes."
    )
    max_memory: int = Field(
        1 << 30, ge=64 << 20,
        description="Most memory (bytes) the sources being made at once may take together, "
        "estimated on the header: a source needing more alone is refused before decoding; "
        "others wait their turn. Shared by the user's imgwarm processes on the machine.",
    )
    keep_gps: bool = Field(False, description="Keep the GPS block of the source's EXIF.")
    keep_maker_notes: bool = Field(False, description="Keep the camera maker notes in EXIF.")
    hash_length: int = Field(
        16, ge=16, le=64, description="Hex digits of the SHA-256 content hash in file names."
    )
    max_dir_entries: int = Field(
        255, ge=16, le=65536, description="Most entries any folder may hold."
    )
    shard_levels: int = Field(
        3,
        ge=1,
        le=8,
        description="Folder levels between a root and a file; with 255 entries a level, "
        "3 levels hold 16 million files with room to spare.",
    )
    workers: int = Field(
        0, ge=0, le=256, description="Sources processed at once; 0 means one per CPU core."
    )
    fsync: bool = Field(True, description="fsync each file before renaming it into place.")

    # Origin: where originals are read by key, and variants and manifests are written.
    origin: Literal["local", "s3"] = Field(
        "local",
        description="Origin storage: local (origin_root and manifest_root) or s3 (s3_bucket).",
    )
    s3_bucket: str | None = Field(None, description="S3 bucket of the origin (origin = s3).")
    s3_prefix: str = Field(
        "", description="Key prefix in the bucket for originals, variants and manifests."
    )
    s3_endpoint_url: str | None = Field(
        None, description="S3 endpoint for MinIO, Ceph, R2... (default: AWS)."
    )
    s3_region: str | None = Field(None, description="S3 region (default: the AWS chain's).")
    s3_timeout: float = Field(
        10.0, gt=0, le=600, description="Seconds to connect to, or wait on, the S3 endpoint."
    )

    # Queue: Celery on Redis.
    broker_url: str = Field("redis://127.0.0.1:6379/0", description="Celery broker URL.")
    result_backend: str = Field(
        "redis://127.0.0.1:6379/0", description="Celery result backend URL (job states)."
    )
    broker_timeout: float = Field(
        3.0, gt=0, le=120,
        description="Seconds enqueue and status wait for the broker before failing.",
    )
    task_soft_time_limit: int = Field(
        120, ge=1, le=86400, description="Seconds a job may run before it is told to stop."
    )
    task_time_limit: int = Field(
        180, ge=1, le=86400,
        description="Seconds after which a job's worker process is killed (above the soft one).",
    )
    task_max_retries: int = Field(
        8, ge=0, le=100, description="Retries of a job after transient faults (S3, network)."
    )
    retry_backoff_max: int = Field(
        60, ge=1, le=3600,
        description="Longest wait, in seconds, between retries (exponential, with jitter).",
    )
    task_max_lost: int = Field(
        3, ge=1, le=100,
        description="Times a job may lose its worker process (a crash, out of memory) "
        "before it fails for good.",
    )
    visibility_timeout: int = Field(
        600, ge=2, le=86400,
        description="Seconds after which a job taken by a worker that died is given to "
        "another; above task_time_limit and retry_backoff_max.",
    )
    worker_max_tasks_per_child: int = Field(
        500, ge=1, description="Jobs a worker process runs before it is replaced."
    )
    worker_max_memory_mib: int = Field(
        1024, ge=64,
        description="A worker process above this resident memory is replaced after its job.",
    )
    result_expires: int = Field(
        7 * 86400, ge=60, description="Seconds job states are kept for `imgwarm status`."
    )

    @field_validator("widths", "formats", mode="before")
    @classmethod
    def _csv(cls, value: Any) -> Any:
        return _split_csv(value)

    @field_validator("widths")
    @classmethod
    def _check_widths(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("at least one width is needed")
        for width in value:
            if not 1 <= width <= 16383:
                raise ValueError(f"width {width} is outside 1..16383")
        return sorted(set(value))

    @field_validator("formats")
    @classmethod
    def _check_formats(cls, value: list[Format]) -> list[Format]:
        if not value:
            raise ValueError("at least one format is needed")
        return [f for f in FORMAT_ORDER if f in value]

    @field_validator("s3_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        prefix = value.strip("/")
        if any(part in ("..", ".") for part in prefix.split("/")) or "//" in prefix:
            raise ValueError("'..', '.' and empty segments are not allowed")
        return f"{prefix}/" if prefix else ""

    @model_validator(mode="after")
    def _queue_limits_agree(self) -> Settings:
        if self.task_time_limit <= self.task_soft_time_limit:
            raise ValueError(
                f"task_time_limit={self.task_time_limit} must be above "
                f"task_soft_time_limit={self.task_soft_time_limit}"
            )
        if self.visibility_timeout <= max(self.task_time_limit, self.retry_backoff_max):
            raise ValueError(
                f"visibility_timeout={self.visibility_timeout} must be above task_time_limit "
                f"and retry_backoff_max, or running jobs would be handed out twice"
            )
        if self.origin == "s3" and not self.s3_bucket:
            raise ValueError("origin = s3 needs s3_bucket (IMGWARM_S3_BUCKET)")
        return self

    @model_validator(mode="after")
    def _shards_fit_the_hash(self) -> Settings:
        # Shard folders come from the hash in the file name, so anyone can check them.
        bits = (self.max_dir_entries.bit_length() - 1) * self.shard_levels
        if bits > 4 * self.hash_length:
            raise ValueError(
                f"shard_levels={self.shard_levels} with max_dir_entries={self.max_dir_entries} "
                f"needs {bits} bits of hash; hash_length={self.hash_length} gives "
                f"{4 * self.hash_length}: raise hash_length or lower shard_levels"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # First wins: explicit overrides, environment, then the TOML file if one is set.
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls)

    def output_digest(self) -> str:
        """A fingerprint of every setting that changes output bytes or names."""
        relevant = self.model_dump(
            mode="json",
            include={
                "widths", "formats", "webp_quality", "webp_effort", "jpeg_quality",
                "avif_quality", "avif_effort", "keep_gps", "keep_maker_notes",
                "hash_length", "max_dir_entries", "shard_levels",
            },
        )
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]

    def effective_workers(self) -> int:
        return self.workers or (os.cpu_count() or 1)


def _allowed(info: FieldInfo) -> str:
    """The allowed range of a field, from its constraints, for error messages."""
    low = high = None
    for meta in info.metadata:
        low = getattr(meta, "ge", low)
        high = getattr(meta, "le", high)
    if low is not None and high is not None:
        return f"allowed: {low}..{high}"
    if low is not None:
        return f"allowed: {low} or more"
    return info.description or ""


def _describe(error: ValidationError, cls: type[Settings]) -> str:
    lines = []
    for item in error.errors():
        detail = str(item["msg"]).removeprefix("Value error, ")
        if not item["loc"]:  # a rule about several settings together
            lines.append(detail)
            continue
        name = str(item["loc"][0])
        info = cls.model_fields.get(name)
        if info is None:
            lines.append(f"unknown setting {name!r}")
            continue
        got = item.get("input")
        lines.append(
            f"setting {name} = {got!r} (from an option, {ENV_PREFIX}{name.upper()} or the "
            f"config file): {detail}; {_allowed(info)}"
        )
    return "invalid settings:\n  " + "\n  ".join(lines)


def _config_file(config_file: Path | None) -> Path | None:
    if config_file is not None:
        if not config_file.is_file():
            raise SettingsError(f"config file {config_file} does not exist")
        return config_file
    env_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
    if env_file:
        return _config_file(Path(env_file))
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from defaults, file, environment and overrides; None overrides are unset.

    Raises SettingsError naming the setting and its allowed range.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    path = _config_file(config_file)
    cls: type[Settings] = Settings
    if path is not None:
        config = SettingsConfigDict(**{**Settings.model_config, "toml_file": path})
        cls = type("Settings", (Settings,), {"model_config": config})
    try:
        return cls(**given)
    except ValidationError as error:
        raise SettingsError(_describe(error, cls)) from None
    except ValueError as error:  # malformed TOML
        raise SettingsError(f"config file {path}: {error}") from None
