"""Lifecycle helpers: a site on a local origin or on S3 over real HTTP (moto's server or
SeaweedFS's), and what its stores hold (manifests by key, variants in the origin, reference
markers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from imgwarm.store import Stores
from imgwarm.store.references import BUILT, REFS
from tests.support.s3 import on_s3, s3_server
from tests.support.sites import Site, make_site


def site_on(origin: str, request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
            ram_root: Path, **options: object) -> Site:
    """A site of two sources on a local origin, or on a new bucket of one of the session's
    S3 servers (``origin`` "moto" or "seaweedfs")."""
    if on_s3(origin):
        s3 = s3_server(request, origin)
        options |= {"origin": "s3", "s3_bucket": s3.new_bucket(),
                    "s3_endpoint_url": s3.endpoint, "s3_region": "us-east-1"}
    return make_site(settings, tmp_path, ram_root, count=2, **options)


def stores(site: Site) -> Stores:
    return Stores.for_settings(site.settings.store)


def by_key(site: Site) -> dict[str, Manifest]:
    return {Path(m.key).relative_to(site.sources.resolve()).as_posix(): m
            for m in site.manifests()}


def in_origin(site: Site, manifest: Manifest) -> set[str]:
    origin = stores(site).origin
    return {v.path for v in manifest.variants if origin.exists(v.path)}


def claims(site: Site) -> set[tuple[str, str]]:
    """Every reference marker: (variant path, source digest)."""
    return {(path, digest) for path, digest, _ in stores(site).manifests.references.claimed()}


def forget_references(stores: Stores) -> None:
    """A store as one made before the references (or one that lost them): no claim marker,
    no record that they were built. Who else names a variant cannot be told from it."""
    store = stores.manifests.store
    for marker in list(store.files(REFS)):
        store.delete(marker)
    store.delete(BUILT)
