"""The public API honours the configured origin: ``imgwarm.optimize`` with IMGWARM_ORIGIN=s3
makes the original in the bucket (by its key) and writes nothing locally, or refuses with one
line; ``imgwarm.delete`` resolves keys as ``imgwarm delete`` does (one function)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import imgwarm
from imgwarm.config import Settings
from imgwarm.samples import jpeg_with_exif, photo
from imgwarm.store import Stores
from tests.support.files import all_files


@pytest.fixture
def on_s3(settings: Settings, s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """IMGWARM_ORIGIN=s3 on a new bucket of moto's server, in the environment (as a web app
    is configured); the settings it loads."""
    bucket = s3_server.new_bucket()
    for name, value in {"ORIGIN": "s3", "S3_BUCKET": bucket, "S3_PREFIX": "site",
                        "S3_ENDPOINT_URL": s3_server.endpoint, "S3_REGION": "us-east-1",
                        "ORIGIN_ROOT": str(settings.store.origin_root),
                        "MANIFEST_ROOT": str(settings.store.manifest_root)}.items():
        monkeypatch.setenv(f"IMGWARM_{name}", value)
    return imgwarm.load_settings()


def test_optimize_makes_an_original_in_the_bucket_by_its_key(
        on_s3: Settings, s3_server: Any, tmp_path: Path) -> None:
    stores = Stores.s3(on_s3.store)
    stores.origin.write("uploads/bike.jpg", jpeg_with_exif(photo(900, 600, seed=3)))
    manifest = imgwarm.optimize("uploads/bike.jpg", description="Red bicycle", widths=[320])
    assert manifest.key == "uploads/bike.jpg" and manifest.description == "Red bicycle"
    in_bucket = set(s3_server.keys(on_s3.store.s3_bucket or ""))
    assert {f"site/{v.path}" for v in manifest.variants} <= in_bucket
    assert stores.manifests.get("uploads/bike.jpg") == manifest
    assert all_files(on_s3.store.origin_root) == []  # nothing on the local disk
    assert all_files(on_s3.store.manifest_root) == []
    again = imgwarm.optimize("uploads/bike.jpg", description="Red bicycle", widths=[320])
    assert again == manifest  # the same key, the same names

    done = imgwarm.delete("uploads/bike.jpg")  # one resolution of keys: the CLI's
    assert sorted(done.removed) == sorted(v.path for v in manifest.variants)
    assert not set(s3_server.keys(on_s3.store.s3_bucket or "")) & {
        f"site/{v.path}" for v in manifest.variants}


def test_optimize_on_s3_refuses_what_is_not_a_key_in_one_line(
        on_s3: Settings, tmp_path: Path) -> None:
    local = tmp_path / "bike.jpg"
    local.write_bytes(jpeg_with_exif(photo(400, 300)))
    with pytest.raises(imgwarm.SettingsError, match=r"origin = s3 .*not a local file") as found:
        imgwarm.optimize(local)
    assert "\n" not in str(found.value) and found.value.exit_code == 2
    with pytest.raises(imgwarm.SettingsError, match=r"not by key='other'"):
        imgwarm.optimize("uploads/bike.jpg", key="other")
    with pytest.raises(imgwarm.LayoutError, match="refusing key"):
        imgwarm.optimize("../bike.jpg")
    with pytest.raises(imgwarm.UnreadableSource, match="no such original"):
        imgwarm.optimize("uploads/never.jpg")
    assert all_files(on_s3.store.origin_root) == []


def test_delete_takes_a_local_file_or_a_key_as_the_command_does(settings: Settings,
                                                                 tmp_path: Path) -> None:
    source = tmp_path / "bike.jpg"
    source.write_bytes(jpeg_with_exif(photo(400, 300)))
    manifest = imgwarm.optimize(source, settings=settings, widths=[320])
    with pytest.raises(imgwarm.LayoutError, match="refusing key"):
        imgwarm.delete("../elsewhere.jpg", settings=settings)
    with pytest.raises(imgwarm.UnknownSource, match="nothing deleted"):
        imgwarm.delete("never/made.jpg", settings=settings)
    done = imgwarm.delete(source, settings=settings)  # the file: known by its real path
    assert done.key == manifest.key and done.removed
