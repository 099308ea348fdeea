"""Bucket notifications in: one message body (bytes) becomes the changes to originals it tells
of, each a created or removed source key, with what orders it.

Shapes taken:

- S3's ``{"Records": [...]}``, as AWS sends it to SQS, SNS or a function, and MinIO to a
  webhook (``{"EventName", "Key", "Records": [...]}``); keys in ``s3.object.key`` are
  URL-encoded (``red+flower.jpg``, ``%C3%BC...``) and are decoded with ``unquote_plus``.
- MinIO's Redis target in ``access`` format: ``[{"Event": [records...], "EventTime": ...}]``
  (what it RPUSHes; see MinIO's internal/event/target/redis.go).
- EventBridge's ``{"detail-type": "Object Created", "source": "aws.s3", "detail": {"bucket":
  {"name"}, "object": {"key", "sequencer"}}}``: its keys are NOT URL-encoded.
- SNS-wrapped: ``{"Type": "Notification", "Message": "<one of the above, as a string>"}``.
- ``s3:TestEvent`` (sent when a notification is configured): ignored, counted as a test.

Which keys are ours to make: a key outside ``s3_prefix`` or ``originals_prefix`` is ignored
("outside"); one ``check_source_key`` refuses (imgwarm's hidden manifests, journal and claims,
and variant-shaped paths) is ignored as "own": this is the loop guard, imgwarm's own writes
never queue a job. An event for another bucket than ``s3_bucket`` is "outside" too. With a
local origin (``origin = "local"``) the bucket is not checked and the key is taken as given,
relative to origin_root (listen is mainly for S3; ``imgwarm watch`` is for local folders).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import unquote_plus

from imgwarm.config import Settings
from imgwarm.exceptions import ImgwarmError, MalformedEvent
from imgwarm.nesting import check_nesting
from imgwarm.store import check_source_key, safe_relative
from imgwarm.text import printable

Kind = Literal["created", "removed"]
Ignored = Literal["test", "outside", "own", "other"]
MAX_DEPTH = 12  # the deepest shape (SNS > Records > s3 > object) needs 6
MAX_RECORDS = 1000  # AWS sends one record a message; MinIO one; a batch far fewer than this


@dataclass(frozen=True)
class Change:
    """One change to an original, as a notification told it."""

    bucket: str
    key: str  # decoded, relative to s3_prefix: the source key imgwarm makes
    kind: Kind
    sequencer: str  # upper-case hex, '' when the sender gave none
    time: float  # the event's time (Unix seconds), 0 when it gave none


@dataclass
class Parsed:
    """What one message held: the changes to handle, and what was ignored, by why."""

    changes: list[Change]
    ignored: list[tuple[Ignored, str]]  # (why, the key or the event's name)


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedEvent(f"{what} is not a JSON object")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise MalformedEvent(f"{what} is not a string")
    return value


def event_time(value: Any) -> float:
    """An ISO 8601 time (``2026-11-27T20:31:04.123Z``) or Unix seconds; 0 when none or bad
    (a number too large for a float, or not finite, included: it would order a key for ever)."""
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            found = float(value)
        elif isinstance(value, str) and value:
            found = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        else:
            return 0.0
    except (ValueError, OverflowError):
        return 0.0
    return found if math.isfinite(found) else 0.0


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _sequencer(value: Any) -> str:
    if value is None or value == "":
        return ""
    text = _text(value, "the sequencer").strip().upper()
    if len(text) > 64 or any(c not in "0123456789ABCDEF" for c in text):
        raise MalformedEvent(f"sequencer {printable(text[:70])!r} is not hexadecimal")
    return text


def _kind(name: str) -> Kind | None:
    """ObjectCreated:* and ObjectRemoved:* (LifecycleExpiration deletes too); others: None."""
    bare = name.removeprefix("s3:")
    if bare.startswith("ObjectCreated"):
        return "created"
    if bare.startswith(("ObjectRemoved", "LifecycleExpiration:Delete")):
        return "removed"
    return None


def _from_record(record: Any) -> tuple[str, Kind | None, str, str, float]:
    """(bucket, kind, key as encoded, sequencer, time) of one S3 record."""
    record = _obj(record, "a record")
    name = _text(record.get("eventName"), "a record's eventName")
    s3 = _obj(record.get("s3"), "a record's s3")
    bucket = _text(_obj(s3.get("bucket"), "s3.bucket").get("name"), "s3.bucket.name")
    found = _obj(s3.get("object"), "s3.object")
    return (bucket, _kind(name), _text(found.get("key"), "s3.object.key"),
            _sequencer(found.get("sequencer")), event_time(record.get("eventTime")))


def _records(document: Any) -> tuple[list[Any], bool]:
    """The S3 records a document holds, and whether it is an s3:TestEvent."""
    if isinstance(document, list):  # MinIO's Redis target, access format
        found: list[Any] = []
        for entry in document:
            found.extend(_obj(entry, "an access-format entry").get("Event") or [])
        return found, False
    document = _obj(document, "the message")
    if document.get("Event") == "s3:TestEvent":
        return [], True
    records = document.get("Records")
    if not isinstance(records, list):
        raise MalformedEvent("no Records, detail or Event: not a bucket notification")
    return records, False


def parse(body: bytes, settings: Settings) -> Parsed:
    """The changes one message body tells of. MalformedEvent (one line) when it is too big,
    not JSON, nested too deep or not of a shape above."""
    limit = settings.events.event_max_bytes
    if len(body) > limit:
        raise MalformedEvent(f"{len(body)} bytes, over event_max_bytes ({limit})")
    try:
        check_nesting(body, MAX_DEPTH)
        document = json.loads(body, parse_constant=_no_constant)  # no NaN, no Infinity
    except ImgwarmError as error:
        raise MalformedEvent(str(error)) from None
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError too
        raise MalformedEvent(f"not JSON: {printable(str(error))[:200]}") from None
    if isinstance(document, dict) and document.get("Type") == "Notification":  # SNS
        inner = _text(document.get("Message"), "SNS Message").encode("utf-8", "surrogatepass")
        return parse(inner, settings)
    parsed = Parsed([], [])
    if isinstance(document, dict) and "detail" in document and "detail-type" in document:
        _from_eventbridge(document, settings, parsed)
        return parsed
    records, test = _records(document)
    if test:
        parsed.ignored.append(("test", "s3:TestEvent"))
    if len(records) > MAX_RECORDS:
        raise MalformedEvent(f"{len(records)} records, over {MAX_RECORDS}")
    for record in records:
        bucket, kind, encoded, sequencer, when = _from_record(record)
        try:
            key = unquote_plus(encoded, errors="strict")
        except UnicodeDecodeError:
            raise MalformedEvent(f"key {printable(encoded[:200])!r} does not decode to "
                                 "UTF-8") from None
        _add(parsed, settings, bucket, kind, key, sequencer, when, encoded)
    return parsed


def _from_eventbridge(document: dict[str, Any], settings: Settings, parsed: Parsed) -> None:
    detail = _obj(document.get("detail"), "detail")
    name = _text(document.get("detail-type"), "detail-type")
    kind: Kind | None = {"Object Created": "created", "Object Deleted": "removed"}.get(
        name)  # type: ignore[assignment]
    bucket = _text(_obj(detail.get("bucket"), "detail.bucket").get("name"), "bucket.name")
    found = _obj(detail.get("object"), "detail.object")
    key = _text(found.get("key"), "detail.object.key")  # not URL-encoded in EventBridge
    _add(parsed, settings, bucket, kind, key, _sequencer(found.get("sequencer")),
         event_time(document.get("time")), name)


def _add(parsed: Parsed, settings: Settings, bucket: str, kind: Kind | None, key: str,
         sequencer: str, when: float, shown: str) -> None:
    if kind is None:  # an ACL, tagging or restore event: nothing to make
        parsed.ignored.append(("other", shown))
        return
    found = source_key(bucket, key, settings)
    if isinstance(found, tuple):
        parsed.ignored.append(found)
    else:
        parsed.changes.append(Change(bucket, found, kind, sequencer, when))


def source_key(bucket: str | None, key: str, settings: Settings) -> str | tuple[Ignored, str]:
    """The source key an object's key (in the bucket, decoded) names; or why it is not one
    to make: ("outside", key) or ("own", key)."""
    store = settings.store
    if store.origin == "s3":
        if bucket is not None and bucket != store.s3_bucket:
            return ("outside", f"{bucket}/{key}")
        if not key.startswith(store.s3_prefix):
            return ("outside", key)
        key = key[len(store.s3_prefix):]
    if not key or key.endswith("/"):  # a "folder" object some consoles make
        return ("outside", key)
    try:
        safe_relative(key)
    except ImgwarmError:  # '..', control characters: no source imgwarm can make
        return ("outside", key)
    try:
        check_source_key(key)
    except ImgwarmError:  # hidden (manifests, journal, claims) or variant-shaped: imgwarm's
        return ("own", key)
    if not key.startswith(settings.events.originals_prefix):
        return ("outside", key)
    return key
