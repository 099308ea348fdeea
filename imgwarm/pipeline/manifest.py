"""Manifest: per source, what was made from it. Picture tags, preload maps and warm read it."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from imgwarm.config import Format
from imgwarm.pipeline.layout import Layout
from imgwarm.pipeline.storage import Store

# Escaped in JSON text beyond what json.dumps escapes: lone surrogates (the odd bytes of a file
# name that is not UTF-8, as Python holds them), C1 controls and line separators (which some
# readers take for line breaks: NEL, U+2028, U+2029).
_ESCAPED = re.compile("[\ud800-\udfff\x7f-\x9f\u2028\u2029]")


def to_json(value: Any, *, indent: int | None = None) -> str:
    """JSON text, valid UTF-8 and one line per value (unless indented) whatever the strings
    hold, and lossless: a name that is not UTF-8 keeps its odd bytes as ``\\udcXX`` escapes,
    which JSON readers turn back into the same string. Other text is written as it is."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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
    # What was done in place of the usual (a damaged ICC profile ignored, EXIF blocks left
    # out), in words.
    warnings: list[str] = []

    def to_json(self) -> str:
        return to_json(self.model_dump(), indent=2) + "\n"


class Failure(BaseModel):
    """Why a source could not be made: kept in the manifest's place so that every machine can
    tell, and so that the same bytes are refused again without decoding them."""

    model_config = ConfigDict(frozen=True)

    key: str
    # The bytes that failed (a bad image: the same bytes and settings are refused without a
    # decode); None for failures that may pass (missing, too large, a worker that kept dying).
    source_sha256: str | None
    settings_digest: str
    failed: str  # the reason, one line

    @property
    def certain(self) -> bool:
        return self.source_sha256 is not None

    def to_json(self) -> str:
        return to_json(self.model_dump(), indent=2) + "\n"


Record = Manifest | Failure


class ManifestStore:
    """One JSON file per source key, sharded like the variants."""

    def __init__(self, store: Store, layout: Layout) -> None:
        self.store = store
        self.layout = layout

    def key_path(self, key: str) -> PurePosixPath:
        # surrogateescape: a file name that is not UTF-8 is still a key
        digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()
        return self.layout.path_for(f"{digest[:32]}.json", digest)

    def record(self, key: str) -> Record | None:
        """What is known of a key: its manifest, the reason it failed, or None when nothing
        is, or the record is damaged (the source is then made again, which rewrites it)."""
        raw = self.store.read(self.key_path(key))
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        for model in (Manifest, Failure):
            try:
                found: Record = model.model_validate(value)
            except ValidationError:
                continue
            return found if found.key == key else None
        return None

    def get(self, key: str) -> Manifest | None:
        """The manifest of a key; None when there is none (or only a failure)."""
        found = self.record(key)
        return found if isinstance(found, Manifest) else None

    def put(self, record: Record) -> None:
        """Store it, replacing the key's previous manifest or failure."""
        self.store.write(self.key_path(record.key), record.to_json().encode(), replace=True)
