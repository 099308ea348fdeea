"""The public API: each argument means one thing whatever the origin (``optimize_file`` reads a
local file, ``optimize_key`` a key in the origin, local or S3), ``optimize`` is a deprecated alias
that behaves as before; every function takes settings by name the same way; every type a
function returns or takes is in ``__all__``; ``imgwarm.delete`` resolves keys as ``imgwarm
delete`` does (one function)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

import imgwarm
from imgwarm.config import Settings
from imgwarm.samples import jpeg_with_exif, photo
from imgwarm.store import Stores
from tests.support.corpus import corpus_files
from tests.support.files import all_files

FUNCTIONS = sorted(n for n in imgwarm.__all__ if inspect.isfunction(getattr(imgwarm, n)))


def test_all_is_sorted_and_every_name_imports() -> None:
    assert imgwarm.__all__ == sorted(imgwarm.__all__)
    assert len(set(imgwarm.__all__)) == len(imgwarm.__all__)
    for name in imgwarm.__all__:
        done = {}
        exec(f"from imgwarm import {name} as found", done)
        assert done["found"] == getattr(imgwarm, name)


def _ours(hint: Any) -> set[type]:
    """The imgwarm classes named anywhere in an annotation (unions, generics)."""
    found = {hint} if isinstance(hint, type) and hint.__module__.startswith("imgwarm") else set()
    for arg in typing.get_args(hint):
        found |= _ours(arg)
    return found


def test_every_type_a_function_takes_or_returns_is_exported() -> None:
    names = {name: getattr(imgwarm, name) for name in imgwarm.__all__}
    seen = set()
    for name in FUNCTIONS:
        hints = typing.get_type_hints(getattr(imgwarm, name), localns={**names, "Path": Path})
        assert "return" in hints, f"{name} has no return annotation"
        for hint in hints.values():
            for cls in _ours(hint):
                assert names.get(cls.__name__) is cls, f"{name} uses {cls.__name__}, not exported"
                seen.add(cls.__name__)
    assert {"WarmReport", "GcReport", "FsckReport", "Deletion", "Job", "DeleteJob", "Manifest",
            "Settings"} <= seen


def test_import_loads_nothing_heavy() -> None:
    code = ("import sys, imgwarm; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pyvips', 'celery', 'pydantic', 'boto3', 'kombu', 'redis')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_every_function_that_uses_settings_takes_them_by_name_and_names_an_unknown_one(
        settings: Settings) -> None:
    with_options = {n for n in FUNCTIONS
                    if inspect.Parameter.VAR_KEYWORD in
                    {p.kind for p in inspect.signature(getattr(imgwarm, n)).parameters.values()}}
    # picture reads the manifest alone, register_jinja a Jinja environment
    assert with_options == set(FUNCTIONS) - {"picture", "register_jinja"}
    given: dict[str, tuple[Any, ...]] = {"delete": ("k.jpg",), "enqueue": ("k.jpg",),
                                         "enqueue_delete": ("k.jpg",), "optimize": ("k.jpg",),
                                         "optimize_file": ("k.jpg",), "optimize_key": ("k.jpg",)}
    for name in sorted(with_options):
        for over in (settings, None):  # over given settings, and over loaded ones
            warns = pytest.warns(DeprecationWarning) if name == "optimize" else nullcontext()
            with warns, pytest.raises(imgwarm.SettingsError,
                                      match=r"^unknown setting 'widht' "):
                if name == "load_settings":
                    imgwarm.load_settings(widht=[320])
                else:
                    getattr(imgwarm, name)(*given.get(name, ()), settings=over, widht=[320])


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


def test_optimize_key_makes_an_original_in_the_bucket_by_its_key(
        on_s3: Settings, s3_server: Any, tmp_path: Path) -> None:
    stores = Stores.s3(on_s3.store)
    stores.origin.write("uploads/bike.jpg", jpeg_with_exif(photo(900, 600, seed=3)))
    manifest = imgwarm.optimize_key("uploads/bike.jpg", description="Red bicycle", widths=[320])
    assert manifest.key == "uploads/bike.jpg" and manifest.description == "Red bicycle"
    in_bucket = set(s3_server.keys(on_s3.store.s3_bucket or ""))
    assert {f"site/{v.path}" for v in manifest.variants} <= in_bucket
    assert stores.manifests.get("uploads/bike.jpg") == manifest
    assert all_files(on_s3.store.origin_root) == []  # nothing on the local disk
    assert all_files(on_s3.store.manifest_root) == []
    again = imgwarm.optimize_key("uploads/bike.jpg", description="Red bicycle", widths=[320])
    assert again == manifest  # the same key, the same names

    done = imgwarm.delete("uploads/bike.jpg")  # one resolution of keys: the CLI's
    assert sorted(done.removed) == sorted(v.path for v in manifest.variants)
    assert not set(s3_server.keys(on_s3.store.s3_bucket or "")) & {
        f"site/{v.path}" for v in manifest.variants}


def test_optimize_file_on_s3_reads_the_local_file_and_publishes_to_the_bucket(
        on_s3: Settings, s3_server: Any) -> None:
    source = corpus_files("DSCN0010.jpg")[0]
    with pytest.raises(imgwarm.SettingsError, match=r"optimize_file needs key="):
        imgwarm.optimize_file(source, widths=[320])
    with pytest.raises(imgwarm.LayoutError, match="refusing key"):
        imgwarm.optimize_file(source, key="../bike.jpg", widths=[320])
    manifest = imgwarm.optimize_file(str(source), key="uploads/dscn0010.jpg", widths=[320])
    assert manifest.key == "uploads/dscn0010.jpg" and manifest.variants
    in_bucket = set(s3_server.keys(on_s3.store.s3_bucket or ""))
    assert {f"site/{v.path}" for v in manifest.variants} <= in_bucket
    assert "site/uploads/dscn0010.jpg" not in in_bucket  # read from the disk, not the bucket
    assert Stores.s3(on_s3.store).manifests.get("uploads/dscn0010.jpg") == manifest
    assert all_files(on_s3.store.origin_root) == []
    # the same string through optimize_key means a key, and a file's path is not one
    with pytest.raises(imgwarm.LayoutError, match="absolute paths are not allowed"):
        imgwarm.optimize_key(str(source), widths=[320])
    with pytest.raises(imgwarm.UnreadableSource, match="no such original"):
        imgwarm.optimize_key("tests/corpus/DSCN0010.jpg", widths=[320])


def test_optimize_key_reads_the_local_origin(settings: Settings) -> None:
    origin = settings.store.origin_root
    (origin / "uploads").mkdir(parents=True, exist_ok=True)
    (origin / "uploads" / "bike.jpg").write_bytes(jpeg_with_exif(photo(600, 400, seed=5)))
    manifest = imgwarm.optimize_key("uploads/bike.jpg", settings=settings, widths=[320])
    assert manifest.key == "uploads/bike.jpg"
    assert all((origin / v.path).is_file() for v in manifest.variants)
    with pytest.raises(imgwarm.UnreadableSource, match="no such original"):
        imgwarm.optimize_key("uploads/never.jpg", settings=settings)


def test_the_deprecated_optimize_warns_and_behaves_as_before(
        on_s3: Settings, tmp_path: Path) -> None:
    local = tmp_path / "bike.jpg"
    local.write_bytes(jpeg_with_exif(photo(400, 300)))
    with (pytest.warns(DeprecationWarning, match=r"optimize_file\(path\).*optimize_key\(key\)"),
          pytest.raises(imgwarm.SettingsError, match=r"origin = s3 .*not a local file")):
        imgwarm.optimize(local)
    Stores.s3(on_s3.store).origin.write("uploads/bike.jpg", local.read_bytes())
    with pytest.warns(DeprecationWarning):
        manifest = imgwarm.optimize("uploads/bike.jpg", widths=[320])
    assert manifest.key == "uploads/bike.jpg"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
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
    manifest = imgwarm.optimize_file(source, settings=settings, widths=[320])
    assert manifest.key == str(source.resolve())  # a local file: known by its real path
    with pytest.raises(imgwarm.LayoutError, match="refusing key"):
        imgwarm.delete("../elsewhere.jpg", settings=settings)
    with pytest.raises(imgwarm.UnknownSource, match="nothing deleted"):
        imgwarm.delete("never/made.jpg", settings=settings)
    done = imgwarm.delete(source, settings=settings)  # the file: known by its real path
    assert done.key == manifest.key and done.removed
