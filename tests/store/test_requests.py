"""The S3 requests one upload costs (optimize of one source by key, as a worker does it),
counted as botocore sends them, on moto's server and on SeaweedFS: conditional writes
(If-None-Match: *) in place of a look before each write, each record read no more than
the store's integrity needs."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.pipeline.optimize import optimize_key
from imgwarm.store import Stores
from imgwarm.store.format import FORMAT_RECORD
from imgwarm.store.references import BUILT, REFS
from tests.support.listening import photo
from tests.support.s3 import s3_params, s3_server

pytestmark = pytest.mark.integration


def kind(path: str, original: str) -> str:
    """What an object key is, for counting ("": the bucket itself, a listing)."""
    inner = path.removeprefix(".imgwarm/manifests/")
    if path in ("", original, FORMAT_RECORD):
        return {"": "listing", original: "original", FORMAT_RECORD: "format record"}[path]
    if inner == BUILT:
        return "references.json"
    if inner.startswith(f"{REFS}/"):
        return "claim"
    if inner.startswith("changes/"):
        return "journal"
    return "record" if inner != path else "variant"


def counting(stores: Stores, original: str) -> Counter[tuple[str, str]]:
    """(HTTP method, what) of every request the stores' one client sends from now on."""
    sent: Counter[tuple[str, str]] = Counter()
    client = stores.origin.client  # type: ignore[attr-defined]

    def note(request: Any, **_: Any) -> None:
        bucket_and_key = request.url.split("?")[0].split("/", 3)[-1]
        path = bucket_and_key.partition("/")[2]
        sent[(request.method, kind(path, original))] += 1

    client.meta.events.register("before-send", note)
    return sent


@pytest.mark.parametrize("server_name", s3_params())
def test_requests_of_one_upload(server_name: str, request: pytest.FixtureRequest,
                                settings: Settings) -> None:
    server = s3_server(request, server_name)
    bucket = server.new_bucket()
    config = load_settings(origin="s3", s3_bucket=bucket, s3_endpoint_url=server.endpoint,
                           s3_region="us-east-1", origin_root=settings.store.origin_root,
                           manifest_root=settings.store.manifest_root)
    for n in range(2):
        server.client.put_object(Bucket=bucket, Key=f"up/{n}.jpg", Body=photo(n))
    stores = Stores.for_settings(config.store)  # one worker process's, kept between jobs

    first = counting(stores, "up/0.jpg")
    made = optimize_key("up/0.jpg", settings=config, stores=stores).manifest
    files = len(made.variants)
    assert files >= 2
    # The upload of a store's first source: as any other (below), and the store's start,
    # once: the format record looked for (GET, 404), the manifest store listed (empty: so
    # references.json is written, and the store starts built), the record created (HEAD,
    # then a conditional PUT) and read back (GET).
    assert first == Counter({
        ("GET", "format record"): 2, ("HEAD", "format record"): 1,
        ("PUT", "format record"): 1, ("GET", "listing"): 1, ("PUT", "references.json"): 1,
        ("GET", "original"): 1, ("GET", "record"): 2, ("PUT", "claim"): files,
        ("PUT", "variant"): files, ("PUT", "record"): 1, ("PUT", "journal"): 1,
    })

    sent = counting(stores, "up/1.jpg")
    made = optimize_key("up/1.jpg", settings=config, stores=stores).manifest
    # Every later upload (the format record is kept by the gate for format_refresh):
    #   GET  the original
    #   GET  the key's record (refused before? made before?)
    #   PUT  a claim marker per variant, If-None-Match: * (was a HEAD, 404, then the PUT)
    #   PUT  each variant, If-None-Match: * (was a HEAD, 404, then the PUT)
    #   GET  the key's record again, after the pixel work: a takedown meanwhile wins (I4)
    #   PUT  the manifest
    #   PUT  the journal's entry
    # 3 GET and 2 x files + 2 PUT: 9 for the two files of a tiny source (was 13: 4 HEAD
    # more), 13 for this one's four (was 21). No HEAD at all.
    assert sent == Counter({
        ("GET", "original"): 1, ("GET", "record"): 2, ("PUT", "claim"): len(made.variants),
        ("PUT", "variant"): len(made.variants), ("PUT", "record"): 1, ("PUT", "journal"): 1,
    })
    assert sum(sent.values()) == 3 + 2 * len(made.variants) + 2
    assert stores.manifests.references.built()
