"""Metadata: the description, copyright and artist of a source, and the EXIF of its outputs.

EXIF is built with piexif, byte for byte, and written by the encoders as given: libvips
re-serialises EXIF through libexif, which turns UTF-8 text into question marks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import piexif

_TEXT_TAGS = {
    "description": piexif.ImageIFD.ImageDescription,
    "copyright": piexif.ImageIFD.Copyright,
    "artist": piexif.ImageIFD.Artist,
}

ExifDict = dict[str, Any]


@dataclass(frozen=True)
class Credits:
    """The text an output carries for search engines and rights holders."""

    description: str | None = None
    copyright: str | None = None
    artist: str | None = None

    @classmethod
    def given(cls, description: str | None = None, copyright: str | None = None,
              artist: str | None = None) -> Credits:
        """Credits given by a user, trimmed like the source's: blank means "not given"."""
        return cls(clean_text(description), clean_text(copyright), clean_text(artist))

    def merged_over(self, base: Credits) -> Credits:
        """These values where given, else the base's."""
        return replace(
            base,
            **{k: v for k, v in vars(self).items() if v is not None},
        )


def clean_text(raw: bytes | str | None) -> str | None:
    """Decode and trim an EXIF string; blank or NUL-filled values count as absent."""
    if raw is None:
        return None
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
    else:
        text = raw
    text = text.replace("\x00", " ").strip()
    return text or None


def read_exif(data: bytes) -> ExifDict | None:
    """The source's EXIF as piexif reads it, or None when it has none or it is unreadable."""
    try:
        exif: ExifDict = piexif.load(data)
    except Exception:  # piexif raises anything from struct.error to ValueError on junk
        return None
    return exif


def credits_from_exif(exif: ExifDict | None) -> Credits:
    ifd0 = (exif or {}).get("0th", {})
    return Credits(**{name: clean_text(ifd0.get(tag)) for name, tag in _TEXT_TAGS.items()})


def build_exif(
    credits: Credits, source: ExifDict | None, *, keep_gps: bool, keep_maker_notes: bool
) -> bytes | None:
    """EXIF bytes for outputs: the credits (UTF-8), optionally the source's GPS and maker notes.
    No Orientation: pixels are already upright. None when there is nothing to say."""
    ifd0 = {
        tag: text.encode("utf-8")
        for name, tag in _TEXT_TAGS.items()
        if (text := getattr(credits, name)) is not None
    }
    exif: ExifDict = {"0th": ifd0}
    if source and keep_gps and source.get("GPS"):
        exif["GPS"] = source["GPS"]
    maker_note = (source or {}).get("Exif", {}).get(piexif.ExifIFD.MakerNote)
    if keep_maker_notes and maker_note:
        exif["Exif"] = {piexif.ExifIFD.MakerNote: maker_note}
    if len(exif) == 1 and not ifd0:
        return None
    try:
        return bytes(piexif.dump(exif))
    except Exception:  # a malformed kept block must not cost the credits
        return bytes(piexif.dump({"0th": ifd0})) if ifd0 else None
