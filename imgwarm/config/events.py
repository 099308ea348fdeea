"""Events settings: what `imgwarm listen` and `imgwarm watch` take in (which keys are
originals, the webhook's token, limits), and what goes out (the Redis stream cache boxes
follow, the signed webhook to the application)."""

from __future__ import annotations

import re

from pydantic import ConfigDict, Field, field_validator

from imgwarm.config.group import Group
from imgwarm.config.units import Duration, Size


class EventsSettings(Group):
    """Bucket events in, the events stream and webhook out."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)

    originals_prefix: str = Field(
        "", description="Key prefix (under s3_prefix) of the originals: a bucket event or a "
        "reconcile listing outside it is ignored ('' takes every key that is not imgwarm's "
        "own: variants, manifests and journal never are).")
    listen_token: str | None = Field(
        None, description="Bearer token that `imgwarm listen --http` requires of each POST "
        "(Authorization: Bearer TOKEN); --http refuses to start without one. Give it in the "
        "environment, not a file others read.")
    event_max_bytes: Size = Field(
        Size("256K"), ge=1024,
        description="Largest bucket notification taken in (a bigger one is refused, counted "
        "and logged in one line).")
    events_redis_url: str | None = Field(
        None, description="Redis that holds the events stream (default: the broker's, "
        "broker_url). Workers and `listen` write to it; in-process `optimize` and `delete` "
        "only when it is set.")
    events_stream: str = Field(
        "imgwarm:events", description="Redis stream a publish, a final failure and a takedown "
        "are added to; `warm --follow` reads it.")
    events_max_len: int = Field(
        100_000, ge=100, le=100_000_000,
        description="About how many events the stream keeps (older ones are trimmed; a "
        "follower that fell further behind catches up from the journal).")
    follow_group: str | None = Field(
        None, description="Consumer group of this cache box on the events stream (`warm "
        "--follow`): each group sees every event once and resumes where it stopped. Empty: "
        "warm-<host name>-<8 hex of the cache_state path>, one a box and state folder.")
    notify_url: str | None = Field(
        None, description="URL each event is POSTed to, signed (X-Imgwarm-Signature) with "
        "notify_secret; empty: no webhook.")
    notify_secret: str | None = Field(
        None, description="Secret of the webhook's HMAC-SHA256 signature (needed with "
        "notify_url). Give it in the environment, not a file others read.")
    notify_timeout: Duration = Field(
        Duration("10s"), gt=0, le=300, description="How long one webhook POST may take.")
    notify_give_up: Duration = Field(
        Duration("3d"), ge=60, description="How long an event is POSTed again (with backoff) "
        "before it is dropped with a line in the log.")

    @field_validator("originals_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        prefix = value.strip("/")
        if any(part in ("..", ".") or part.startswith(".") for part in prefix.split("/")
               if prefix) or "//" in prefix:
            raise ValueError("'..', '.', hidden and empty segments are not allowed")
        return f"{prefix}/" if prefix else ""

    @field_validator("events_stream", "follow_group")
    @classmethod
    def _check_stream(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.fullmatch(r"[A-Za-z0-9:_.-]{1,200}", value):
            raise ValueError("letters, digits and ':_.-' only, 1 to 200 of them")
        return value

    @field_validator("follow_group", mode="before")
    @classmethod
    def _blank_group(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value  # derived

    @field_validator("notify_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value and not re.match(r"https?://[^/\s]+", value):
            raise ValueError("an http:// or https:// URL")
        return value or None
