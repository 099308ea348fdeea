"""S3 storage: the Store interface over any S3 endpoint (AWS, MinIO, Ceph, R2) through boto3.

A PUT is atomic in S3 (an object appears whole or not at all), so no temporary objects are
needed. A write that must not replace carries ``If-None-Match: *``: the server creates the
object only where none is (AWS answers 412 where one is, 409 to a write racing another), so
of two writers exactly one creates it. Faults that may pass (5xx, throttling, timeouts, refused
connections) are raised as TransientStorageError after botocore's own retries, so queued jobs
can retry later; anything else (no such bucket, access denied) is a StorageError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    HTTPClientError,
    IncompleteReadError,
    ResponseStreamingError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from imgwarm.config import StoreSettings
from imgwarm.exceptions import ObjectTooLarge, StorageError, TransientStorageError
from imgwarm.formats import MEDIA_TYPES
from imgwarm.store.base import Key
from imgwarm.store.layout import safe_relative

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

IMMUTABLE = "public, max-age=31536000, immutable"  # names change when bytes do
NO_CACHE = "no-cache"  # manifests are rewritten in place
_TRANSIENT_CODES = frozenset([
    "RequestTimeout", "RequestTimeTooSkewed", "SlowDown", "Throttling", "ThrottlingException",
    "TooManyRequests", "TooManyRequestsException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "InternalError", "ServiceUnavailable", "OperationAborted",
    "ConditionalRequestConflict",  # 409: a conditional write raced another; AWS says retry
])
_EXISTS_CODES = frozenset(["PreconditionFailed", "412"])  # If-None-Match: * and one is there
_MISSING_CODES = frozenset(["NoSuchKey", "NotFound"])
T = TypeVar("T")


def make_client(settings: StoreSettings) -> S3Client:
    """A client with the standard credential chain and botocore's `standard` retries."""
    config = Config(
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=settings.s3_timeout,
        max_pool_connections=32,  # the parallel copies of warm, the journal's reads
        read_timeout=settings.s3_timeout,
        region_name=settings.s3_region,
    )
    return boto3.session.Session().client(
        "s3", endpoint_url=settings.s3_endpoint_url, config=config
    )


def _status(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _missing(error: ClientError) -> bool:
    """No such object (a missing bucket is an error: HEAD cannot tell them apart, GET can)."""
    return _code(error) in _MISSING_CODES or _code(error) == "404"


class S3Store:
    """Objects under ``s3://bucket/prefix``; keys are relative POSIX paths."""

    def __init__(
        self, client: S3Client, bucket: str, prefix: str = "", *, cache_control: str = IMMUTABLE
    ) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.cache_control = cache_control
        # the store's format gate (store/format.py), asked before each read and write;
        # None for the gate's own store
        self.guard: Callable[[str], None] | None = None

    def _guard(self, mode: str) -> None:
        if self.guard is not None:
            self.guard(mode)

    def object_key(self, key: Key) -> str:
        return f"{self.prefix}{safe_relative(key)}"

    def describe(self, key: Key) -> str:
        return f"s3://{self.bucket}/{self.object_key(key)}"

    def _call(
        self, action: str, key: Key, request: Callable[[], T],
        *, missing_ok: bool = False,
    ) -> T | None:
        """Run one request: None for a missing object when ``missing_ok``; any other fault
        becomes a StorageError (a TransientStorageError when it may pass)."""
        try:
            return request()
        except ClientError as error:
            if missing_ok and _missing(error):
                return None
            raise self._fail(action, key, error) from None
        except BotoCoreError as error:
            raise self._fail(action, key, error) from None

    def _fail(self, action: str, key: Key, error: Exception) -> StorageError:
        where = f"s3://{self.bucket}/{self.prefix}{key}"  # as given: it may be what is wrong
        if isinstance(error, ClientError):
            code, status = _code(error), _status(error)
            transient = status >= 500 or status == 429 or code in _TRANSIENT_CODES
            kind = TransientStorageError if transient else StorageError
            hint = ""
            if status == 403 and action == "look up":
                hint = " (S3 answers 403 for a missing object when s3:ListBucket is not granted)"
            return kind(f"cannot {action} {where}: {code or status} {error}{hint}")
        if isinstance(error, BotoConnectionError | HTTPClientError | IncompleteReadError
                      | ResponseStreamingError):
            return TransientStorageError(f"cannot {action} {where}: {error}")
        return StorageError(f"cannot {action} {where}: {error}")

    def exists(self, key: Key) -> bool:
        self._guard("read")

        def head() -> bool:
            self.client.head_object(Bucket=self.bucket, Key=self.object_key(key))
            return True

        return self._call("look up", key, head, missing_ok=True) is not None

    def size(self, key: Key) -> int | None:
        self._guard("read")

        def head() -> int:
            found = self.client.head_object(Bucket=self.bucket, Key=self.object_key(key))
            return int(found["ContentLength"])

        return self._call("look up", key, head, missing_ok=True)

    def read(self, key: Key, *, limit: int | None = None) -> bytes | None:
        self._guard("read")

        def get() -> bytes:
            response = self.client.get_object(Bucket=self.bucket, Key=self.object_key(key))
            size = int(response["ContentLength"])
            if limit is not None and size > limit:
                response["Body"].close()
                raise ObjectTooLarge(size)
            return response["Body"].read()

        return self._call("read", key, get, missing_ok=True)

    def write(self, key: Key, data: bytes, *, replace: bool = False) -> bool:
        """Put the object with its Content-Type and Cache-Control; True when it was written.
        An existing object is kept unless ``replace``: one conditional PUT, no look first (a
        HEAD before each write doubled an upload's requests; what is written without
        replace is named by its bytes or is an empty marker, so a server that ignored the
        condition would put the same thing back)."""
        self._guard("write")
        object_key = self.object_key(key)
        content_type = MEDIA_TYPES.get(PurePosixPath(object_key).suffix.lower(),
                                       "application/octet-stream")
        return self._put(key, data, content_type, self.cache_control, only_new=not replace)

    def create(self, key: Key, data: bytes) -> bool:
        """Put the object only where none is (If-None-Match: *); True when this call wrote
        it. Looked up first (a HEAD; the format record, once a store): on a server that does
        not honour the condition an older record must still not replace a newer one (two
        writers racing there may both write, the later one's object standing)."""
        self._guard("write")
        if self.exists(key):
            return False
        return self._put(key, data, "application/json", NO_CACHE, only_new=True)

    def _put(self, key: Key, data: bytes, content_type: str, cache_control: str, *,
             only_new: bool) -> bool:
        """One PUT; with ``only_new``, conditional on no object being there (a 412 is False)."""
        object_key = self.object_key(key)

        def put() -> bool:
            try:
                if only_new:
                    self.client.put_object(Bucket=self.bucket, Key=object_key, Body=data,
                                           ContentType=content_type,
                                           CacheControl=cache_control, IfNoneMatch="*")
                else:
                    self.client.put_object(Bucket=self.bucket, Key=object_key, Body=data,
                                           ContentType=content_type,
                                           CacheControl=cache_control)
            except ClientError as error:
                if only_new and (_status(error) == 412 or _code(error) in _EXISTS_CODES):
                    return False
                raise
            return True

        return bool(self._call("write", key, put))

    def delete(self, key: Key) -> None:
        self._guard("write")
        self._call("delete", key, lambda: self.client.delete_object(
            Bucket=self.bucket, Key=self.object_key(key)))

    def files(self, under: str = "") -> Iterator[PurePosixPath]:
        return (key for key, _ in self.stamped(under))

    def stamped(self, under: str = "") -> Iterator[tuple[PurePosixPath, float]]:
        self._guard("read")
        prefix = self.object_key(under) + "/" if under else self.prefix
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix)
        try:
            for page in pages:
                for found in page.get("Contents", []):
                    yield (PurePosixPath(found["Key"][len(self.prefix):]),
                           found["LastModified"].timestamp())
        except (ClientError, BotoCoreError) as error:
            raise self._fail("list", under or "*", error) from None
