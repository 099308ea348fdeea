"""Naming: ``{slug}.{hash}.{ext}``, the hash being that file's own SHA-256."""

from __future__ import annotations

import hashlib
from pathlib import PurePath

from slugify import slugify

SLUG_MAX = 60


def slug_for(source_name: str) -> str:
    """Lowercase ASCII ``a-z0-9-`` from the source's file name (transliterated; may be empty)."""
    return str(slugify(PurePath(source_name).stem, max_length=SLUG_MAX, word_boundary=True))


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_name(slug: str, digest: str, ext: str, hash_length: int) -> str:
    """The name of a file from its slug and content hash. With no slug the name starts with the
    hash: a leading dot would make it a hidden file, which nginx is told never to serve."""
    short = digest[:hash_length]
    return f"{slug}.{short}.{ext}" if slug else f"{short}.{ext}"
