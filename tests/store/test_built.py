"""A new store starts with its references built (references.json: every manifest's claim
markers are there, so ``delete`` and ``gc`` need no full pass), whichever of several writers
comes first; a store with manifests from before its format record (0.2.0's) does not."""

from __future__ import annotations

import pytest

from imgwarm import racepoints
from imgwarm.config import Settings, load_settings
from imgwarm.pipeline.optimize import optimize_key
from imgwarm.store import Stores
from imgwarm.store.format import FORMAT_RECORD
from imgwarm.store.references import BUILT
from tests.support.listening import photo
from tests.support.s3 import on_s3, s3_params, s3_server


def new_store(origin: str, request: pytest.FixtureRequest, settings: Settings,
              sources: int) -> Settings:
    """Settings of a new store (a local folder, or a new bucket) holding ``sources``
    originals at up/<n>.jpg, and nothing of imgwarm's."""
    if on_s3(origin):
        server = s3_server(request, origin)
        bucket = server.new_bucket()
        for n in range(sources):
            server.client.put_object(Bucket=bucket, Key=f"up/{n}.jpg", Body=photo(n))
        return load_settings(origin="s3", s3_bucket=bucket, s3_endpoint_url=server.endpoint,
                             s3_region="us-east-1", origin_root=settings.store.origin_root,
                             manifest_root=settings.store.manifest_root)
    folder = settings.store.origin_root / "up"
    folder.mkdir(parents=True, mode=0o755)
    for n in range(sources):
        (folder / f"{n}.jpg").write_bytes(photo(n))
    return settings


def upload(config: Settings, n: int, stores: Stores | None = None) -> None:
    optimize_key(f"up/{n}.jpg", settings=config,
                 stores=stores or Stores.for_settings(config.store))


@pytest.mark.parametrize("origin", ["local", *s3_params()])
@pytest.mark.parametrize("point", ["format.absent", "references.empty"])
def test_a_rival_first_write_in_between_leaves_the_store_built(
        origin: str, point: str, request: pytest.FixtureRequest, settings: Settings) -> None:
    """One writer has found no format record (``format.absent``), or has found the manifest
    store empty (``references.empty``), when another makes a whole source: claims written,
    and the record. Before, a writer looked at references.json, then another's claim landed,
    then it listed the store: not empty, so neither marked it, and the store waited for a
    full gc (until then ``delete`` removed no variant)."""
    config = new_store(origin, request, settings, 2)
    first = Stores.for_settings(config.store)
    with racepoints.at(point, lambda: upload(config, 1)):
        upload(config, 0, first)
    assert Stores.for_settings(config.store).manifests.references.built()
    claimed = {digest for _, digest, _ in first.manifests.references.claimed()}
    assert len(claimed) == 2  # both sources' markers are there


@pytest.mark.parametrize("origin", ["local", *s3_params()])
def test_a_store_with_manifests_and_no_format_record_is_not_marked_built(
        origin: str, request: pytest.FixtureRequest, settings: Settings) -> None:
    """A 0.2.0 store (manifests, no format record) may hold manifests without markers: its
    first write by this code creates the record and leaves references.json to gc's pass."""
    config = new_store(origin, request, settings, 1)
    stores = Stores.for_settings(config.store)
    stores.manifests.store.write("00/00/00/old.json", b"{}", replace=True)  # 0.2.0's
    stores.origin.delete(FORMAT_RECORD)  # (that write made both: 0.2.0 made neither)
    stores.manifests.store.delete(BUILT)
    upload(config, 0, Stores.for_settings(config.store))
    assert stores.origin.exists(FORMAT_RECORD)
    assert not stores.manifests.store.exists(BUILT)
    assert not Stores.for_settings(config.store).manifests.references.built()

