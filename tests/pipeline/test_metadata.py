"""EXIF: description, copyright and artist travel to every output; GPS does not."""

from __future__ import annotations

import io

import piexif
import pytest
import pyvips

from imgwarm.config import Settings
from imgwarm.exceptions import SettingsError
from imgwarm.manifest import Credits
from imgwarm.pipeline.metadata import clean_text
from imgwarm.pipeline.probe import probe
from tests.support.hostile import exif_text
from tests.support.images import photo
from tests.support.pipeline import run

UKRAINIAN = "Червоний велосипед на київській вулиці"
GPS = {
    piexif.GPSIFD.GPSLatitudeRef: b"N",
    piexif.GPSIFD.GPSLatitude: ((50, 1), (27, 1), (0, 1)),
    piexif.GPSIFD.GPSLongitudeRef: b"E",
    piexif.GPSIFD.GPSLongitude: ((30, 1), (31, 1), (0, 1)),
}


def source(ifd0: dict[int, object], gps: bool = False) -> bytes:
    data = bytes(photo(700, 500).jpegsave_buffer(Q=90, keep="none"))
    exif = {"0th": ifd0, "GPS": GPS if gps else {}}
    out = io.BytesIO()
    piexif.insert(piexif.dump(exif), data, out)
    return out.getvalue()


def exif_of(settings: Settings, path: str) -> dict[str, dict[int, object]]:
    return piexif.load(str(settings.store.origin_root / path))  # type: ignore[no-any-return]


def text(exif: dict[str, dict[int, object]], tag: int) -> str | None:
    raw = exif["0th"].get(tag)
    return raw.decode("utf-8") if isinstance(raw, bytes) else None


def test_utf8_description_round_trips_exactly(settings: Settings) -> None:
    data = source({piexif.ImageIFD.ImageDescription: UKRAINIAN.encode(),
                   piexif.ImageIFD.Copyright: "© Олена Коваль".encode(),
                   piexif.ImageIFD.Artist: b"Olena"})
    manifest = run(data, "bike.jpg", settings)
    assert manifest.description == UKRAINIAN
    assert len(manifest.variants) == 6
    for variant in manifest.variants:
        exif = exif_of(settings, variant.path)
        assert text(exif, piexif.ImageIFD.ImageDescription) == UKRAINIAN
        assert text(exif, piexif.ImageIFD.Copyright) == "© Олена Коваль"
        assert text(exif, piexif.ImageIFD.Artist) == "Olena"
        assert piexif.ImageIFD.Orientation not in exif["0th"]


def test_options_override_the_source(settings: Settings) -> None:
    data = source({piexif.ImageIFD.ImageDescription: b"camera text",
                   piexif.ImageIFD.Copyright: b"camera copyright"})
    manifest = run(data, "o.jpg", settings, Credits(description=UKRAINIAN, artist="Тарас"))
    assert (manifest.description, manifest.copyright, manifest.artist) == (
        UKRAINIAN, "camera copyright", "Тарас")
    for variant in manifest.variants:
        exif = exif_of(settings, variant.path)
        assert text(exif, piexif.ImageIFD.ImageDescription) == UKRAINIAN
        assert text(exif, piexif.ImageIFD.Copyright) == "camera copyright"
        assert text(exif, piexif.ImageIFD.Artist) == "Тарас"


def test_blank_and_nul_values_count_as_absent(settings: Settings) -> None:
    data = source({piexif.ImageIFD.ImageDescription: b" " * 31,
                   piexif.ImageIFD.Copyright: b"\x00" * 64,
                   piexif.ImageIFD.Artist: b"  Real Name \x00\x00"})
    manifest = run(data, "blank.jpg", settings)
    assert (manifest.description, manifest.copyright, manifest.artist) == (None, None,
                                                                         "Real Name")
    exif = exif_of(settings, manifest.variants[0].path)
    assert piexif.ImageIFD.ImageDescription not in exif["0th"]
    assert piexif.ImageIFD.Copyright not in exif["0th"]
    assert text(exif, piexif.ImageIFD.Artist) == "Real Name"


def test_gps_stripped_by_default_kept_on_request(settings: Settings) -> None:
    data = source({piexif.ImageIFD.ImageDescription: b"where"}, gps=True)
    assert piexif.load(data)["GPS"]
    manifest = run(data, "gps.jpg", settings)
    for variant in manifest.variants:
        assert not exif_of(settings, variant.path)["GPS"]
    keep = settings.updated(keep_gps=True)
    manifest = run(data, "gps.jpg", keep)
    for variant in manifest.variants:
        gps = exif_of(keep, variant.path)["GPS"]
        assert gps[piexif.GPSIFD.GPSLatitude] == ((50, 1), (27, 1), (0, 1))


def test_no_text_means_no_exif(settings: Settings) -> None:
    data = bytes(photo(100, 80).jpegsave_buffer(Q=90, keep="none"))
    manifest = run(data, "plain.jpg", settings)
    for variant in manifest.variants:
        image = pyvips.Image.new_from_file(str(settings.store.origin_root / variant.path))
        assert not image.get_typeof("exif-data")


def test_avif_carries_the_credits_exactly(settings: Settings) -> None:
    avif = settings.updated(formats=["avif", "webp", "jpeg"],
                            widths=[320])
    data = source({piexif.ImageIFD.ImageDescription: UKRAINIAN.encode(),
                   piexif.ImageIFD.Copyright: b"(c) 2026 Olena"})
    manifest = run(data, "a.jpg", avif)
    assert [v.format for v in manifest.variants] == ["avif", "webp", "jpeg"]
    variant = manifest.variants[0]
    image = pyvips.Image.new_from_file(str(avif.store.origin_root / variant.path))
    assert (image.width, image.height) == (320, 229)
    assert image.get("vips-loader") == "heifload"
    exif = piexif.load(bytes(image.get("exif-data")))
    assert exif["0th"][piexif.ImageIFD.ImageDescription].decode() == UKRAINIAN
    assert exif["0th"][piexif.ImageIFD.Copyright] == b"(c) 2026 Olena"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(b"  x  ", "x"), (b"\x00\x00", None), (b"", None), (None, None),
     ("Київ".encode(), "Київ"), (b"caf\xe9", "café"),
     # one stray byte in UTF-8 costs that byte alone (it used to turn the whole into Latin-1)
     ("Київ".encode() + b"\xff" + " вул.".encode(), "Київÿ вул."),
     (b"\x93quoted\x94", "\u201cquoted\u201d"),  # Windows-1252
     ("a\x1b[31mred\x07 \u202eevil\u202c\nline\tz".encode(), "a[31mred evil line z"),
     ("Zero\u200dwidth joiner stays".encode(), "Zero\u200dwidth joiner stays")],
)
def test_clean_text(raw: bytes | None, expected: str | None) -> None:
    assert clean_text(raw) == expected


def test_probe_does_not_need_exif(settings: Settings) -> None:
    plain = bytes(photo(10, 10).jpegsave_buffer(keep="none"))
    assert probe(plain, "n.jpg", settings.image).icc is None


def test_a_source_description_too_long_for_an_output_is_trimmed(settings: Settings) -> None:
    """The source's text fits its own EXIF, but not beside given text: trimmed at a character
    boundary, never an internal error."""
    long = ("Ж" * 32_730).encode()  # 65,460 bytes: about all one EXIF segment holds
    given = Credits.given(copyright="© Олена Коваль, 2026")
    manifest = run(exif_text(long), "long.jpg", settings, given)
    assert manifest.copyright == "© Олена Коваль, 2026"
    assert manifest.description is not None and set(manifest.description) == {"Ж"}
    assert 32_000 < len(manifest.description) < 32_730
    for variant in manifest.variants:
        exif = exif_of(settings, variant.path) if variant.format != "webp" else None
        if exif is not None:
            assert text(exif, piexif.ImageIFD.ImageDescription) == manifest.description
            assert text(exif, piexif.ImageIFD.Copyright) == "© Олена Коваль, 2026"


def test_given_text_too_long_to_fit_is_refused_naming_the_option() -> None:
    with pytest.raises(SettingsError, match=r"^description: 100,000 bytes .* over the 65,474"):
        Credits.given(description="d" * 100_000)
    with pytest.raises(SettingsError, match=r"^description, copyright: .* together"):
        Credits.given(description="d" * 40_000, copyright="c" * 30_000)
    assert Credits.given(description="d" * 65_474).description == "d" * 65_474


@pytest.mark.parametrize("bad", ["\x1b[2J", "bell\x07", "\u202eevil", "two\nlines", "nul\x00",
                                 "odd\udcff byte"])
def test_given_text_with_control_characters_is_refused(bad: str) -> None:
    with pytest.raises(SettingsError, match=r"^artist: contains the control or bidi"):
        Credits.given(artist=bad)


def test_source_text_with_control_characters_is_cleaned(settings: Settings) -> None:
    raw = "Red\x1b]0;pwned\x07 bike \u202eekib".encode()
    manifest = run(exif_text(raw), "ctl.jpg", settings)
    assert manifest.description == "Red]0;pwned bike ekib"


def test_maker_notes_that_do_not_fit_beside_the_text_are_left_out_with_a_warning(
    settings: Settings,
) -> None:
    keep = settings.updated(keep_maker_notes=True, widths=[320])
    data = source({piexif.ImageIFD.Artist: b"A"},)
    exif = {"0th": {piexif.ImageIFD.Artist: b"A"},
            "Exif": {piexif.ExifIFD.MakerNote: b"m" * 40_000}}
    out = io.BytesIO()
    piexif.insert(piexif.dump(exif), bytes(photo(400, 300).jpegsave_buffer(keep="none")), out)
    manifest = run(out.getvalue(), "notes.jpg", keep, Credits.given(description="d" * 40_000))
    assert manifest.description == "d" * 40_000 and manifest.artist == "A"
    assert manifest.warnings == [
        "the source's maker notes left out: no room beside the text in EXIF"]
    assert data  # the plain helper still works


def test_the_text_capacity_is_what_piexif_leaves_in_one_segment() -> None:
    from imgwarm.manifest import TEXT_CAPACITY
    from imgwarm.pipeline.metadata import MAX_EXIF

    tags = (piexif.ImageIFD.ImageDescription, piexif.ImageIFD.Copyright, piexif.ImageIFD.Artist)
    structure = len(piexif.dump({"0th": {tag: b"abcde" for tag in tags}})) - 15
    assert MAX_EXIF - structure == TEXT_CAPACITY


def test_credits_made_directly_are_trimmed_to_fit() -> None:
    from imgwarm.pipeline.metadata import MAX_EXIF, build_exif

    data, notes = build_exif(Credits(description="Ж" * 40_000, artist="a" * 10_000), None,
                             keep_gps=False, keep_maker_notes=False)
    assert data is not None and len(data) <= MAX_EXIF and notes == []
