"""S3Store over real HTTP, on moto's S3 server and on SeaweedFS's (where they disagree,
AWS's documentation says which is right: the cases name the page)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from imgwarm.config import load_settings
from imgwarm.exceptions import StorageError, TransientStorageError
from imgwarm.store.s3 import IMMUTABLE, NO_CACHE, S3Store, make_client
from tests.support.s3 import s3_params, s3_server
from tests.support.servers import S3Endpoint

pytestmark = pytest.mark.integration


@pytest.fixture(params=s3_params())
def server(request: pytest.FixtureRequest) -> S3Endpoint:
    """Each S3 server in turn (this module's tests run on both)."""
    return s3_server(request, request.param)


@pytest.fixture
def bucket(server: S3Endpoint) -> str:
    return server.new_bucket()


@pytest.fixture
def store(server: S3Endpoint, bucket: str) -> Iterator[S3Store]:
    settings = load_settings(origin="s3", s3_bucket=bucket, s3_endpoint_url=server.endpoint,
                             s3_region="us-east-1", s3_timeout=2)
    yield S3Store(make_client(settings.store), bucket, "site/")


def test_write_read_with_headers_under_the_prefix(store: S3Store, server: S3Endpoint,
                                                  bucket: str) -> None:
    key = "1f/54/2a/cat.0123456789abcdef.webp"
    assert store.write(key, b"RIFF....WEBP") is True
    head = server.client.head_object(Bucket=bucket, Key=f"site/{key}")
    assert head["ContentType"] == "image/webp"
    assert head["CacheControl"] == IMMUTABLE
    assert store.exists(key)
    assert store.read(key) == b"RIFF....WEBP"
    # Content-addressed: an existing object is kept unless replaced.
    assert store.write(key, b"other") is False
    assert store.read(key) == b"RIFF....WEBP"
    assert store.describe("a/b.jpg") == f"s3://{bucket}/site/a/b.jpg"


def test_manifest_objects_are_json_and_not_cached(server: S3Endpoint, bucket: str,
                                                  store: S3Store) -> None:
    manifests = S3Store(store.client, bucket, "m/", cache_control=NO_CACHE)
    assert manifests.write("aa/x.json", b"{}", replace=True)
    assert manifests.write("aa/x.json", b'{"a": 1}', replace=True)
    head = server.client.head_object(Bucket=bucket, Key="m/aa/x.json")
    assert (head["ContentType"], head["CacheControl"]) == ("application/json", "no-cache")
    assert manifests.read("aa/x.json") == b'{"a": 1}'


def test_missing_bucket_is_an_error_not_a_missing_object(store: S3Store) -> None:
    gone = S3Store(store.client, "imgwarm-no-such-bucket", "")
    with pytest.raises(StorageError, match="NoSuchBucket") as raised:
        gone.read("a.jpg")
    assert not isinstance(raised.value, TransientStorageError)


def test_server_away_is_transient(server: S3Endpoint, store: S3Store) -> None:
    server.stop()
    try:
        with pytest.raises(TransientStorageError, match="cannot read"):
            store.read("a.jpg")
        with pytest.raises(TransientStorageError, match="cannot write"):
            store.write("a.jpg", b"data", replace=True)
    finally:
        server.start()
    assert store.read("a.jpg") is None  # back, and nothing was half-written


def test_a_write_is_one_request_no_rival_write_is_lost(store: S3Store, server: S3Endpoint,
                                                      bucket: str) -> None:
    """Another writer's object already there is kept, and the write says it did not create
    it, with no look first: the PUT carries ``If-None-Match: *`` (AWS: "Uploads the object
    only if the object key name does not already exist ... Otherwise, Amazon S3 returns a 412
    Precondition Failed error", PutObject; the user guide's "conditional writes"). Before, a
    look-up then a plain PUT: two requests, and a rival's object landing between them was
    replaced (a failed make then removes a file it did not create)."""
    key = "1f/54/2a/marker"
    server.client.put_object(Bucket=bucket, Key=f"site/{key}", Body=b"theirs")
    sent: list[str] = []
    store.client.meta.events.register(
        "before-send", lambda request, **_: sent.append(request.method))
    assert store.write(key, b"mine") is False
    assert sent == ["PUT"]  # one request: no HEAD before it
    assert server.client.get_object(Bucket=bucket, Key=f"site/{key}")["Body"].read() \
        == b"theirs"


def test_of_writers_racing_to_create_one_name_exactly_one_creates_it(
        store: S3Store, server: S3Endpoint, bucket: str) -> None:
    """Eight writers of one name, all at their PUT at once (nothing there yet): the server
    lets exactly one create the object, and its bytes are the ones kept (both servers
    honour If-None-Match: * under concurrent PUTs; with a look-up then a plain PUT, all
    eight wrote, each replacing the last, and all eight said they had created it)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    key = "1f/54/2a/race.0123456789abcdef.webp"
    writers = 8
    at_put = threading.Barrier(writers)
    store.guard = lambda mode: at_put.wait(30)  # (asked just before the PUT) every writer
    with ThreadPoolExecutor(writers) as pool:
        created = list(pool.map(lambda n: store.write(key, f"writer {n}".encode() * 500),
                                range(writers)))
    assert created.count(True) == 1, created
    kept = server.client.get_object(Bucket=bucket, Key=f"site/{key}")["Body"].read()
    assert kept == f"writer {created.index(True)}".encode() * 500
