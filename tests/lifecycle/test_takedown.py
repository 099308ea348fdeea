"""A takedown, end to end: two cache servers (each its own tiers and index) warmed from one
origin (local, and S3 over moto's HTTP server), each serving through the nginx config imgwarm
emits; `imgwarm delete`, then `warm` on each: every variant URL of that source answers 404
from both nginx, while a variant another source names is still served."""

from __future__ import annotations

import contextlib
import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.manifest import Manifest
from tests.support.cli import Cli
from tests.support.lifecycle import by_key, in_origin, site_on
from tests.support.nginx import running
from tests.support.s3 import on_s3, s3_params, s3_server
from tests.support.servers import wait_for
from tests.support.sites import Site

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def second_server(site: Site, ram: Path) -> Site:
    """Another cache server in front of the same origin: its own tiers, index and lock."""
    root = site.root / "server-b"
    settings = site.settings.updated(
        nvme_root=root / "nvme", ram_root=ram / f"tier-{uuid.uuid4().hex[:6]}",
        cache_state=root / "state")
    return replace(site, settings=settings)


def public_variants(site: Site, request: pytest.FixtureRequest, server: str) -> None:
    """As the README's bucket policy: anyone may read the shard folders (nginx reads the
    origin anonymously), nothing else."""
    s3 = s3_server(request, server)
    bucket = site.settings.store.s3_bucket
    s3.client.put_bucket_policy(Bucket=bucket, Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{bucket}/??/??/??/*"}]}))


def answers(served: object, manifest: Manifest) -> dict[str, tuple[int, str | None]]:
    found = {}
    for variant in manifest.variants:
        status, headers, _ = served.get(f"/{variant.path}")  # type: ignore[attr-defined]
        found[variant.path] = (status, headers.get("x-cache-tier"))
    return found


@pytest.mark.parametrize("origin", ["local", *s3_params()])
def test_a_photo_taken_down_answers_404_from_every_server(
        origin: str, request: pytest.FixtureRequest, settings: Settings, tmp_path: Path,
        ram: Path) -> None:
    a = site_on(origin, request, settings, tmp_path, ram, ram_budget="80%")
    twin = a.add("twin/photo-0.jpg", seed=0)  # names the same variants as photo-0
    if on_s3(origin):
        public_variants(a, request, origin)
    b = second_server(a, ram)
    gone, shared = by_key(a)["photo-1.jpg"], by_key(a)["photo-0.jpg"]
    for server in (a, b):
        server.warm()
        assert {v.path for v in gone.variants} <= server.in_tier("nvme")
    with contextlib.ExitStack() as stack:
        served = [stack.enter_context(running(server, tmp_path / f"nginx-{n}", "--tier-header"))
                  for n, server in enumerate((a, b))]
        for each in served:
            assert {status for status, _ in answers(each, gone).values()} == {200}

        for key in (gone.key, shared.key):
            done = Cli()("delete", key, "--json", env=a.env())
            assert done.exit_code == 0, done.stderr
        assert in_origin(a, gone) == set()
        assert in_origin(a, twin) == {v.path for v in twin.variants}  # named by the twin

        for server in (a, b):
            report = server.warm()
            assert report.nvme.evicted >= len(gone.variants)
            assert not {v.path for v in gone.variants} & (server.in_tier("nvme")
                                                          | server.in_tier("ram"))
        # nginx keeps descriptors of open files for open_file_cache_valid (1 s) at most:
        # a removed file is answered 404 within that, without a reload (10 s: a busy machine)
        wait_for(lambda: all({status for status, _ in answers(each, gone).values()} == {404}
                             for each in served), "404 from both servers", timeout=10)
        for each in served:
            kept = answers(each, twin)
            assert {status for status, _ in kept.values()} == {200}
            assert {tier for _, tier in kept.values()} <= {"ram", "nvme"}  # still warm
