"""A store marked with a format newer than this code: every command that writes or removes
(optimize, delete, gc, fsck --repair, warm, the bucket setup) ends with exactly one line
naming both versions and exit 2, and nothing is written or removed (every file of the origin,
the manifest store, the tiers and the warm state, every object of the bucket, compared before
and after); reading commands go on while the record says a reader of this format may read,
and are refused in one line when it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.config import Settings, load_settings
from imgwarm.pipeline.optimize import optimize_key
from imgwarm.store import Stores
from imgwarm.store.format import STORE_FORMAT, imgwarm_version
from tests.support.cli import Cli
from tests.support.images import jpeg_with_exif, photo
from tests.support.servers import S3Server
from tests.support.sites import Site, settings_env
from tests.support.versions import (
    NEWER,
    bucket_snapshot,
    mark_local,
    mark_s3,
    refusal,
    snapshot,
)

WRITERS = [("optimize", "{new}"), ("optimize", "{made}"), ("delete", "{made}"),
           ("delete", "--original", "{made}"), ("gc", "--grace", "0", "--full"),
           ("gc", "--grace", "0"), ("fsck", "--repair"), ("warm",)]


def _roots(settings: Settings) -> list[Path]:
    store, cache = settings.store, settings.cache
    return [store.origin_root, store.manifest_root, cache.nvme_root, cache.ram_root,
            cache.cache_state]


def _read_refusal(where: str) -> str:
    return (f"{where} is store format {NEWER}, readable from format {NEWER} on; imgwarm "
            f"{imgwarm_version()} knows formats up to {STORE_FORMAT}: upgrade imgwarm first")


@pytest.fixture
def marked(site: Site) -> Site:
    """The site's sources made (and one taken down, for gc to have a candidate), a new
    source waiting, then the origin marked as a newer format."""
    site.add("later.jpg", seed=9)
    assert Stores.local(site.settings.store).check() is not None  # the record, format 1
    from imgwarm.lifecycle.delete import delete

    delete(str(site.sources / "later.jpg"), Stores.local(site.settings.store))
    (site.sources / "new.jpg").write_bytes(jpeg_with_exif(photo(400, 300, seed=7), quality=85))
    return site


@pytest.mark.parametrize("args", WRITERS, ids=" ".join)
def test_a_newer_store_refuses_every_writer_in_one_line_and_nothing_changes(
        marked: Site, run_cli: Cli, args: tuple[str, ...]) -> None:
    settings = marked.settings
    origin = settings.store.origin_root
    mark_local(origin, NEWER, readable_by=1)
    given = [a.format(new=marked.sources / "new.jpg", made=marked.sources / "photo-0.jpg")
             for a in args]
    before = snapshot(*_roots(settings), marked.sources)
    result = run_cli(*given, env=settings_env(settings))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [f"{args[0]} FAILED: {refusal(f'origin {origin}')}"]
    assert result.stdout == ""
    assert snapshot(*_roots(settings), marked.sources) == before


@pytest.mark.parametrize("args", [("fsck",), ("gc", "--grace", "0", "--dry-run"),
                                  ("picture", "{made}"), ("show", "{made}"),
                                  ("warm", "--dry-run")], ids=" ".join)
def test_reading_commands_go_on_where_the_record_allows_and_stop_where_not(
        marked: Site, run_cli: Cli, args: tuple[str, ...]) -> None:
    settings = marked.settings
    origin = settings.store.origin_root
    given = [a.format(made=marked.sources / "photo-0.jpg") for a in args]
    mark_local(origin, NEWER, readable_by=STORE_FORMAT)  # new, but read as before
    before = snapshot(settings.store.origin_root, settings.store.manifest_root)
    allowed = run_cli(*given, env=settings_env(settings))
    assert allowed.exit_code == 0, allowed.stderr
    assert allowed.stdout or allowed.stderr
    assert snapshot(settings.store.origin_root, settings.store.manifest_root) == before
    mark_local(origin, NEWER)  # readable by format 2 readers only (no readable_by: = format)
    refused = run_cli(*given, env=settings_env(settings))
    assert refused.exit_code == 2
    assert refused.stderr.splitlines() == [
        f"{args[0]} FAILED: {_read_refusal(f'origin {origin}')}"]


@pytest.fixture
def s3_site(s3_server: S3Server) -> tuple[S3Server, Settings]:
    """A bucket with two originals made (one taken down), a third waiting, marked newer."""
    bucket = s3_server.new_bucket()
    settings = load_settings(origin="s3", s3_bucket=bucket, s3_endpoint_url=s3_server.endpoint,
                             widths="160,320")
    stores = Stores.s3(settings.store)
    for name in ("one", "two", "three"):
        body = jpeg_with_exif(photo(320, 200, seed=len(name)), quality=85)
        s3_server.client.put_object(Bucket=bucket, Key=f"up/{name}.jpg", Body=body)
    for name in ("one", "two"):
        optimize_key(f"up/{name}.jpg", settings=settings, stores=stores)
    from imgwarm.lifecycle.delete import delete

    delete("up/two.jpg", stores)
    mark_s3(s3_server.client, bucket, "", NEWER, readable_by=1)
    return s3_server, settings


@pytest.mark.parametrize("args", [("optimize", "up/three.jpg"), ("optimize", "up/one.jpg"),
                                  ("delete", "up/one.jpg"),
                                  ("delete", "--original", "up/one.jpg"),
                                  ("gc", "--grace", "0", "--full"), ("gc", "--grace", "0"),
                                  ("fsck", "--repair"), ("bucket",)], ids=" ".join)
def test_s3_a_newer_store_refuses_every_writer_and_no_object_changes(
        s3_site: tuple[S3Server, Settings], run_cli: Cli, args: tuple[str, ...]) -> None:
    s3, settings = s3_site
    bucket = settings.store.s3_bucket
    assert bucket is not None
    before = bucket_snapshot(s3.client, bucket)
    result = run_cli(*args, env=settings_env(settings))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"{args[0]} FAILED: {refusal(f'origin s3://{bucket}/')}"]
    assert bucket_snapshot(s3.client, bucket) == before
    with pytest.raises(s3.client.exceptions.ClientError, match="NoSuchBucketPolicy"):
        s3.client.get_bucket_policy(Bucket=bucket)  # the bucket setup changed nothing


def test_s3_reading_goes_on_where_the_record_allows(s3_site: tuple[S3Server, Settings],
                                                    run_cli: Cli) -> None:
    s3, settings = s3_site
    bucket = settings.store.s3_bucket
    assert bucket is not None
    before = bucket_snapshot(s3.client, bucket)
    shown = run_cli("picture", "up/one.jpg", env=settings_env(settings))
    assert shown.exit_code == 0 and "<picture>" in shown.stdout
    assert run_cli("fsck", env=settings_env(settings)).exit_code == 0
    assert bucket_snapshot(s3.client, bucket) == before
    mark_s3(s3.client, bucket, "", NEWER)
    refused = run_cli("picture", "up/one.jpg", env=settings_env(settings))
    assert refused.exit_code == 2
    assert refused.stderr.splitlines() == [
        f"picture FAILED: {_read_refusal(f'origin s3://{bucket}/')}"]
