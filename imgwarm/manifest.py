"""Manifest: per source, what was made from it, and the other plain data every part shares.

Manifest, Variant, Failure, Tombstone and a source's result: plain data and their JSON form,
no I/O (the manifest store, in ``imgwarm.store.manifests``, keeps them). Picture tags, preload
maps and ``warm`` read manifests; ``--json`` lines are results. What a manifest carries
besides its variants (Credits, Placeholder) is in carried.py, re-exported here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from imgwarm.carried import TEXT_CAPACITY as TEXT_CAPACITY  # (re-exported: carried.py)
from imgwarm.carried import Credits as Credits
from imgwarm.carried import Placeholder as Placeholder
from imgwarm.formats import Format

# Escaped in JSON text beyond what json.dumps escapes: lone surrogates (the odd bytes of a file
# name that is not UTF-8, as Python holds them), C1 controls and line separators (which some
# readers take for line breaks: NEL, U+2028, U+2029).
_ESCAPED = re.compile("[\ud800-\udfff\x7f-\x9f\u2028\u2029]")


def to_json(value: Any, *, indent: int | None = None, ascii_only: bool = False) -> str:
    """JSON text, valid UTF-8 and one line per value (unless indented) whatever the strings
    hold, and lossless: a name that is not UTF-8 keeps its odd bytes as ``\\udcXX`` escapes,
    which JSON readers turn back into the same string. Other text is written as it is, or, with
    ``ascii_only``, escaped too (for an output that is not UTF-8)."""
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Variant(BaseModel):
    model_config = ConfigDict(frozen=True)

    format: Format
    width: int = Field(ge=1)  # (read from files: a 0 would divide by zero where laid out)
    height: int = Field(ge=1)
    bytes: int = Field(ge=0)
    path: str  # relative to the origin root; also the URL path
    quality: int | None = None  # the encoder's quality (None: a manifest made before)
    score: float | None = None  # SSIMULACRA2 against the resized source (auto quality)
    hdr: bool = False  # an Ultra HDR JPEG: the source's gain map, resized with it
    # auto quality taken unchecked from a narrower width's (quality_check_width): no score
    predicted: bool = False
    # a JPEG whose colour is at full resolution below quality 90, where libvips would halve
    # it (auto quality: pipeline/quality.py): how to make the same file again
    full_chroma: bool = False

    @model_serializer(mode="wrap")
    def _plain(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``hdr``, ``predicted`` and ``full_chroma`` only where true: other variants are
        written as before these existed."""
        found: dict[str, Any] = handler(self)
        for flag in ("hdr", "predicted", "full_chroma"):
            if not found.get(flag):
                found.pop(flag, None)
        return found


class Manifest(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    source_sha256: str
    width: int = Field(ge=1)  # as displayed, after orientation
    height: int = Field(ge=1)
    description: str | None = None
    copyright: str | None = None
    artist: str | None = None
    settings_digest: str
    variants: list[Variant]
    # What was done in place of the usual (a damaged ICC profile ignored, EXIF blocks left
    # out), in words.
    warnings: list[str] = []
    # None: the manifest predates placeholders (the next optimize adds it without remaking
    # the variants); Placeholder.none(): the image has see-through pixels
    placeholder: Placeholder | None = None

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


class Tombstone(BaseModel):
    """A deleted source, in its manifest's place: every cache server's ``warm`` reads it (as it
    reads a new manifest) and removes the files from its tiers, and a delete killed midway
    is finished by the next from what it names."""

    model_config = ConfigDict(frozen=True)

    key: str
    deleted: float  # when (Unix seconds)
    variants: list[str]  # the paths its last manifest named
    original: bool = False  # the original was to go too (--original)

    def to_json(self) -> str:
        return to_json(self.model_dump(), indent=2) + "\n"


Record = Manifest | Failure | Tombstone


def named(record: Record | None) -> set[str]:
    """The variant paths a record keeps in use (a manifest's; a failure or tombstone: none)."""
    return {v.path for v in record.variants} if isinstance(record, Manifest) else set()


def parse_record(raw: bytes) -> Record | None:
    """A manifest, failure or tombstone from its JSON; None when it is none (damaged, or
    hostile). Nesting is bounded without a scan (every record is read on a full listing: a
    scan would double the cost): the C parser stops a text nested past its limit with a
    RecursionError, and the models, whose every field is typed (3 levels: record, variants,
    a variant), refuse anything nested where they expect a value, at the first level."""
    try:
        value = json.loads(raw)  # not pydantic's parser: it refuses \udcXX escapes
    except (ValueError, RecursionError):  # RecursionError: the C parser's own depth limit
        return None
    for model in (Manifest, Failure, Tombstone):
        try:
            found: Record = model.model_validate(value)
        except ValidationError:
            continue
        return found
    return None


@dataclass(frozen=True)
class SourceResult:
    """How one source ended: its manifest, or the one line saying why it failed."""

    source: str  # as given (or as found under a given folder), or the key
    manifest: Manifest | None = None
    error: str | None = None
    reused: bool = False  # nothing had to be made: same bytes, same settings

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_object(self) -> dict[str, Any]:
        """The ``--json`` object of a source (the shape is a public contract)."""
        if self.manifest is None:
            return {"source": self.source, "ok": False, "error": self.error}
        m = self.manifest
        found = {
            "source": self.source,
            "ok": True,
            "width": m.width,
            "height": m.height,
            "description": m.description,
            "copyright": m.copyright,
            "variants": [v.model_dump() for v in m.variants],
        }
        return found | ({"warnings": m.warnings} if m.warnings else {})
