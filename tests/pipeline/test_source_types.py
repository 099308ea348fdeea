"""One registry of source formats (formats.SOURCE_TYPES): sniff recognises each entry by its
signature or brands, probe reads each with the entry's loader and reader, and what a format
can do (animation here) is asked of its entry when a source is probed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import pyvips

from imgwarm.config import Settings
from imgwarm.exceptions import UnsupportedFormat
from imgwarm.formats import SOURCE_SUFFIXES, SOURCE_TYPES, SOURCES, SourceFormat
from imgwarm.pipeline import decode as decoding
from imgwarm.pipeline import probe as probing
from imgwarm.pipeline import sniff
from tests.support.corpus import corpus_dir

CORPUS = corpus_dir()
FORMATS = Path(__file__).resolve().parent.parent / "formats"  # libheif's (its SOURCES.md)


def _photo() -> pyvips.Image:
    return pyvips.Image.new_from_file(str(CORPUS / "kodim03.png")).resize(0.25)


def sample(fmt: SourceFormat) -> bytes:
    """A real file of each source format: from the corpus, or written by libvips."""
    found = {"jpeg": CORPUS / "Landscape_1.jpg", "png": CORPUS / "kodim03.png",
             "heif": FORMATS / "rainbow-451x461.heic"}.get(fmt)
    if found is not None:
        return found.read_bytes()
    photo = _photo()
    if fmt == "avif":
        return bytes(photo.heifsave_buffer(compression="av1"))
    return bytes({"webp": photo.webpsave_buffer, "tiff": photo.tiffsave_buffer,
                  "gif": photo.gifsave_buffer}[fmt]())


@pytest.mark.parametrize("fmt", SOURCES)
def test_each_entry_is_sniffed_and_probed_as_its_registry_says(fmt: SourceFormat) -> None:
    kind = SOURCE_TYPES[fmt]
    data = sample(fmt)
    assert sniff.sniff(data) == kind.title
    found = probing.probe(data, f"photo{kind.suffixes[0]}", Settings().image)
    assert found.format == fmt and found.width > 0
    assert probing.loader(fmt)(data).get("vips-loader") == kind.loader  # (who read it)
    assert all(SOURCE_SUFFIXES[suffix] == fmt for suffix in kind.suffixes)


def test_sniff_and_probe_hold_no_table_of_their_own() -> None:
    """Every name and signature of a source format in sniff comes from the registry, and
    probe's own readers and decode's own decoders are for registered formats."""
    assert {k.name: k.title for k in SOURCE_TYPES.values()} == sniff.NAMES
    listed = {(offset, signature) for offset, signature, _ in sniff._SIGNATURES}
    for kind in SOURCE_TYPES.values():
        assert kind.brands or set(kind.signatures) <= listed, kind.name
    assert set(probing.READERS) <= set(SOURCE_TYPES)
    assert set(decoding.DECODERS) <= set(SOURCE_TYPES)


def _animated_gif() -> bytes:
    frames = pyvips.Image.black(24, 48, bands=3).draw_rect([255, 0, 0], 0, 24, 24, 24,
                                                           fill=True).copy()
    frames.set_type(pyvips.GValue.gint_type, "page-height", 24)
    return bytes(frames.gifsave_buffer())


def test_what_a_format_can_do_is_asked_of_its_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _animated_gif()
    with pytest.raises(UnsupportedFormat, match=r"an animated GIF \(2 frames\)"):
        probing.probe(data, "moving.gif", Settings().image)
    # the entry says GIF holds no animation: its first frame is then taken as a still
    monkeypatch.setitem(SOURCE_TYPES, "gif", replace(SOURCE_TYPES["gif"], animation=False))
    still = probing.probe(data, "moving.gif", Settings().image)
    assert (still.format, still.width, still.height) == ("gif", 24, 24)
