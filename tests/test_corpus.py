"""The real corpus (tests/corpus/, or IMGWARM_CORPUS), end to end through the CLI.

Expectations come from the files themselves, through independent readers: Pillow and
LittleCMS for pixels and colour, piexif for EXIF, SOURCES.md (when the folder has one) for
which files are meant to be bad. So the same tests run on any corpus of the same kinds.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import piexif
import pytest
import pyvips
from PIL import Image

from imgwarm.config import ImageSettings, load_settings
from imgwarm.exceptions import SourceError
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.pipeline.variants import fallback_at, plan_widths
from imgwarm.store import Stores
from tests.support.corpus import BAD, CASES, CORPUS, GOOD, NOTES, Case, Run, imgwarm
from tests.support.files import all_files
from tests.support.images import (
    mean_abs_diff,
    mean_delta_e,
    pillow_reference,
    without_scan_data,
)

MAX_MEAN_DELTA_E = 2.5
NAME = re.compile(r"(?:[a-z0-9-]+\.)?([0-9a-f]{16,64})\.(webp|jpg)")
TEXT_TAGS = {"description": piexif.ImageIFD.ImageDescription,
             "copyright": piexif.ImageIFD.Copyright, "artist": piexif.ImageIFD.Artist}


def test_corpus_is_there(corpus: Path) -> None:
    assert GOOD and BAD, "the corpus should hold both good and bad files"


def test_the_corpus_in_the_repository_states_each_licence_and_stays_small() -> None:
    """tests/corpus/ is committed: every file's licence is in its SOURCES.md (the table at
    the end), and the whole folder stays under 20 MB."""
    files = [p for p in CORPUS.iterdir() if p.is_file()]
    licences = (CORPUS / NOTES).read_text(encoding="utf-8").split("## Licences, file by file")
    assert len(licences) == 2, "SOURCES.md should end with its licence table"
    listed = set(re.findall(r"^\|\s*`([^`]+)`\s*\|\s*[^|\s]", licences[1], re.MULTILINE))
    assert {p.name for p in files if p.name != NOTES} == listed
    assert sum(p.stat().st_size for p in files) < 20_000_000


def test_exit_status_and_every_file_reported(corpus_run: Run) -> None:
    assert set(corpus_run.results) >= {c.path.name for c in CASES if c.path.suffix.lower() in
                                       {".jpg", ".jpeg", ".png"}}
    assert corpus_run.exit_code == (1 if BAD else 0), corpus_run.stderr


@pytest.mark.parametrize("case", BAD, ids=str)
def test_bad_file_is_refused_and_leaves_nothing(case: Case, corpus_run: Run,
                                                tmp_path: Path) -> None:
    result = corpus_run.results[case.path.name]
    assert result["ok"] is False
    message = result["error"]
    assert message.startswith(f"{case.path}: ") and "\n" not in message
    assert len(message) < 400
    # Alone, in-process: the same refusal, and not one file written.
    settings = load_settings(origin_root=tmp_path / "o", manifest_root=tmp_path / "m")
    with pytest.raises(SourceError) as refused:
        optimize_file(case.path, settings=settings, stores=Stores.local(settings.store))
    assert str(refused.value) == message
    assert all_files(tmp_path) == []
    data = case.path.read_bytes()
    if "max_pixels" in message and data.startswith(b"\xff\xd8") and b"\xff\xda" in data:
        # A bomb is refused on its header: the same refusal with none of the image data
        # (cut after its first scan header) shows that none of it was decoded.
        header = tmp_path / "header-only" / case.path.name
        header.parent.mkdir()
        header.write_bytes(without_scan_data(data))
        with pytest.raises(SourceError, match="max_pixels"):
            optimize_file(header, settings=settings, stores=Stores.local(settings.store))


def expected_credits(path: Path) -> dict[str, str | None]:
    try:
        ifd0 = piexif.load(str(path))["0th"]
    except Exception:
        ifd0 = {}
    out: dict[str, str | None] = {}
    for name, tag in TEXT_TAGS.items():
        raw = ifd0.get(tag)
        if not isinstance(raw, bytes):
            out[name] = None
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")  # what older cameras write
        # EXIF strings are NUL-terminated and often padded: padding is not text.
        out[name] = " ".join(text.replace("\x00", " ").split(" ")).strip() or None
    return out


def displayed_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as image:
        width, height = image.size
        orientation = image.getexif().get(0x0112, 1)
    return (height, width) if orientation in (5, 6, 7, 8) else (width, height)


@pytest.mark.parametrize("case", GOOD, ids=str)
def test_good_file_converts(case: Case, corpus_run: Run) -> None:
    result = corpus_run.results[case.path.name]
    assert result["ok"], result
    width, height = displayed_size(case.path)
    assert (result["width"], result["height"]) == (width, height)
    credits = expected_credits(case.path)
    assert result["description"] == credits["description"]
    assert result["copyright"] == credits["copyright"]
    image_settings = ImageSettings()
    planned = plan_widths(width, height, image_settings.widths, 16383)
    by_format = {f: sorted(v["width"] for v in result["variants"] if v["format"] == f)
                 for f in ("webp", "jpeg")}
    assert by_format["webp"] == planned  # every width, and the fallback at its own
    # (an Ultra HDR source's JPEG is what HDR screens take: at every width)
    ultra_hdr = pyvips.Image.new_from_file(str(case.path)).get("vips-loader") == "uhdrload"
    assert by_format["jpeg"] == (planned if ultra_hdr else
                                 sorted(fallback_at(planned, image_settings.fallback_widths)))
    assert {v["format"] for v in result["variants"]} == {"webp", "jpeg"}
    reference = pillow_reference(case.path.read_bytes())
    for variant in result["variants"]:
        path = corpus_run.origin / variant["path"]
        data = path.read_bytes()
        match = NAME.fullmatch(path.name)
        assert match, path.name
        assert hashlib.sha256(data).hexdigest().startswith(match.group(1))
        assert variant["bytes"] == len(data)
        image = pyvips.Image.new_from_buffer(data, "")
        assert (image.width, image.height) == (variant["width"], variant["height"])
        assert variant["height"] == max(1, round(height * variant["width"] / width))
        assert image.interpretation == "srgb"
        exif = piexif.load(data) if image.get_typeof("exif-data") else {"0th": {}, "GPS": {}}
        assert exif["0th"].get(piexif.ImageIFD.Orientation, 1) == 1
        assert not exif.get("GPS")
        assert piexif.ExifIFD.MakerNote not in exif.get("Exif", {})
        for name, tag in TEXT_TAGS.items():
            raw = exif["0th"].get(tag)
            assert (raw.decode("utf-8") if raw else None) == credits[name], name
        if variant["width"] == planned[-1]:
            # Small enough that compression noise on tiny sources averages out.
            compare = max(1, min(64, variant["width"] // 4))
            error = mean_delta_e(image, reference, compare)
            assert error < MAX_MEAN_DELTA_E, f"{variant['format']}: mean dE00 {error:.2f}"


def test_orientations_all_look_like_landscape_1(corpus: Path, corpus_run: Run) -> None:
    present = sorted(c.path.name for c in GOOD if re.fullmatch(r"Landscape_\d\.jpg", c.path.name))
    assert len(present) >= 2, "the corpus should hold the Landscape_N orientation set"
    pictures = {}
    for name in present:
        variants = corpus_run.results[name]["variants"]
        best = max((v for v in variants if v["format"] == "webp"), key=lambda v: v["width"])
        pictures[name] = pyvips.Image.new_from_file(str(corpus_run.origin / best["path"]))
    upright = pictures[present[0]]
    for name, picture in pictures.items():
        assert (picture.width, picture.height) == (upright.width, upright.height), name
        assert mean_abs_diff(picture, upright, 128) < 2.0, name
        assert mean_abs_diff(picture.fliphor(), upright, 128) > 10.0


def test_no_folder_over_255_entries_and_no_temp(corpus_run: Run) -> None:
    for folder in [corpus_run.workdir / "var", *(corpus_run.workdir / "var").rglob("*")]:
        if folder.is_dir():
            assert len(os.listdir(folder)) <= 255, folder
    assert not [p for p in corpus_run.origin.rglob(".*")]
    made = {v["path"] for r in corpus_run.results.values() if r["ok"] for v in r["variants"]}
    on_disk = {str(p.relative_to(corpus_run.origin)) for p in all_files(corpus_run.origin)}
    assert on_disk == made  # nothing from the refused files, nothing partial


def test_rerun_is_a_no_op(corpus: Path, corpus_run: Run) -> None:
    before = {p: p.stat().st_mtime_ns for p in all_files(corpus_run.workdir / "var")}
    again = imgwarm(corpus_run.workdir, "optimize", str(corpus))
    assert again.returncode == corpus_run.exit_code
    assert again.stdout.count("unchanged") == len(GOOD)
    assert {p: p.stat().st_mtime_ns for p in all_files(corpus_run.workdir / "var")} == before
