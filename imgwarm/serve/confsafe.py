"""Strings that go into an nginx config: quoted so they stay what they are, or refused.

Inside nginx's double quotes, ``"`` and ``\\`` are escaped with a backslash and ``; { } #`` are
plain characters; but ``$`` always starts a variable (no escape exists for it) and a control
character or a line break would end the directive in a way nobody meant. So those are refused,
with the entry that holds them named; everything else is quoted.
"""

from __future__ import annotations

import re

from imgwarm.exceptions import ConfigValueError

# Control characters, line breaks, bidi overrides, lone surrogates (bytes that were not
# UTF-8: they cannot even be written out), and $.
_UNWRITABLE = "\x00-\x1f\x7f\u0080-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_REFUSED = re.compile(f"[{_UNWRITABLE}$]")
MAX_VALUE = 2048  # nginx takes no parameter longer than 4 KiB; a sane value is far shorter


def checked(value: str, what: str) -> str:
    """``value`` unchanged, or ConfigValueError naming ``what`` and the offending character."""
    _short(value, what)
    found = _REFUSED.search(value)
    if found is not None:
        raise ConfigValueError(
            f"{what}: {value!r} holds {found.group()!r} at {found.start()}, which cannot go "
            "into an nginx config ('$' starts a variable; control characters and line breaks "
            "end directives)")
    return value


def quoted(value: str, what: str) -> str:
    """The content of a double-quoted nginx string (without the quotes)."""
    return checked(value, what).replace("\\", "\\\\").replace('"', '\\"')


def single_quoted(value: str, what: str) -> str:
    """The content of a single-quoted nginx string, for a log_format (whose ``$`` are
    variables by design): only control characters are refused."""
    _short(value, what)
    found = re.search(f"[{_UNWRITABLE}]", value)
    if found is not None:
        raise ConfigValueError(f"{what}: {value!r} holds {found.group()!r} at {found.start()}, "
                               "which cannot go into an nginx config")
    return value.replace("\\", "\\\\").replace("'", "\\'")


def bare(value: str, what: str, pattern: str = r"[A-Za-z0-9._:/\[\]@*~+=,%-]+") -> str:
    """A value written without quotes (a path, an address, a name): only characters that
    cannot end or split a directive."""
    _short(value, what)
    if not re.fullmatch(pattern, value):
        raise ConfigValueError(
            f"{what}: {value!r} cannot go into an nginx config as it is (allowed: letters, "
            "digits and . _ : / [ ] @ * ~ + = , % -)")
    return value


def _short(value: str, what: str) -> None:
    if len(value) > MAX_VALUE:
        raise ConfigValueError(f"{what}: {value[:60]!r}... is {len(value)} characters long; "
                               f"nginx takes at most {MAX_VALUE} here")
