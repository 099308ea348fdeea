"""A store-wide pass over a small bucket lists each tree once, not once a first-level folder
(store/listing.py: 384 round trips for a few files, before): fsck and gc --full on moto's
server and SeaweedFS make a handful of listings, and find exactly what the same passes find
listing folder by folder (as they do on a bucket of more than a page)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import imgwarm.store.listing as listing
from imgwarm.config import Settings
from imgwarm.lifecycle.fsck import check
from imgwarm.lifecycle.gc import collect
from imgwarm.store import Stores
from tests.support.lifecycle import site_on
from tests.support.s3 import s3_params
from tests.support.sites import Site

pytestmark = pytest.mark.slow


@pytest.fixture(params=s3_params())
def site(request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
         ram: Path) -> Site:
    return site_on(request.param, request, settings, tmp_path, ram)


def listings_sent(stores: Stores) -> Counter[str]:
    """The listings the stores' one client sends from now on, by prefix."""
    sent: Counter[str] = Counter()

    def note(request: Any, **_: Any) -> None:
        if "list-type=2" in request.url:
            sent[request.url.split("prefix=")[-1].split("&")[0]] += 1

    stores.origin.client.meta.events.register("before-send", note)  # type: ignore[attr-defined]
    return sent


def findings(stores: Stores) -> tuple[dict[str, Any], dict[str, Any]]:
    """fsck's report and a dry gc --full's, without their timings."""
    now = time.time() + 30 * 86400  # the orphan's claim is stale, its grace is over
    fsck = check(stores, now=now).to_object()
    gc = collect(stores, grace=0, full=True, dry_run=True, now=now).to_object()
    for report in (fsck, gc):
        report.pop("seconds", None)
    return fsck, gc


def test_a_small_bucket_is_listed_once_a_tree_with_the_same_findings(
        site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    stores = Stores.for_settings(site.settings.store)
    made = site.manifests()[0]
    stores.origin.delete(made.variants[0].path)  # missing: fsck names it
    orphan = str(stores.path_of("orphan.0123456789abcdef.webp"))
    stores.origin.write(orphan, b"RIFF left by a writer killed before its manifest")
    stores.manifests.references.claim("up/never-finished.jpg", [orphan])

    sent = listings_sent(stores)
    small = findings(stores)
    once = sum(sent.values())
    sent.clear()
    monkeypatch.setattr(listing, "PAGE", 1)  # every tree "more than a page": folder by folder
    by_folder = findings(stores)

    assert small == by_folder
    fsck, gc = small
    assert fsck["missing"]["paths"] == [made.variants[0].path], fsck
    assert orphan in gc["paths"], gc
    # records, origin and claims for fsck; records, claims, drops and origin for gc (the
    # probe of a tree takes a second page only when the first is full)
    assert once <= 7, sent
    assert sum(sent.values()) >= 3 * len(stores.layout.tops()), sent
