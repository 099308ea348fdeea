"""Notifications read: every shape taken (AWS and MinIO Records, MinIO's access format,
EventBridge, SNS-wrapped), keys decoded or not as each sender encodes them, the loop guard,
and the order kept per key in a real Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from imgwarm.config import Settings, load_settings
from imgwarm.events.notification import Change, parse
from imgwarm.events.order import Order
from imgwarm.exceptions import MalformedEvent
from tests.support.listening import minio_access
from tests.support.servers import RedisServer


@pytest.fixture
def s3_settings(settings: Settings) -> Settings:
    return load_settings(origin="s3", s3_bucket="photos", s3_prefix="site",
                         originals_prefix="up", event_max_bytes="2K")


def _aws(name: str, key: str, bucket: str = "photos", sequencer: str = "0055AED6DCD90281E5"
         ) -> dict[str, Any]:
    return {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3",
                         "eventTime": "2026-11-27T10:00:00.123Z", "eventName": name,
                         "s3": {"bucket": {"name": bucket}, "object": {
                             "key": key, "size": 1, "sequencer": sequencer}}}]}


def _keys(body: Any, settings: Settings) -> list[tuple[str, str]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return [(c.kind, c.key) for c in parse(data, settings).changes]


def test_shapes_and_keys(s3_settings: Settings) -> None:
    assert _keys(_aws("ObjectCreated:Put", "site/up/red+flower%2B1.jpg"), s3_settings) == [
        ("created", "up/red flower+1.jpg")]
    assert _keys(_aws("ObjectRemoved:Delete", "site/up/%C3%BCn%C3%AF%2F%C3%A7.jpg"),
                 s3_settings) == [("removed", "up/ünï/ç.jpg")]
    assert _keys(minio_access("created", "photos", "site/up/a b.jpg", "1"), s3_settings) == [
        ("created", "up/a b.jpg")]
    bridge = {"version": "0", "detail-type": "Object Created", "source": "aws.s3",
              "time": "2026-11-27T10:00:00Z", "detail": {
                  "bucket": {"name": "photos"},
                  "object": {"key": "site/up/red+flower%2B1.jpg", "sequencer": "00AB"}}}
    assert _keys(bridge, s3_settings) == [("created", "up/red+flower%2B1.jpg")]  # as given
    sns = {"Type": "Notification", "Message": json.dumps(_aws("ObjectCreated:Copy",
                                                              "site/up/x.jpg"))}
    assert _keys(sns, s3_settings) == [("created", "up/x.jpg")]


def test_what_is_ignored(s3_settings: Settings) -> None:
    test = parse(json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent",
                             "Bucket": "photos"}).encode(), s3_settings)
    assert (test.changes, test.ignored) == ([], [("test", "s3:TestEvent")])
    cases = {
        "site/.imgwarm/manifests/ab/cd/0123.json": "own",
        "site/up/.hidden.jpg": "own",
        "site/ab/cd/photo.0123456789abcdef0123.webp": "own",  # a variant
        "site/other/x.jpg": "outside",  # not under originals_prefix
        "elsewhere/up/x.jpg": "outside",  # not under s3_prefix
        "site/up/folder/": "outside",
    }
    for key, why in cases.items():
        found = parse(json.dumps(_aws("ObjectCreated:Put", key)).encode(), s3_settings)
        assert [w for w, _ in found.ignored] == [why], key
    theirs = parse(json.dumps(_aws("ObjectCreated:Put", "site/up/x.jpg", "other")).encode(),
                   s3_settings)
    assert [w for w, _ in theirs.ignored] == ["outside"]


def test_local_origin_takes_the_key_as_given(settings: Settings) -> None:
    assert _keys(_aws("ObjectCreated:Put", "up/x.jpg", "any"), settings) == [
        ("created", "up/x.jpg")]


@pytest.mark.parametrize("body", [
    b"\xff\xfe", b"[" * 100 + b"]" * 100, b'{"Records": "no"}', b'{"Records": [{"s3": 1}]}',
    b"x" * 3000, json.dumps(_aws("ObjectCreated:Put", "site/up/%FF.jpg")).encode(),
    json.dumps(_aws("ObjectCreated:Put", "site/up/x.jpg", sequencer="not-hex")).encode(),
])
def test_malformed_is_one_line(s3_settings: Settings, body: bytes) -> None:
    with pytest.raises(MalformedEvent) as raised:
        parse(body, s3_settings)
    assert "\n" not in str(raised.value)


def test_order_by_padded_sequencer_then_time(redis_server: RedisServer) -> None:
    client = redis.Redis(port=redis_server.port, db=900)
    client.flushdb()
    order = Order(client)

    def change(kind: str, sequencer: str, time: float = 0.0, key: str = "k") -> Change:
        return Change("b", key, kind, sequencer, time)  # type: ignore[arg-type]

    assert order.commit(change("created", "FF")) == "new"
    assert order.check(change("created", "FF")) == "duplicate"
    assert order.check(change("removed", "00FE")) == "older"
    assert order.commit(change("removed", "0100")) == "new"  # 0x100 > 0xFF once padded
    assert order.check(change("created", "FF")) == "older"
    # no sequencer: event times
    assert order.commit(change("created", "", 10.0, "t")) == "new"
    assert order.check(change("created", "", 10.0, "t")) == "duplicate"
    assert order.check(change("removed", "", 10.0, "t")) == "new"  # same time, other kind
    assert order.check(change("removed", "", 9.5, "t")) == "older"
    # checked, not committed (killed before its job was queued): not a duplicate of itself
    assert order.check(change("created", "", 11.0, "t")) == "new"
    assert order.check(change("created", "", 11.0, "t")) == "new"
    assert 0 < client.ttl(next(iter(client.keys("imgwarm:listen:order:*")))) <= 7 * 86400


@pytest.mark.parametrize("when", [
    "1" + "0" * 400,  # an integer no float holds: it raised OverflowError, out of the listener
    "NaN", "Infinity", "-Infinity",  # Python's json takes them: they would order a key for ever
])
def test_a_time_no_float_holds_is_malformed_or_no_time(s3_settings: Settings, when: str) -> None:
    body = json.dumps(_aws("ObjectCreated:Put", "site/up/a.jpg")).replace(
        '"2026-11-27T10:00:00.123Z"', when).encode()
    try:
        changes = parse(body, s3_settings).changes
    except MalformedEvent as error:
        assert "not a JSON value" in str(error)
    else:
        assert [c.time for c in changes] == [0.0]
