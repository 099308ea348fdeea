"""Names: ``{slug}.{hash}.{ext}``."""

from __future__ import annotations

import hashlib
import re

from imgwarm.pipeline.naming import file_name, slug_for
from imgwarm.store.layout import hash_of_name


def test_slug_is_lowercase_ascii() -> None:
    assert slug_for("/up/Landscape_1.JPG") == "landscape-1"
    assert slug_for("Червоний велосипед.jpg") == "chervonii-velosiped"
    assert slug_for("  __ .jpg") == ""
    for name in ("ÄÖÜ straße.jpg", "a/b/c d?e*f.jpeg", "日本.jpg", "x" * 300 + ".jpg"):
        assert re.fullmatch(r"[a-z0-9-]{0,60}", slug_for(name)), name


def test_name_carries_the_content_hash() -> None:
    data = b"some bytes"
    digest = hashlib.sha256(data).hexdigest()
    name = file_name("photo", digest, "webp", 16)
    assert name == f"photo.{digest[:16]}.webp"
    assert digest.startswith(hash_of_name(name))
    assert file_name("", digest, "jpg", 20) == f"{digest[:20]}.jpg"  # never a hidden file
