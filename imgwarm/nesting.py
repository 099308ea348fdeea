"""Nesting: how deep the arrays and objects of a JSON or TOML text go, found by one linear
scan before a parser sees it. The parsers recurse once a level, so a few KB of brackets from
a hostile file raise RecursionError deep inside them; every format imgwarm reads needs only a
few levels, and refuses more with one line. (Manifest records, read by the hundred thousand,
are bounded otherwise: manifest.parse_record.)"""

from __future__ import annotations

import re

from imgwarm.exceptions import TooDeep

# What is not structure: strings (TOML's multi-line ones first, then basic with escapes, then
# literal) and TOML comments. Possessive repeats: one pass, whatever the text holds.
_NOT_STRUCTURE = re.compile(
    rb'"""(?:[^"\\]|\\.|"(?!""))*+"""|' + rb"'''(?:[^']|'(?!''))*+'''|"
    + rb'"(?:[^"\\\n]|\\.)*+"|' + rb"'[^'\n]*+'|#[^\n]*+", re.DOTALL)
_OTHERS = bytes(c for c in range(256) if c not in b"[]{}")


def check_nesting(text: str | bytes, limit: int) -> None:
    """TooDeep when arrays and objects (TOML: arrays and inline tables) nest deeper than
    ``limit``; brackets inside strings and comments do not count."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return  # too few to go deeper (the usual case: no scan)
    brackets = _NOT_STRUCTURE.sub(b"", data).translate(None, _OTHERS)
    depth = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            if depth > limit:
                raise TooDeep(f"nested more than {limit} levels deep (arrays and objects); "
                              "this file needs fewer")
        else:
            depth = max(depth - 1, 0)

