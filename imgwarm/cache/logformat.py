"""Log format: read nginx access-log lines written in any ``log_format``, as fast as they come.

The format is the nginx ``log_format`` string itself (or ``combined``). Of each line imgwarm
needs the request's method and path, its status, and the time. The format is compiled to two
patterns, both linear in the line whatever it holds: every repeat is possessive (``*+``), so
the engine never goes back over what it read, and a line is tried once, from its start:

- a *line* pattern, every variable a group: read once per block of lines, for the time of the
  block (lines are written in time order; with hotness halving over hours, the seconds between
  the first and last line of a block do not matter), and for every line when the format is
  one the fast pattern cannot read;
- a *request* pattern, where the format has ``"$request" $status`` (``combined`` and most
  formats built from it): from each line's start to the request's quote (nginx writes a
  ``"`` inside a value as ``\x22``, so the quotes of the format are the only ones), then
  ``METHOD /path..." 200``: a whole block at C speed, at most one match a line.

Everything in a line is untrusted: a line the pattern cannot read is counted as malformed,
never fatal, and nothing in it is evaluated.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from imgwarm.exceptions import LogFormatError

COMBINED = ('$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
            '"$http_referer" "$http_user_agent"')
_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TIMES = ("time_local", "time_iso8601", "msec")
_METHODS = rb"[A-Z]{1,16}"
COUNTED_METHODS = (b"GET", b"HEAD")  # what counts as a request for the file
COUNTED_STATUSES = (b"200", b"206", b"304")
COUNTED_CODES = frozenset(int(code) for code in COUNTED_STATUSES)


@dataclass(frozen=True)
class Request:
    method: bytes
    path: bytes  # without the query string, still percent-encoded
    status: int


# An unquoted request line: method, target, and the protocol when there is one (a request
# line holds spaces, so "up to the next space" would not do; no lazy repeat either).
_BARE_REQUEST = rb"[A-Z]{1,16}+ [^ \n]*+(?: HTTP/[0-9.]{1,8}+)?+"


def _value(name: str, following: str) -> bytes:
    """A variable's value, read possessively: up to the next literal character of the format
    (nginx escapes none of them in a value but ``"``, which it writes as ``\x22``)."""
    if name == "status":
        return rb"\d{3}"
    if name == "request" and following != '"':
        return _BARE_REQUEST
    if following:
        return b"[^" + re.escape(following.encode()) + b"\n]*+"
    return rb"[^\n]*+"


def _group(name: str, following: str) -> bytes:
    return b"(?P<" + name.encode() + b">" + _value(name, following) + b")"


def _check_variables(text: str) -> None:
    """Every ``$`` starts a variable nginx could name: ``$name`` or ``${name}``, the name in
    ASCII letters, digits and ``_`` (``$1``, ``$\u00e9`` or an unclosed ``${`` are refused)."""
    position = text.find("$")
    while position >= 0:
        found = _VARIABLE.match(text, position)
        if found is None:
            shown = text[position:position + 12]
            raise LogFormatError(
                f"{shown!r} (at character {position + 1}) is not a variable: write $name or "
                "${name}, the name in ASCII letters, digits and _, not starting with a digit")
        position = text.find("$", found.end())


class LogFormat:
    """A compiled ``log_format``."""

    def __init__(self, text: str) -> None:
        self.text = COMBINED if text.strip() == "combined" else text
        _check_variables(self.text)
        names = [a or b for a, b in _VARIABLE.findall(self.text)]
        has_request = "request" in names or "request_uri" in names or "uri" in names
        if not has_request or "status" not in names:
            raise LogFormatError(
                "the log format must hold the request ($request, or $request_method with "
                "$uri or $request_uri) and $status")
        self.time_variable = next((t for t in _TIMES if t in names), None)
        parts, position, seen = [], 0, set()
        for match in _VARIABLE.finditer(self.text):
            parts.append(re.escape(self.text[position:match.start()].encode()))
            name = match.group(1) or match.group(2)
            following = self.text[match.end():match.end() + 1]
            if name in seen:  # a variable twice: only the first is a named group
                parts.append(b"(?:" + _value(name, following) + b")")
            else:
                seen.add(name)
                parts.append(_group(name, following))
            position = match.end()
        parts.append(re.escape(self.text[position:].encode()))
        self.line = re.compile(b"^" + b"".join(parts) + b"$")
        self.request = None
        between = re.search(r'"\$request"([^$]*)\$status', self.text)
        if between is not None:
            # From a line's start (the newline before it: the engine jumps from one to the
            # next) over as many quotes as the format has before the request's, then one
            # group, the path, filled only for a counted request (a counted method and
            # status); any other readable request matches the second branch with the group
            # empty. A list of paths costs the engine a third of a list of triples.
            before = self.text[:between.start()].count('"')
            gap = re.escape(between.group(1).encode())
            methods, statuses = b"|".join(COUNTED_METHODS), b"|".join(COUNTED_STATUSES)
            self.request = re.compile(
                b'\n' + b'[^"\n]*+"' * (before + 1) + b'(?:(?:' + methods
                + rb') ([^ "?\n]*+)[^"\n]*+"' + gap + b"(?:" + statuses + b")|" + _METHODS
                + rb'+ [^"\n]*+"' + gap + rb"\d{3})")

    def parse_line(self, line: bytes) -> tuple[Request, float | None] | None:
        """One line read in full: its request and time; None when the format does not fit."""
        found = self.line.match(line)
        if found is None:
            return None
        values = found.groupdict()
        if values.get("request") is not None:
            words = values["request"].split(b" ")
            if len(words) < 2:
                return None
            method, target = words[0], words[1]
        else:
            method = values.get("request_method") or b"GET"
            target = values.get("request_uri") or values.get("uri") or b""
        try:
            status = int(values["status"])
        except (TypeError, ValueError):
            return None
        path = target.split(b"?", 1)[0]
        return Request(method, path, status), self._time(values)

    def _time(self, values: dict[str, bytes | None]) -> float | None:
        raw = values.get(self.time_variable) if self.time_variable else None
        if raw is None:
            return None
        text = raw.decode("ascii", "replace")
        try:
            if self.time_variable == "msec":
                return float(text)
            if self.time_variable == "time_iso8601":
                return datetime.fromisoformat(text).timestamp()
            return datetime.strptime(text, "%d/%b/%Y:%H:%M:%S %z").timestamp()
        except (ValueError, OverflowError):
            return None

    def time_of(self, block: bytes) -> float | None:
        """The time of the first readable line of a block of lines."""
        start = 0
        for _ in range(64):  # (no split: it would copy the rest of the block)
            end = block.find(b"\n", start)
            line = block[start:] if end < 0 else block[start:end]
            parsed = self.parse_line(line)
            if parsed is not None and parsed[1] is not None:
                return parsed[1]
            if end < 0:
                break
            start = end + 1
        return None

    def counted(self, block: bytes) -> tuple[Counter[bytes], int, int]:
        """The successful GETs and HEADs of a block of whole lines (path -> how many), how
        many lines it has, and how many could not be read."""
        lines = block.count(b"\n")
        counts: Counter[bytes]
        if self.request is not None:
            # each line from the newline before it: the first one given its own (a copy of
            # one line, not of the block)
            head = block.find(b"\n") + 1 or len(block)
            found = self.request.findall(b"\n" + block[:head])
            found += self.request.findall(block, head - 1)
            counts = Counter(found)
            counts.pop(b"", None)  # read, but not counted (or an empty path: no variant)
            return counts, lines, max(0, lines - len(found))
        counts = Counter()
        read = 0
        for line in block.split(b"\n"):
            parsed = self.parse_line(line) if line else None
            if parsed is not None:
                read += 1
                request = parsed[0]
                if request.method in COUNTED_METHODS and request.status in COUNTED_CODES:
                    counts[request.path] += 1
        return counts, lines, max(0, lines - read)
