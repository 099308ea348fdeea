"""Metadata: the description, copyright and artist of a source, and the EXIF of its outputs.

EXIF is built with piexif, byte for byte, and written by the encoders as given: libvips
re-serialises EXIF through libexif, which turns UTF-8 text into question marks. Every output
carries the same EXIF, and a JPEG holds it in one APP1 segment of at most 64 KB: the text is
kept within that (given text that cannot fit is refused; source text is trimmed), and the
optional GPS and maker-note blocks go first when they would not fit beside it.
"""

from __future__ import annotations

import piexif

from imgwarm.carried import Credits
from imgwarm.pipeline.exif import ExifDict
from imgwarm.text import clean, decode_mixed

_TEXT_TAGS = {
    "description": piexif.ImageIFD.ImageDescription,
    "copyright": piexif.ImageIFD.Copyright,
    "artist": piexif.ImageIFD.Artist,
}
# "Exif\0\0" and the TIFF block must fit a JPEG APP1 segment (its length field counts itself).
# Credits (imgwarm.manifest) keep the text within it: TEXT_CAPACITY.
MAX_EXIF = 65535 - 2


def clean_text(raw: object) -> str | None:
    """Source EXIF text made safe: decoded (UTF-8, else each odd byte as Windows-1252),
    control and bidi characters removed, trimmed; blank or NUL-filled values count as absent,
    as do values that are not text at all (a tag declared SHORT or RATIONAL)."""
    if not isinstance(raw, bytes | str):
        return None
    text = decode_mixed(raw) if isinstance(raw, bytes) else raw
    return clean(text) or None


def credits_from_exif(exif: ExifDict | None) -> Credits:
    ifd0 = (exif or {}).get("0th", {})
    return Credits(**{name: clean_text(ifd0.get(tag)) for name, tag in _TEXT_TAGS.items()})


def build_exif(
    credits: Credits, source: ExifDict | None, *, keep_gps: bool, keep_maker_notes: bool
) -> tuple[bytes | None, list[str]]:
    """EXIF bytes for outputs: the credits (UTF-8), optionally the source's GPS and maker
    notes; None when there is nothing to say. No Orientation: pixels are already upright.
    Also returns what had to be left out, in words."""
    credits = Credits().merged_over(credits)  # within the segment, even if made directly
    ifd0 = {
        tag: text.encode("utf-8")
        for name, tag in _TEXT_TAGS.items()
        if (text := getattr(credits, name)) is not None
    }
    wanted: list[tuple[str, str, ExifDict]] = []
    maker_note = (source or {}).get("Exif", {}).get(piexif.ExifIFD.MakerNote)
    if keep_maker_notes and maker_note:
        wanted.append(("Exif", "maker notes", {piexif.ExifIFD.MakerNote: maker_note}))
    if source and keep_gps and source.get("GPS"):
        wanted.append(("GPS", "GPS block", source["GPS"]))
    notes: list[str] = []
    optional = []
    for block, what, value in wanted:  # a malformed kept block must not cost the credits
        try:
            piexif.dump({"0th": {}, block: value})
        except Exception:
            notes.append(f"the source's {what} left out: piexif cannot write it")
            continue
        optional.append((block, what, value))
    while ifd0 or optional:
        data = bytes(piexif.dump({"0th": ifd0, **{b: v for b, _, v in optional}}))
        if len(data) <= MAX_EXIF:
            return data, notes
        _, what, _ = optional.pop(0)  # the text always fits: see Credits
        notes.append(f"the source's {what} left out: no room beside the text in EXIF")
    return None, notes
