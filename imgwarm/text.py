"""Text from outside: EXIF strings of any encoding, and names to show on one terminal line.

Anything an uploader controls may carry control characters (which rewrite what a terminal or a
log shows), bidi overrides (which make text read backwards) or bytes that are not UTF-8.
Source text is cleaned; text a user gives is refused with the option named (metadata.py).
"""

from __future__ import annotations

import re
import unicodedata

# Bidi embeddings, overrides, isolates and marks: they reorder what is shown around them.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SPACES = frozenset("\t\n\r\x0b\x0c\x85\u2028\u2029")  # become one space in source text
_SURROGATE = re.compile("[\ud800-\udfff]")


def unsafe_char(char: str) -> bool:
    """Control (C0, C1, DEL), line or paragraph separator, bidi control, BOM, surrogate."""
    return (unicodedata.category(char) in ("Cc", "Zl", "Zp", "Cs") or char in BIDI
            or char == "\ufeff")


def first_unsafe(text: str) -> str | None:
    """The first unsafe character of ``text``, if any."""
    return next((c for c in text if unsafe_char(c)), None)


def decode_mixed(raw: bytes) -> str:
    """UTF-8 where the bytes are UTF-8; any other byte as the Windows-1252 (else Latin-1)
    character it stands for. A string that is wholly Latin-1 reads as Latin-1, and one stray
    byte in UTF-8 text costs that byte alone, not the whole string."""
    text = raw.decode("utf-8", "surrogateescape")
    return _SURROGATE.sub(lambda m: _byte_char(ord(m.group()) - 0xDC00), text)


def _byte_char(byte: int) -> str:
    try:
        return bytes([byte]).decode("cp1252")
    except UnicodeDecodeError:
        return chr(byte)


def clean(text: str) -> str:
    """Source text made safe: line breaks and tabs become spaces, NULs and other control,
    bidi and surrogate characters go; trimmed."""
    kept = "".join(" " if c in _SPACES else c for c in text if c in _SPACES or not unsafe_char(c))
    return kept.strip()


def fit_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form has at most ``limit`` bytes, cut at a
    character boundary."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore").rstrip()


def printable(text: str) -> str:
    """``text`` for one line of a terminal or log: unsafe characters shown as escapes
    (``\\n``, ``\\x1b``, ``\\u202e``), and bytes that were not UTF-8 as ``\\xff``."""
    if not any(unsafe_char(c) for c in text):
        return text
    return "".join(_escape(c) if unsafe_char(c) else c for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return char.encode("unicode_escape").decode("ascii") if code < 0x10000 else char
