"""Manifest: per source, what was made from it. Picture tags, preload maps and warm read it."""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, ValidationError

from imgwarm.config import Format
from imgwarm.pipeline.layout import Layout
from imgwarm.pipeline.storage import Store


class Variant(BaseModel):
    model_config = ConfigDict(frozen=True)

    format: Format
    width: int
    height: int
    bytes: int
    path: str  # relative to the origin root; also the URL path


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    source_sha256: str
    width: int  # as displayed, after orientation
    height: int
    description: str | None = None
    copyright: str | None = None
    artist: str | None = None
    settings_digest: str
    variants: list[Variant]

    def to_json(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


class ManifestStore:
    """One JSON file per source key, sharded like the variants."""

    def __init__(self, store: Store, layout: Layout) -> None:
        self.store = store
        self.layout = layout

    def key_path(self, key: str) -> PurePosixPath:
        # surrogateescape: a file name that is not UTF-8 is still a key
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
        return self.layout.path_for(f"{digest[:32]}.json", digest)

    def get(self, key: str) -> Manifest | None:
        """The manifest of a key; None when there is none, or it is damaged (the source is
        then made again, which rewrites it)."""
        raw = self.store.read(self.key_path(key))
        if raw is None:
            return None
        try:
            manifest = Manifest.model_validate_json(raw)
        except ValidationError:
            return None
        return manifest if manifest.key == key else None

    def put(self, manifest: Manifest) -> None:
        """Store it, replacing the key's previous manifest."""
        self.store.write(self.key_path(manifest.key), manifest.to_json().encode(), replace=True)
