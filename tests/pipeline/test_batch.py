"""Batch: parallel sources, each with its own result and its own error text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from imgwarm.config import Settings
from imgwarm.exceptions import SourceError
from imgwarm.pipeline.batch import collect_sources, run_batch
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.store import Stores
from tests.support.files import all_files
from tests.support.images import photo

pytestmark = pytest.mark.slow


def damaged_files(folder: Path) -> list[Path]:
    """Good and differently damaged JPEGs, interleaved."""
    folder.mkdir()
    made = []
    for i in range(6):
        data = bytes(photo(900 + 40 * i, 700, seed=i).jpegsave_buffer(Q=90,
                                                                     interlace=bool(i % 2)))
        sof = data.find(b"\xff\xc0") if i % 2 == 0 else data.find(b"\xff\xc2")
        for kind, content in (("good", data), ("cut", data[: len(data) // 2]),
                              ("header", data[:sof]), ("twelve-bit", _twelve_bit(data, sof))):
            path = folder / f"{i}-{kind}.jpg"
            path.write_bytes(content)
            made.append(path)
    return made


def _twelve_bit(data: bytes, sof: int) -> bytes:
    return data[: sof + 4] + b"\x0c" + data[sof + 5:]  # frame header says 12-bit precision


def test_each_error_is_its_own_file_s(settings: Settings, tmp_path: Path) -> None:
    files = damaged_files(tmp_path / "mixed")
    alone = {}
    for path in files:
        try:
            optimize_file(path, settings=settings, stores=Stores.local(settings.store))
        except SourceError as error:
            alone[str(path)] = str(error)
    assert len(alone) == 18
    parallel = settings.updated(workers=2,
                                origin_root=tmp_path / "o2", manifest_root=tmp_path / "m2")
    for _ in range(3):
        results = {r.source: r for r in run_batch(files, parallel)}
        assert {s for s, r in results.items() if not r.ok} == set(alone)
        for source, message in alone.items():
            assert results[source].error == message


def test_collect_sources(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / ".hidden").mkdir()
    for name in ("a/x.JPG", "a/b/y.png", "a/notes.txt", "a/.z.jpg", "a/.hidden/w.jpg"):
        (tmp_path / name).write_bytes(b"")
    found = collect_sources([str(tmp_path / "a"), str(tmp_path / "named.txt"),
                             str(tmp_path / "a" / "x.JPG")])
    paths = [p if isinstance(p, Path) else p.path for p in found]
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "a/x.JPG", "a/b/y.png", "named.txt"]


def _deep_folder(top: Path, depth: int = 24) -> Path:
    """A folder nested so deep that its path is longer than PATH_MAX: it cannot be listed by
    path, even by root (made with relative calls)."""
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d" * 250, dir_fd=fd)
            inner = os.open("d" * 250, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return top


def test_loops_links_out_and_unlistable_folders_cost_one_line_each(
    settings: Settings, tmp_path: Path
) -> None:
    folder = tmp_path / "uploads"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.jpg").write_bytes(bytes(photo(300, 200).jpegsave_buffer()))
    (folder / "sub" / "inside.jpg").symlink_to(folder / "good.jpg")
    (folder / "loop.jpg").symlink_to(folder / "loop.jpg")
    (folder / "a.jpg").symlink_to(folder / "b.jpg")
    (folder / "b.jpg").symlink_to(folder / "a.jpg")
    (folder / "dangling.jpg").symlink_to(folder / "missing.jpg")
    outside = tmp_path / "private.jpg"
    outside.write_bytes(bytes(photo(200, 100).jpegsave_buffer()))
    (folder / "planted.jpg").symlink_to(outside)
    (folder / "passwd.jpg").symlink_to("/etc/passwd")
    _deep_folder(folder / "deep")
    found = collect_sources([str(folder)])
    results = {Path(r.source).name: r for r in run_batch(found, settings)}
    assert results.pop("good.jpg").ok
    errors = {name: r.error or "" for name, r in results.items()}
    assert errors.pop("loop.jpg").endswith("loop.jpg: symlink loop")
    assert errors.pop("a.jpg").endswith("symlink loop")
    assert errors.pop("b.jpg").endswith("symlink loop")
    assert "broken symlink" in errors.pop("dangling.jpg")
    assert "symlink leads outside" in errors.pop("planted.jpg")
    assert "symlink leads outside" in errors.pop("passwd.jpg")
    (deep_name, deep_error), = errors.items()  # the one folder that could not be listed
    assert deep_name == "d" * 250 and "cannot list this folder: File name too long" in deep_error
    assert "inside.jpg" not in results  # the same file as good.jpg, taken once
    published = {p.name.split(".")[0] for p in all_files(settings.store.origin_root)}
    assert published == {"good"}  # nothing from outside the folder


def test_a_file_named_directly_is_taken_through_its_link(settings: Settings,
                                                         tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jpg"
    target.write_bytes(bytes(photo(300, 200).jpegsave_buffer()))
    link = tmp_path / "named.jpg"
    link.symlink_to(target)
    (result,) = run_batch(collect_sources([str(link)]), settings)
    assert result.ok, result.error


def test_a_file_swapped_for_a_link_after_the_scan_is_not_read(settings: Settings,
                                                              tmp_path: Path) -> None:
    folder, secret = tmp_path / "uploads", tmp_path / "private.jpg"
    folder.mkdir()
    (folder / "a.jpg").write_bytes(bytes(photo(300, 200, seed=1).jpegsave_buffer()))
    secret.write_bytes(bytes(photo(300, 200, seed=2).jpegsave_buffer()))
    found = collect_sources([str(folder)])
    (folder / "a.jpg").unlink()
    (folder / "a.jpg").symlink_to(secret)  # between the scan and the read
    (result,) = run_batch(found, settings)
    assert result.error is not None and "leads outside" in result.error
    assert all_files(settings.store.origin_root) == []


def test_a_named_file_is_taken_though_a_refused_link_to_it_came_first(
    settings: Settings, tmp_path: Path
) -> None:
    (tmp_path / "up").mkdir()
    (tmp_path / "other").mkdir()
    named = tmp_path / "other" / "photo.jpg"
    named.write_bytes(bytes(photo(300, 200).jpegsave_buffer()))
    (tmp_path / "up" / "evil.jpg").symlink_to(named)
    results = {Path(r.source).name: r for r in
               run_batch(collect_sources([str(tmp_path / "up"), str(named)]), settings)}
    assert "symlink leads outside" in (results["evil.jpg"].error or "")
    assert results["photo.jpg"].ok
