"""Auto quality: each variant at the lowest quality whose SSIMULACRA2 score reaches the target,
checked on the files written (decoded) against the resized source's pixels."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy
import pytest
import pyvips
from PIL import Image

from imgwarm.cli.report import quality_lines
from imgwarm.config import Settings
from imgwarm.exceptions import LimitExceeded
from imgwarm.manifest import Manifest
from imgwarm.pipeline import gainmap
from imgwarm.pipeline.encode import Frame, encode
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.pipeline.probe import probe
from imgwarm.quality.ssimulacra2 import pixels, score
from imgwarm.samples import photo
from imgwarm.store import Stores
from tests.support.cli import Cli
from tests.support.quality import TARGET, TOLERANCE, auto, decoded, frame_for, source_file

pytestmark = pytest.mark.slow


def _check_band(source: Path, settings: Settings, manifest: Manifest) -> list[float]:
    """Every auto variant: its score, recomputed from the file, is the manifest's, reaches
    the target (unless at quality 100), and one quality step lower would not (or it is in
    the band)."""
    found = []
    for variant in manifest.variants:
        data = (settings.store.origin_root / variant.path).read_bytes()
        frame = frame_for(source, settings, manifest, variant)
        reference = pixels(frame.image)
        measured = score(reference, decoded(data))
        assert variant.quality is not None and variant.score is not None
        assert measured == pytest.approx(variant.score, abs=0.05)
        if variant.quality < 100:
            assert measured >= TARGET, (variant, measured)
        if measured > TARGET + TOLERANCE and variant.quality > 1:
            lower = encode(frame, variant.format, settings.image, None, variant.quality - 1,
                           full_chroma=variant.full_chroma)
            assert score(reference, decoded(lower)) < TARGET, (variant, measured)
        found.append(measured)
    return found


@pytest.mark.parametrize("name", ["Landscape_1.jpg", "kodim07.png", "33-type_error.jpg"])
def test_auto_lands_in_the_band_on_corpus_photos(corpus: Path, name: str,
                                                 settings: Settings) -> None:
    settings = auto(settings, widths="320,640,1024")
    manifest = optimize_file(corpus / name, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    scores = _check_band(corpus / name, settings, manifest)
    in_band = [s for s in scores if TARGET <= s <= TARGET + TOLERANCE]
    assert len(in_band) >= len(scores) // 2  # most land in the band; the rest as checked


def test_auto_on_hard_and_easy_images(settings: Settings, tmp_path: Path) -> None:
    settings = auto(settings, widths="320,600")
    stores = Stores.local(settings.store)
    rng = numpy.random.default_rng(3)
    noise = pyvips.Image.new_from_array(
        rng.integers(0, 256, (400, 600, 3), dtype=numpy.uint8), interpretation="srgb")
    smooth = photo(600, 400, seed=5).gaussblur(6)
    qualities = {}
    for name, image in (("hard.jpg", noise), ("easy.jpg", smooth)):
        source = source_file(tmp_path, name, image)
        manifest = optimize_file(source, settings=settings, stores=stores).manifest
        _check_band(source, settings, manifest)
        qualities[name] = [v.quality for v in manifest.variants if v.format == "webp"]
    # a hard picture needs more quality than an easy one for the same score
    assert min(qualities["hard.jpg"]) > max(qualities["easy.jpg"])  # type: ignore[type-var]


def test_a_fixed_quality_is_as_before(settings: Settings, tmp_path: Path) -> None:
    settings = settings.updated(widths="320", webp_quality=70, jpeg_quality=60)
    source = source_file(tmp_path, "a.jpg", photo(500, 300, seed=2))
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    for variant in manifest.variants:
        assert (variant.quality, variant.score) == (70 if variant.format == "webp" else 60,
                                                    None)
        frame = frame_for(source, settings, manifest, variant)
        data = (settings.store.origin_root / variant.path).read_bytes()
        # the same pixels as an encode at that number (EXIF aside)
        again = encode(frame, variant.format, settings.image, None)
        assert numpy.array_equal(decoded(data), decoded(again))


def test_auto_is_recorded_and_a_rerun_reuses_the_files(settings: Settings,
                                                       tmp_path: Path) -> None:
    settings = auto(settings, widths="320,640")
    stores = Stores.local(settings.store)
    source = source_file(tmp_path, "b.jpg", photo(800, 500, seed=4))
    first = optimize_file(source, settings=settings, stores=stores)
    stored = stores.manifests.get(first.manifest.key)
    assert stored is not None and all(v.score is not None for v in stored.variants)
    again = optimize_file(source, settings=settings, stores=stores)
    assert again.reused and again.manifest == first.manifest
    other = optimize_file(source, settings=settings.updated(quality_target=85.0),
                          stores=stores)
    assert not other.reused  # another target: other outputs
    assert all(v.score is not None and (v.score >= 85 or v.quality == 100)
               for v in other.manifest.variants)


def test_the_command_reports_quality(settings: Settings, tmp_path: Path) -> None:
    source = source_file(tmp_path, "c.jpg", photo(700, 450, seed=6))
    env = {"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root)}
    done = Cli()("optimize", source, "--webp-quality", "auto", "--jpeg-quality", "80",
                 "--widths", "320,640", "--report-quality", env=env)
    assert done.exit_code == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [(f, w) for f, w, *_ in lines] == [("webp", "320"), ("jpeg", "320"),
                                              ("webp", "640"), ("jpeg", "640")]
    assert all(q == "q80" and len(rest) == 0 for f, _, q, *rest in lines if f == "jpeg")
    assert all(rest[:2] == ["checked,", "score"] and float(rest[2]) > 0
               for f, _, _, *rest in lines if f == "webp")
    done = Cli()("optimize", source, "--webp-quality", "auto", "--widths", "320", "--json",
                 "--quality-target", "80", env=env)
    variants = json.loads(done.stdout)["variants"]
    assert all({"quality", "score"} <= v.keys() for v in variants)
    shown = Cli()("show", source, "--json", env=env)  # the manifest, as picture tags read it
    assert shown.exit_code == 0, shown.stderr
    recorded = {(v["format"], v["width"]): (v["quality"], v["score"])
                for v in json.loads(shown.stdout)["variants"]}
    assert all(recorded[(v["format"], v["width"])] == (v["quality"], v["score"])
               and (v["score"] >= 80 or v["quality"] == 100)
               for v in variants if v["format"] == "webp")
    done = Cli()("optimize", source, "--webp-quality", "best", env=env)
    assert done.exit_code == 2 and "a quality is 1..100, or auto" in done.stderr


def test_auto_avif_lands_in_the_band(corpus: Path, settings: Settings) -> None:
    settings = settings.updated(formats="avif", avif_quality="auto", avif_effort=2,
                                widths="320,480")
    source = corpus / "kodim03.png"
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    assert {v.format for v in manifest.variants} == {"avif"}
    scores = _check_band(source, settings, manifest)
    assert all(TARGET <= s <= TARGET + TOLERANCE for s in scores), scores


def test_the_search_is_counted_in_the_memory_budget(corpus: Path, settings: Settings) -> None:
    """An auto quality holds the metric's planes of the widest variant: a budget that fits a
    fixed quality's work can refuse the search, before decoding, saying so."""
    source = corpus / "Landscape_1.jpg"
    fixed = settings.updated(widths="1600", max_memory=256 << 20)
    made = optimize_file(source, settings=fixed, stores=Stores.local(fixed.store)).manifest
    assert [v.width for v in made.variants] == [1600, 1600]
    searched = auto(fixed)
    with pytest.raises(LimitExceeded, match=r"auto quality.*refused before decoding"):
        optimize_file(source, settings=searched, stores=Stores.local(searched.store))


def test_a_small_colourful_jpeg_gets_full_colour_below_90(corpus: Path,
                                                          settings: Settings) -> None:
    """At 320 px, a colourful photo's JPEG cannot reach the target with its colour at half
    resolution (libvips' rule below quality 90), and at 90 (full colour) it jumps past the
    band: the search then finds the lowest full-colour quality, in the band and smaller."""
    source = corpus / "kodim03.png"
    settings = auto(settings, widths="320", formats="jpeg")
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    [variant] = manifest.variants
    assert variant.full_chroma and variant.quality is not None and variant.quality < 90
    [found] = _check_band(source, settings, manifest)  # (the lower quality checked in 4:4:4)
    assert TARGET <= found <= TARGET + TOLERANCE
    frame = frame_for(source, settings, manifest, variant)
    reference = pixels(frame.image)
    halved = encode(frame, "jpeg", settings.image, None, 89)  # the best half-colour one
    at_90 = encode(frame, "jpeg", settings.image, None, 90)
    assert score(reference, decoded(halved)) < TARGET < TARGET + TOLERANCE < \
        score(reference, decoded(at_90))
    data = (settings.store.origin_root / variant.path).read_bytes()
    assert len(data) < len(at_90)
    with Image.open(io.BytesIO(data)) as picture:  # the file says its full colour
        assert all(layer[1:3] == (1, 1) for layer in picture.layer)  # 1x1 sampling: 4:4:4
    raw = manifest.model_dump()["variants"][0]
    assert raw["full_chroma"] is True
    [line] = quality_lines(manifest)  # what --report-quality prints
    assert f"q{variant.quality} 4:4:4 checked, score" in line


def test_an_ultra_hdr_jpeg_is_not_searched_in_full_colour(corpus: Path,
                                                          settings: Settings) -> None:
    """libvips writes a JPEG with a gain map at half-resolution colour below q90 whatever it
    is asked: an HDR variant is never recorded as full colour, and below q90 its file says
    half."""
    source = corpus / "ultra-hdr.jpg"
    settings = auto(settings, widths="160,240,320", formats="jpeg")
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    assert all(v.hdr for v in manifest.variants)
    for variant in manifest.variants:
        assert not variant.full_chroma
        frame = frame_for(source, settings, manifest, variant)
        info = probe(source.read_bytes(), source.name, settings.image)
        assert info.gainmap is not None
        prepared, _ = gainmap.prepare(info.gainmap, info.orientation)
        assert prepared is not None
        hdr = Frame(frame.image, gainmap.for_variant(
            info.gainmap, prepared, frame.image, info.displayed_width, info.displayed_height))
        asked = encode(hdr, "jpeg", settings.image, None, 85, full_chroma=True)
        with Image.open(io.BytesIO(asked)) as picture:  # why it is not searched again
            assert picture.layer[0][1:3] == (2, 2)  # 4:2:0, though full colour was asked
