"""EXIF: description, copyright and artist travel to every output; GPS does not."""

from __future__ import annotations

import io

import piexif
import pytest
import pyvips

from imgwarm.config import Settings, load_settings
from imgwarm.pipeline.metadata import Credits, clean_text
from imgwarm.pipeline.probe import probe
from tests.images import photo
from tests.pipeline.helpers import run

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
    return piexif.load(str(settings.origin_root / path))  # type: ignore[no-any-return]


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
    keep = load_settings(**{**settings.model_dump(), "keep_gps": True})
    manifest = run(data, "gps.jpg", keep)
    for variant in manifest.variants:
        gps = exif_of(keep, variant.path)["GPS"]
        assert gps[piexif.GPSIFD.GPSLatitude] == ((50, 1), (27, 1), (0, 1))


def test_no_text_means_no_exif(settings: Settings) -> None:
    data = bytes(photo(100, 80).jpegsave_buffer(Q=90, keep="none"))
    manifest = run(data, "plain.jpg", settings)
    for variant in manifest.variants:
        image = pyvips.Image.new_from_file(str(settings.origin_root / variant.path))
        assert not image.get_typeof("exif-data")


def test_avif_carries_the_credits_exactly(settings: Settings) -> None:
    avif = load_settings(**{**settings.model_dump(), "formats": ["avif", "webp", "jpeg"],
                            "widths": [320]})
    data = source({piexif.ImageIFD.ImageDescription: UKRAINIAN.encode(),
                   piexif.ImageIFD.Copyright: b"(c) 2026 Olena"})
    manifest = run(data, "a.jpg", avif)
    assert [v.format for v in manifest.variants] == ["avif", "webp", "jpeg"]
    variant = manifest.variants[0]
    image = pyvips.Image.new_from_file(str(avif.origin_root / variant.path))
    assert (image.width, image.height) == (320, 229)
    assert image.get("vips-loader") == "heifload"
    exif = piexif.load(bytes(image.get("exif-data")))
    assert exif["0th"][piexif.ImageIFD.ImageDescription].decode() == UKRAINIAN
    assert exif["0th"][piexif.ImageIFD.Copyright] == b"(c) 2026 Olena"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(b"  x  ", "x"), (b"\x00\x00", None), (b"", None), (None, None),
     ("Київ".encode(), "Київ"), (b"caf\xe9", "café")],
)
def test_clean_text(raw: bytes | None, expected: str | None) -> None:
    assert clean_text(raw) == expected


def test_probe_does_not_need_exif(settings: Settings) -> None:
    assert probe(bytes(photo(10, 10).jpegsave_buffer(keep="none")), "n.jpg", settings).icc is None
