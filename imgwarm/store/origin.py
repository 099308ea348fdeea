"""Origin: where originals are read by key and variants and manifests are kept for good.

Two kinds behind the same Store interface: a local folder (the embedded default) and an S3
bucket. In S3, variants sit under the prefix at their URL path, originals at their own keys,
and manifests under ``.imgwarm/manifests/`` (a dot folder, which nginx is told never to serve).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from imgwarm.config import StoreSettings
from imgwarm.exceptions import LayoutError, ObjectTooLarge, UnreadableSource, too_large
from imgwarm.roots import check_root
from imgwarm.store.base import Store
from imgwarm.store.changes import LocalChangeLog
from imgwarm.store.format import FORMAT_RECORD, WRITE, FormatGate, FormatRecord
from imgwarm.store.layout import Layout, safe_relative
from imgwarm.store.local import LocalStore
from imgwarm.store.manifests import ManifestStore
from imgwarm.store.references import References

S3_MANIFEST_FOLDER = ".imgwarm/manifests/"
# What a variant's path could look like under any layout, loosely: hex shard folders, then a
# name with a run of 16 or more hex digits before a dot. A source key like it is refused, so
# that no original can ever have the (stricter) shape Layout.holds gives what gc may remove.
_VARIANT_SHAPE = re.compile(r"(?:[0-9a-f]{1,4}/)+[^/]*[0-9a-f]{16,}\.[^/]*")


@dataclass(frozen=True)
class Stores:
    """Where originals are read and variants and manifests go, and the store's format gate
    (store/format.py: every read and write of both stores asks it first; a command asks it
    once up front with what it does, ``check``)."""

    origin: Store
    manifests: ManifestStore
    layout: Layout
    gate: FormatGate | None = field(default=None, compare=False)

    def check(self, mode: str = WRITE, *, create: bool = False) -> FormatRecord | None:
        """FormatTooNew, before anything is done, when the store is newer than this code may
        ``mode`` (store.format READ, ACT, WRITE). The record a store lacks is written by its
        first write (the gate each write asks), not by this look (a refused bad source leaves
        nothing), unless ``create``."""
        return None if self.gate is None else self.gate.check(mode, create=create)

    @classmethod
    def local(cls, settings: StoreSettings) -> Stores:
        # what another user (the web app's group too) may write or swap decides what nginx
        # serves: refused, as the tiers are; "/" or /etc would take shard folders among theirs
        check_root(settings.origin_root, "the origin (origin_root)")
        check_root(settings.manifest_root, "the manifest store (manifest_root)")
        layout = Layout(settings.max_dir_entries, settings.shard_levels)
        origin = LocalStore(
            settings.origin_root, max_entries=settings.max_dir_entries, fsync=settings.fsync
        )
        manifests = LocalStore(
            settings.manifest_root, max_entries=settings.max_dir_entries, fsync=settings.fsync
        )
        journal = LocalChangeLog(settings.manifest_root)
        gate = FormatGate(LocalStore(settings.origin_root, fsync=settings.fsync),
                          f"origin {settings.origin_root}", refresh=settings.format_refresh)
        origin.guard = manifests.guard = gate
        gate.before_create = References(
            LocalStore(settings.manifest_root, max_entries=settings.max_dir_entries,
                       fsync=settings.fsync), layout).start
        return cls(origin, ManifestStore(manifests, layout, journal), layout, gate)

    @classmethod
    def s3(cls, settings: StoreSettings) -> Stores:
        from imgwarm.store.changes import S3ChangeLog
        from imgwarm.store.s3 import NO_CACHE, S3Store, make_client  # boto3 only when used

        assert settings.s3_bucket is not None  # StoreSettings refuses s3 without one
        client = make_client(settings)
        layout = Layout(settings.max_dir_entries, settings.shard_levels)
        origin = S3Store(client, settings.s3_bucket, settings.s3_prefix)
        manifests = S3Store(client, settings.s3_bucket,
                            settings.s3_prefix + S3_MANIFEST_FOLDER, cache_control=NO_CACHE)
        gate = FormatGate(S3Store(client, settings.s3_bucket, settings.s3_prefix),
                          f"origin s3://{settings.s3_bucket}/{settings.s3_prefix}",
                          refresh=settings.format_refresh)
        origin.guard = manifests.guard = gate
        gate.before_create = References(  # unguarded: it runs inside the gate
            S3Store(client, settings.s3_bucket, settings.s3_prefix + S3_MANIFEST_FOLDER,
                    cache_control=NO_CACHE), layout).start
        return cls(origin, ManifestStore(manifests, layout, S3ChangeLog(manifests)), layout,
                   gate)

    @classmethod
    def for_settings(cls, settings: StoreSettings) -> Stores:
        return cls.s3(settings) if settings.origin == "s3" else cls.local(settings)

    def path_of(self, name: str) -> PurePosixPath:
        """Where a content-addressed file goes: its shard folder, from the hash in its name."""
        return self.layout.path_for_name(name)


def local_key(path: Path) -> str:
    """The manifest key of a local file: its absolute path, so any working folder finds it.
    (realpath, not Path.resolve: a symlink loop must not raise here.)"""
    return os.path.realpath(path)


def check_source_key(key: str) -> None:
    """Refuse a key that is unsafe (LayoutError: ``..``, absolute, control characters), names
    imgwarm's own hidden files (temp files, ``.imgwarm/manifests``), the format record, or
    looks like a variant."""
    if key == FORMAT_RECORD:
        raise LayoutError(f"refusing key {key!r}: it is the store's format record")
    if any(part.startswith(".") for part in safe_relative(key).parts):
        raise LayoutError(f"refusing key {key!r}: hidden names ('.' first) are imgwarm's own")
    if _VARIANT_SHAPE.fullmatch(key):
        raise LayoutError(f"refusing key {key!r}: it has the shape of a variant's path (hex "
                          "shard folders, a hashed name), which gc would take for one")


def read_original(store: Store, key: str, max_bytes: int) -> bytes:
    """The bytes of the original at ``key``, refusing unsafe keys (LayoutError) and oversized
    objects before reading them."""
    check_source_key(key)
    try:
        data = store.read(key, limit=max_bytes)
    except ObjectTooLarge as error:
        raise too_large(key, error.size, max_bytes) from None
    if data is None:
        raise UnreadableSource(key, f"no such original ({store.describe(key)})")
    return data
