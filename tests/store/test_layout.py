"""Layout: sharded folders within the entry limit; keys that cannot escape their root."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path, PurePosixPath

import numpy as np
import pytest

from imgwarm.exceptions import LayoutError
from imgwarm.pipeline.naming import file_name
from imgwarm.store.layout import Layout, join_under, safe_relative
from imgwarm.store.local import LocalStore


def _entries_per_folder(paths: list[PurePosixPath]) -> Counter[PurePosixPath]:
    """How many entries (files or sub-folders) every folder of a tree would hold."""
    children: dict[PurePosixPath, set[str]] = {}
    for path in paths:
        for parent, child in zip(path.parents, [path, *path.parents], strict=False):
            children.setdefault(parent, set()).add(child.name)
    return Counter({folder: len(names) for folder, names in children.items()})


@pytest.mark.slow
def test_100k_names_keep_every_folder_within_255() -> None:
    layout = Layout()
    paths = []
    for i in range(100_000):
        digest = hashlib.sha256(f"synthetic-{i}".encode()).hexdigest()
        paths.append(layout.path_for(file_name("photo", digest, "webp", 16), digest))
    assert len(set(paths)) == 100_000
    counts = _entries_per_folder(paths)
    assert max(counts.values()) <= 255
    assert counts[PurePosixPath(".")] == 128  # 7 bits a level: the largest power of 2 <= 255


def _leaf_index(hashes: np.ndarray, layout: Layout) -> np.ndarray:
    """The leaf folder number of 64-bit hash values: their top bits, as folder_for reads."""
    return (hashes >> np.uint64(64 - layout.bits * layout.levels)).astype(np.int64)


def test_default_layout_holds_16_million_files() -> None:
    """16M uniformly random 64-bit hashes (what SHA-256 gives), placed as folder_for places
    them: the fullest leaf folder stays far below 255."""
    layout = Layout()
    rng = np.random.default_rng(2026)
    sample = rng.integers(0, 2**63, size=2_000, dtype=np.uint64) * np.uint64(2)
    for value, leaf in zip(sample.tolist(), _leaf_index(sample, layout).tolist(), strict=True):
        parts = layout.folder_for(f"{value:016x}").parts
        assert leaf == sum(int(p, 16) << (layout.bits * (2 - i)) for i, p in enumerate(parts))
    hashes = rng.integers(0, 2**63, size=16_000_000, dtype=np.uint64) * np.uint64(2)
    hashes |= rng.integers(0, 2, size=hashes.size, dtype=np.uint64)
    fullest = int(np.bincount(_leaf_index(hashes, layout), minlength=layout.leaves).max())
    assert fullest < 64, fullest
    assert 2**layout.bits <= 255


@pytest.mark.parametrize(("limit", "levels"), [(16, 2), (255, 3), (1000, 2), (65536, 4)])
def test_every_level_within_limit(limit: int, levels: int) -> None:
    layout = Layout(limit, levels)
    digest = "f" * 64
    folder = layout.folder_for(digest)
    assert len(folder.parts) == levels
    assert all(int(part, 16) < 2**layout.bits <= limit for part in folder.parts)


def test_folder_is_derived_from_the_name_hash() -> None:
    layout = Layout()
    digest = "ffffff" + "0" * 58
    assert str(layout.folder_for(digest)) == "7f/7f/7f"
    assert str(layout.folder_for("0" * 64)) == "00/00/00"


def test_stale_temp_files_do_not_hold_the_limit(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, max_entries=16, fsync=False)
    for i in range(15):
        store.write(f"leaf/f{i}", b"x")
    crashed = tmp_path / "leaf" / ".tmp-crashed.part"  # left by a writer that died
    crashed.write_bytes(b"half")
    os.utime(crashed, (0, 0))
    assert store.write("leaf/f15", b"x")
    assert not crashed.exists()
    assert len(os.listdir(tmp_path / "leaf")) == 16


@pytest.mark.parametrize(
    "key",
    ["../etc/passwd", "a/../../b", "/abs/path", "", "a//b", "a/./b", "a\\..\\b", "a\x00b",
     "a\nb", "./a", "a/.."],
)
def test_odd_keys_are_refused(key: str, tmp_path: Path) -> None:
    with pytest.raises(LayoutError):
        safe_relative(key)
    store = LocalStore(tmp_path / "root", fsync=False)
    with pytest.raises(LayoutError):
        store.write(key, b"x")
    assert not (tmp_path / "etc").exists()


def test_symlink_out_of_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(LayoutError, match="outside"):
        join_under(root, "link/file.webp")
    assert join_under(root, "a/b.webp") == root / "a" / "b.webp"


def test_a_store_refuses_links_that_lead_out_at_any_depth(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.webp").write_bytes(b"secret")
    store = LocalStore(root, fsync=False)
    assert store.write("a/b/ok.webp", b"fine")  # the folders are now known to be inside
    (root / "a" / "c").symlink_to(outside)  # a folder that leads out, beside a known one
    (root / "a" / "b" / "leak.webp").symlink_to(outside / "secret.webp")  # a file that does
    (root / "a" / "b" / "alias.webp").symlink_to(root / "a" / "b" / "ok.webp")  # one stays in
    with pytest.raises(LayoutError, match="outside"):
        store.write("a/c/x.webp", b"x")
    with pytest.raises(LayoutError, match="outside"):
        store.read("a/b/leak.webp")
    assert store.read("a/b/alias.webp") == b"fine"
    assert store.read("a/b/ok.webp") == b"fine"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.webp"]


def test_files_lists_every_file_in_order_and_no_temporary_or_linked_folder(
        tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = LocalStore(root, fsync=False)
    keys = [f"{a:02x}/{b:02x}/f{a}{b}.webp" for a in range(20) for b in range(3)]
    for key in reversed(keys):
        store.write(key, b"x")
    store.write("top.json", b"{}")
    (root / "00" / ".tmp-abc.part").write_bytes(b"partial")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "not-ours.webp").write_bytes(b"x")
    (root / "zz").symlink_to(elsewhere)
    listed = [str(p) for p in store.files()]
    assert listed == ["top.json", *sorted(keys)]
    assert [str(p) for p in store.files("03")] == sorted(k for k in keys if k.startswith("03/"))


def test_a_folder_swapped_for_a_link_after_use_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.webp").write_bytes(b"secret")
    store = LocalStore(root, fsync=False)
    assert store.write("a/b/ok.webp", b"fine") and store.read("a/b/ok.webp") == b"fine"
    (root / "a").rename(root / "a_old")  # the folder, once used, now leads out
    (root / "a").symlink_to(outside)
    (outside / "b").mkdir()
    (outside / "b" / "secret.webp").write_bytes(b"secret")
    for act in (lambda: store.read("a/b/secret.webp"), lambda: store.write("a/b/new.webp", b"x"),
                lambda: store.delete("a/b/secret.webp")):
        with pytest.raises(LayoutError, match="outside"):
            act()
    assert sorted(p.name for p in (outside / "b").iterdir()) == ["secret.webp"]
