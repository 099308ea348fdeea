"""The whole pipeline on synthetic photos: sizes, names, manifest, idempotence, no partials."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path, PurePosixPath

import pytest

import imgwarm
from imgwarm.config import Settings
from imgwarm.exceptions import ImgwarmError, LimitExceeded, StorageError
from imgwarm.pipeline.optimize import local_key, optimize_file
from imgwarm.store import Stores
from imgwarm.store.local import LocalStore
from tests.support.files import all_files
from tests.support.images import Credits, decode, jpeg_with_exif, mean_abs_diff, photo
from tests.support.pipeline import run

NAME = re.compile(r"(?:([a-z0-9-]+)\.)?([0-9a-f]{16,64})\.(webp|jpg|avif)")


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in all_files(root)}


def test_variants_sizes_names_and_manifest(settings: Settings) -> None:
    upright = photo(2400, 1600, seed=1)
    manifest = run(jpeg_with_exif(upright, credits=Credits(description="Bike")),
                   "My Bike.jpg", settings)
    assert (manifest.width, manifest.height) == (2400, 1600)
    assert manifest.description == "Bike"
    # the defaults: WebP at every width, the JPEG fallback at three (640 taken as 680)
    for fmt, ext, widths in (("webp", "webp", (320, 680, 860, 1080, 1290, 1920)),
                             ("jpeg", "jpg", (320, 680, 1920))):
        variants = [v for v in manifest.variants if v.format == fmt]
        assert [(v.width, v.height) for v in variants] == \
            [(w, round(1600 * w / 2400)) for w in widths]
        for variant in variants:
            path = settings.store.origin_root / variant.path
            data = path.read_bytes()
            assert variant.bytes == len(data)
            match = NAME.fullmatch(path.name)
            assert match and match.group(1) == "my-bike" and match.group(3) == ext
            assert hashlib.sha256(data).hexdigest().startswith(match.group(2))
            image = decode(path)
            assert (image.width, image.height) == (variant.width, variant.height)
            assert mean_abs_diff(image, upright) < 3.0
    jpeg = decode(settings.store.origin_root / manifest.variants[-1].path)
    assert jpeg.get("interlaced") == 1  # progressive


def test_rerun_writes_nothing(settings: Settings) -> None:
    data = jpeg_with_exif(photo(1300, 900), credits=Credits(copyright="me"))
    first = run(data, "again.jpg", settings)
    before = snapshot(settings.store.origin_root) | snapshot(settings.store.manifest_root)
    second = run(data, "again.jpg", settings)
    assert second == first
    assert snapshot(settings.store.origin_root) | snapshot(settings.store.manifest_root) == before
    # Same input and settings, fresh store: the very same names (deterministic output).
    other = settings.updated(origin_root=settings.store.origin_root.parent / "o2",
                        manifest_root=settings.store.origin_root.parent / "m2")
    assert [v.path for v in run(data, "again.jpg", other).variants] == [
        v.path for v in first.variants]


def test_changed_source_is_redone(settings: Settings) -> None:
    first = run(bytes(photo(800, 600, seed=1).jpegsave_buffer()), "same-name.jpg", settings)
    second = run(bytes(photo(800, 600, seed=2).jpegsave_buffer()), "same-name.jpg", settings)
    assert first.source_sha256 != second.source_sha256
    assert {v.path for v in first.variants}.isdisjoint(v.path for v in second.variants)
    stored = Stores.local(settings.store).manifests.get(local_key(Path("sources/same-name.jpg")))
    assert stored == second


class FailingStore(LocalStore):
    """The real store, with a disk that fills up after ``allowed`` files."""

    def __init__(self, root: Path, allowed: int) -> None:
        super().__init__(root)
        self.allowed = allowed

    def write(self, key: str | PurePosixPath, data: bytes, *, replace: bool = False) -> bool:
        if self.allowed == 0:
            raise StorageError(f"cannot write {key}: No space left on device")
        self.allowed -= 1
        return super().write(key, data, replace=replace)


@pytest.mark.parametrize("allowed", [0, 3, 7])
def test_failure_midway_leaves_no_file(settings: Settings, tmp_path: Path, allowed: int) -> None:
    source = tmp_path / "full.jpg"
    source.write_bytes(bytes(photo(2000, 1500).jpegsave_buffer()))
    local = Stores.local(settings.store)
    failing = FailingStore(settings.store.origin_root, allowed)
    stores = Stores(failing, local.manifests, local.layout)
    with pytest.raises(ImgwarmError, match="No space left"):
        optimize_file(source, settings=settings, stores=stores)
    assert all_files(settings.store.origin_root) == []
    # nothing of the source: no record, claim or journal entry (references.json only says
    # that a store begun empty has every manifest's claims: none)
    assert [p.name for p in all_files(settings.store.manifest_root)] in ([], ["references.json"])


def test_python_api(settings: Settings, tmp_path: Path) -> None:
    source = tmp_path / "upload.jpg"
    source.write_bytes(bytes(photo(900, 600).jpegsave_buffer()))
    manifest = imgwarm.optimize_file(source, settings=settings, description="Uploaded",
                                     widths=[300, 600], formats=["webp"])
    assert [(v.format, v.width) for v in manifest.variants] == [("webp", 300), ("webp", 600)]
    assert manifest.description == "Uploaded"
    assert manifest.key == str(source.resolve())
    assert (settings.store.origin_root / manifest.variants[0].path).is_file()
    with pytest.raises(imgwarm.SourceError, match="empty file"):
        (tmp_path / "empty.jpg").write_bytes(b"")
        imgwarm.optimize_file(tmp_path / "empty.jpg", settings=settings)


def test_no_temp_files_and_readable_permissions(settings: Settings) -> None:
    manifest = run(bytes(photo(700, 500).jpegsave_buffer()), "perm.jpg", settings)
    files = all_files(settings.store.origin_root)
    assert len(files) == len(manifest.variants)
    assert all(not p.name.startswith(".") for p in files)
    assert all(os.stat(p).st_mode & 0o444 == 0o444 for p in files)


@pytest.mark.slow
def test_a_strip_too_tall_for_webp_is_made_as_tall_as_webp_allows(settings: Settings) -> None:
    strip = photo(20, 1700).resize(10)  # 200x17000: fine as a JPEG, too tall for WebP
    manifest = run(bytes(strip.jpegsave_buffer(Q=80)), "strip.jpg", settings)
    assert {(v.format, v.width, v.height) for v in manifest.variants} == {
        ("webp", 192, 16320), ("jpeg", 192, 16320)}
    webp = decode(settings.store.origin_root / manifest.variants[0].path)
    assert (webp.width, webp.height) == (192, 16320)
    assert mean_abs_diff(webp, strip) < 3.0
    jpeg_only = settings.updated(formats=["jpeg"])
    manifest = run(bytes(strip.jpegsave_buffer(Q=80)), "strip.jpg", jpeg_only)
    assert [(v.width, v.height) for v in manifest.variants] == [(200, 17000)]


def test_a_refusal_is_recorded_and_given_again_until_a_limit_changes(settings: Settings) -> None:
    from imgwarm.exceptions import RefusedBefore
    from imgwarm.manifest import Failure
    from imgwarm.pipeline.optimize import optimize_key

    original = settings.store.origin_root / "up" / "big.jpg"
    original.parent.mkdir(parents=True)
    original.write_bytes(photo(1600, 1200).jpegsave_buffer())
    strict = settings.updated(max_pixels=1_000_000)
    stores = Stores.local(strict.store)
    with pytest.raises(LimitExceeded, match=r"up/big\.jpg: .*max_pixels"):
        optimize_key("up/big.jpg", settings=strict, stores=stores)
    record = stores.manifests.read("up/big.jpg")
    assert isinstance(record, Failure) and "max_pixels" in record.failed
    before = snapshot(settings.store.manifest_root)
    with pytest.raises(RefusedBefore, match="max_pixels"):  # same bytes: no second decode
        optimize_key("up/big.jpg", settings=strict, stores=stores)
    assert snapshot(settings.store.manifest_root) == before  # and nothing rewritten
    # With the limit raised the same bytes are made: the refusal depended on it.
    made = optimize_key("up/big.jpg", settings=settings, stores=Stores.local(settings.store))
    assert (made.manifest.width, made.manifest.height) == (1600, 1200)
    assert stores.manifests.get("up/big.jpg") == made.manifest


def test_a_missing_original_is_recorded_but_not_held_against_it(settings: Settings) -> None:
    from imgwarm.exceptions import UnreadableSource
    from imgwarm.manifest import Failure
    from imgwarm.pipeline.optimize import optimize_key

    stores = Stores.local(settings.store)
    with pytest.raises(UnreadableSource, match="no such original"):
        optimize_key("up/late.jpg", settings=settings, stores=stores)
    record = stores.manifests.read("up/late.jpg")
    assert isinstance(record, Failure) and not record.certain
    # The upload lands later: the same key is made.
    (settings.store.origin_root / "up").mkdir(parents=True)
    (settings.store.origin_root / "up" / "late.jpg").write_bytes(photo(400, 300).jpegsave_buffer())
    made = optimize_key("up/late.jpg", settings=settings, stores=stores)
    assert stores.manifests.get("up/late.jpg") == made.manifest


def test_any_failure_after_the_writes_removes_them(settings: Settings,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Not only imgwarm's own errors: a bug in the manifest write (as the non-UTF-8 name once
    was) must not leave variants published without a manifest."""
    from imgwarm.pipeline.batch import run_batch
    from imgwarm.store import ManifestStore

    def broken(self: ManifestStore, record: object, *args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(ManifestStore, "put", broken)
    path = Path("in.jpg")
    path.write_bytes(bytes(photo(700, 500).jpegsave_buffer()))
    with pytest.raises(RuntimeError):
        optimize_file(path, settings=settings, stores=Stores.local(settings.store))
    assert all_files(settings.store.origin_root) == []
    (result,) = run_batch([path], settings)
    assert result.error == "in.jpg: internal error: RuntimeError('simulated bug')"
    assert all_files(settings.store.origin_root) == []
