"""EXIF read safely: hostile entry counts cost a small multiple of the block, not gigabytes."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import piexif
import pytest

from imgwarm.config import Settings
from imgwarm.pipeline.exif import bounded, read_exif
from imgwarm.pipeline.jpeg import read_header
from tests.support.hostile import (
    exif_count_bomb,
    exif_overlap_bomb,
    exif_pointer_bomb,
    exif_text,
    exif_text_of_type,
    ifd_end,
    plain_jpeg,
    tiff,
    with_exif,
)
from tests.support.pipeline import run


def peak_bytes(work: object) -> int:
    """Peak Python allocation while ``work()`` runs (piexif allocates in Python)."""
    tracemalloc.start()
    try:
        work()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("count", [1 << 24, 1 << 27, (1 << 32) - 1])
@pytest.mark.parametrize("kind", [1, 3, 4, 5, 7, 12], ids=["BYTE", "SHORT", "LONG", "RATIONAL",
                                                          "UNDEFINED", "DOUBLE"])
def test_a_huge_count_costs_nothing(count: int, kind: int) -> None:
    block = read_header(exif_count_bomb(count, kind)).exif
    assert block is not None and not bounded(block)
    assert peak_bytes(lambda: read_exif(block)) < 50 * len(block) + 64 * 1024


@pytest.mark.parametrize("pointer_type", [1, 3, 4, 6, 8, 9])
def test_an_ifd_pointer_of_any_integer_type_is_followed_and_checked(pointer_type: int) -> None:
    block = read_header(exif_pointer_bomb(pointer_type, count=1 << 24)).exif
    assert block is not None and len(block) == 44 and not bounded(block)
    assert peak_bytes(lambda: read_exif(block)) < 64 * 1024


@pytest.mark.parametrize("kind", [3, 4, 5, 8, 9, 10])
def test_text_tags_of_another_type_read_as_absent(settings: Settings, kind: int) -> None:
    manifest = run(exif_text_of_type(kind), "typed.jpg", settings)
    assert (manifest.description, manifest.artist) == (None, None)


def test_overlapping_entries_are_not_read_again_and_again() -> None:
    block = read_header(exif_overlap_bomb()).exif
    assert block is not None and len(block) < 65536
    unguarded = peak_bytes(lambda: piexif.load(block))  # what piexif alone would take
    guarded = peak_bytes(lambda: read_exif(block))
    assert unguarded > 50 * len(block)  # the bomb is real
    assert guarded < 2 * len(block) + 64 * 1024


def test_a_bombed_file_is_made_without_its_exif(settings: Settings) -> None:
    manifest = run(exif_count_bomb(), "bomb.jpg", settings)
    assert manifest.description is None and manifest.variants


@pytest.mark.parametrize(
    "block",
    [
        tiff([(0x010E, 2, 6, b"\xff\xff\xff\x7f")]),  # value offset past the end
        tiff([(0x8769, 4, 1, b"\xff\xff\x00\x00")]),  # Exif IFD pointer past the end
        tiff([(0x8769, 4, 1, b"\x08\x00\x00\x00")]),  # Exif IFD is IFD0 itself
        tiff([], next_ifd=0xFFFFFF),  # next IFD past the end
        b"II*\x00" + b"\xff\xff\xff\x00",  # IFD0 past the end
        b"MM\x00*\x00\x00\x00\x08\xff\xff",  # 65535 entries declared, none there
        b"XX",
    ],
    ids=["value-offset", "exif-pointer", "exif-loop", "next-ifd", "ifd0", "entry-count", "junk"],
)
def test_damaged_blocks_read_as_no_exif_or_what_fits(settings: Settings, block: bytes) -> None:
    assert peak_bytes(lambda: read_exif(block)) < 1 << 20
    manifest = run(with_exif(plain_jpeg(), block), "damaged.jpg", settings)
    assert manifest.variants


def test_a_camera_block_is_read_whole() -> None:
    start = ifd_end(2)
    block = tiff([(0x010E, 2, 6, start.to_bytes(4, "little")),
                  (0x8298, 2, 4, b"(c)\x00")], tail=b"Bike.\x00")
    assert bounded(block)
    exif = read_exif(block)
    assert exif is not None and exif["0th"][0x010E] == b"Bike." and exif["0th"][0x8298] == b"(c)"


def test_every_exif_in_the_corpus_is_read_as_piexif_reads_it(corpus: Path) -> None:
    read = 0
    for path in sorted(corpus.glob("*.jpg")):
        header = read_header(path.read_bytes())
        if header.exif is None:
            continue
        try:
            expected = piexif.load(header.exif)
        except Exception:
            continue
        assert read_exif(header.exif) == expected, path.name
        read += 1
    assert read >= 10


def test_description_in_exif_text_helper(settings: Settings) -> None:
    manifest = run(exif_text("Київ".encode()), "kyiv.jpg", settings)
    assert manifest.description == "Київ"
