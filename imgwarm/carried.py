"""What a source's outputs carry besides pixels: the credits written into their EXIF and the
placeholder a page shows before the image. Plain dataclasses, no pydantic: the pixel work
makes them in worker processes that never load it (pipeline/isolate.py); manifest.py keeps
them in its records.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from imgwarm.exceptions import SettingsError
from imgwarm.text import first_unsafe, fit_utf8


@dataclass(frozen=True)
class Placeholder:
    """What a page shows before the image (pipeline/placeholder.py). Read from a manifest
    file, so checked again where it goes into a page (serve/picture.py)."""

    color: str  # the dominant colour, #rrggbb; "" with lqip "": none can be shown
    lqip: str  # a tiny WebP as a data URI

    @classmethod
    def none(cls) -> Placeholder:
        """Looked for, and none to show (see-through pixels): not looked for again."""
        return cls(color="", lqip="")


# Bytes of text an output's EXIF holds: "Exif\0\0" and the TIFF block fill one JPEG APP1
# segment (65,533 bytes after its length), less the block's own structure for three ASCII
# entries (59 bytes, as piexif writes it: tests/pipeline/test_metadata.py checks the sum).
TEXT_CAPACITY = 65_474


@dataclass(frozen=True)
class Credits:
    """The text an output carries for search engines and rights holders."""

    description: str | None = None
    copyright: str | None = None
    artist: str | None = None

    @classmethod
    def given(cls, description: str | None = None, copyright: str | None = None,
              artist: str | None = None) -> Credits:
        """Credits given by a user, trimmed: blank means "not given". Text with control or
        bidi characters, or too long for an output's EXIF, is refused (SettingsError naming
        the option): it would be stored as is, or cut, without the user knowing."""
        values = {"description": description, "copyright": copyright, "artist": artist}
        for name, value in values.items():
            bad = first_unsafe(value) if value is not None else None
            if bad is not None:
                raise SettingsError(
                    f"{name}: contains the control or bidi character U+{ord(bad):04X}; "
                    "give plain text on one line")
        credits = cls(**{name: (value.strip() or None) if value is not None else None
                         for name, value in values.items()})
        size = credits.size()
        if size > TEXT_CAPACITY:
            given = ", ".join(n for n, v in values.items() if v)
            raise SettingsError(
                f"{given}: {size:,} bytes of UTF-8 text, over the {TEXT_CAPACITY:,} bytes an "
                "output's EXIF holds (description, copyright and artist together)")
        return credits

    def size(self) -> int:
        """UTF-8 bytes of the texts together."""
        return sum(len(v.encode("utf-8")) for v in vars(self).values() if v is not None)

    def arguments(self) -> dict[str, str]:
        """The texts given, by name (for a queued job's JSON arguments)."""
        return {k: v for k, v in vars(self).items() if v is not None}

    def merged_over(self, base: Credits) -> Credits:
        """These values where given, else the base's; the base's text is trimmed so that the
        whole fits an output's EXIF (given text always fits: ``given`` checks it)."""
        room = TEXT_CAPACITY - self.size()
        kept: dict[str, str | None] = {}
        for item in fields(self):
            mine, theirs = getattr(self, item.name), getattr(base, item.name)
            if mine is None and theirs is not None:
                theirs = fit_utf8(theirs, room) or None
                room -= len(theirs.encode("utf-8")) if theirs else 0
                kept[item.name] = theirs
        return replace(self, **kept)
