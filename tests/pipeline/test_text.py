"""Text from outside: shown on one line, decoded byte by byte, trimmed at a character."""

from __future__ import annotations

import pytest

from imgwarm.text import clean, decode_mixed, first_unsafe, fit_utf8, printable


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("plain photo.jpg", "plain photo.jpg"),
        ("Київ.jpg", "Київ.jpg"),
        ("two\nlines.jpg", "two\\nlines.jpg"),
        ("esc\x1b[2J.jpg", "esc\\x1b[2J.jpg"),
        ("rtl\u202egpj.exe", "rtl\\u202egpj.exe"),
        ("bad\udcff.jpg", "bad\\xff.jpg"),  # a byte that was not UTF-8 (surrogateescape)
        ("del\x7f\x85", "del\\x7f\\x85"),
    ],
)
def test_printable_keeps_one_line_and_shows_what_is_there(name: str, shown: str) -> None:
    assert printable(name) == shown
    assert printable(name).isprintable() or "Київ" in name


def test_decode_mixed() -> None:
    assert decode_mixed("Червоний".encode()) == "Червоний"
    assert decode_mixed(b"caf\xe9") == "café"
    assert decode_mixed(b"ok " + b"\x80") == "ok €"
    assert decode_mixed(b"\x81") == "\x81"  # undefined in Windows-1252: Latin-1


def test_clean_and_first_unsafe() -> None:
    assert clean(" a\tb\r\nc\x00d\u2028e \u200f") == "a b  cd e"
    assert first_unsafe("fine text") is None
    assert first_unsafe("x\u2066y") == "\u2066"


@pytest.mark.parametrize("limit", range(0, 12))
def test_fit_utf8_cuts_at_a_character(limit: int) -> None:
    text = "aЖ€𝄞b"  # 1, 2, 3, 4 and 1 bytes
    fitted = fit_utf8(text, limit)
    assert text.startswith(fitted)
    assert len(fitted.encode()) <= limit
    assert len(text[:len(fitted) + 1].encode()) > limit or fitted == text
