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

from imgwarm.config import Settings
from imgwarm.exceptions import LimitExceeded
from imgwarm.manifest import Manifest, Variant
from imgwarm.pipeline.encode import Frame, encode
from imgwarm.pipeline.make import render_master
from imgwarm.pipeline.optimize import optimize_file
from imgwarm.pipeline.probe import probe
from imgwarm.pipeline.resize import fit
from imgwarm.pipeline.variants import height_for
from imgwarm.quality.ssimulacra2 import pixels, score
from imgwarm.samples import jpeg_with_exif, photo
from imgwarm.store import Stores
from tests.support.cli import Cli

pytestmark = pytest.mark.slow

TARGET, TOLERANCE = 75.0, 3.0


def _auto(settings: Settings, **options: object) -> Settings:
    return settings.updated(webp_quality="auto", jpeg_quality="auto", **options)


def _decoded(data: bytes) -> numpy.ndarray:
    return numpy.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _frame(source: Path, settings: Settings, manifest: Manifest, variant: Variant) -> Frame:
    """The resized source's pixels for a variant, as the pipeline makes them: the widest
    variant rendered from the source, resized to this one."""
    info = probe(source.read_bytes(), source.name, settings.image)
    widest = max(v.width for v in manifest.variants)
    master = render_master(info, widest, height_for(widest, info.displayed_width,
                                                    info.displayed_height), source.name)
    return Frame(fit(master, variant.width, variant.height).copy_memory())


def _check_band(source: Path, settings: Settings, manifest: Manifest) -> list[float]:
    """Every auto variant: its score, recomputed from the file, is the manifest's, reaches
    the target (unless at quality 100), and one quality step lower would not (or it is in
    the band)."""
    found = []
    for variant in manifest.variants:
        data = (settings.store.origin_root / variant.path).read_bytes()
        frame = _frame(source, settings, manifest, variant)
        reference = pixels(frame.image)
        measured = score(reference, _decoded(data))
        assert variant.quality is not None and variant.score is not None
        assert measured == pytest.approx(variant.score, abs=0.05)
        if variant.quality < 100:
            assert measured >= TARGET, (variant, measured)
        if measured > TARGET + TOLERANCE and variant.quality > 1:
            lower = encode(frame, variant.format, settings.image, None, variant.quality - 1)
            assert score(reference, _decoded(lower)) < TARGET, (variant, measured)
        found.append(measured)
    return found


def _source(folder: Path, name: str, image: pyvips.Image) -> Path:
    path = folder / name
    path.write_bytes(jpeg_with_exif(image, quality=95))
    return path


@pytest.mark.parametrize("name", ["Landscape_1.jpg", "kodim07.png", "33-type_error.jpg"])
def test_auto_lands_in_the_band_on_corpus_photos(corpus: Path, name: str,
                                                 settings: Settings) -> None:
    settings = _auto(settings, widths="320,640,1024")
    manifest = optimize_file(corpus / name, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    scores = _check_band(corpus / name, settings, manifest)
    in_band = [s for s in scores if TARGET <= s <= TARGET + TOLERANCE]
    assert len(in_band) >= len(scores) // 2  # most land in the band; the rest as checked


def test_auto_on_hard_and_easy_images(settings: Settings, tmp_path: Path) -> None:
    settings = _auto(settings, widths="320,600")
    stores = Stores.local(settings.store)
    rng = numpy.random.default_rng(3)
    noise = pyvips.Image.new_from_array(
        rng.integers(0, 256, (400, 600, 3), dtype=numpy.uint8), interpretation="srgb")
    smooth = photo(600, 400, seed=5).gaussblur(6)
    qualities = {}
    for name, image in (("hard.jpg", noise), ("easy.jpg", smooth)):
        source = _source(tmp_path, name, image)
        manifest = optimize_file(source, settings=settings, stores=stores).manifest
        _check_band(source, settings, manifest)
        qualities[name] = [v.quality for v in manifest.variants if v.format == "webp"]
    # a hard picture needs more quality than an easy one for the same score
    assert min(qualities["hard.jpg"]) > max(qualities["easy.jpg"])  # type: ignore[type-var]


def test_a_fixed_quality_is_as_before(settings: Settings, tmp_path: Path) -> None:
    settings = settings.updated(widths="320", webp_quality=70, jpeg_quality=60)
    source = _source(tmp_path, "a.jpg", photo(500, 300, seed=2))
    manifest = optimize_file(source, settings=settings,
                             stores=Stores.local(settings.store)).manifest
    for variant in manifest.variants:
        assert (variant.quality, variant.score) == (70 if variant.format == "webp" else 60,
                                                    None)
        frame = _frame(source, settings, manifest, variant)
        data = (settings.store.origin_root / variant.path).read_bytes()
        # the same pixels as an encode at that number (EXIF aside)
        again = encode(frame, variant.format, settings.image, None)
        assert numpy.array_equal(_decoded(data), _decoded(again))


def test_auto_is_recorded_and_a_rerun_reuses_the_files(settings: Settings,
                                                       tmp_path: Path) -> None:
    settings = _auto(settings, widths="320,640")
    stores = Stores.local(settings.store)
    source = _source(tmp_path, "b.jpg", photo(800, 500, seed=4))
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
    source = _source(tmp_path, "c.jpg", photo(700, 450, seed=6))
    env = {"IMGWARM_ORIGIN_ROOT": str(settings.store.origin_root),
           "IMGWARM_MANIFEST_ROOT": str(settings.store.manifest_root)}
    done = Cli()("optimize", source, "--webp-quality", "auto", "--jpeg-quality", "80",
                 "--widths", "320,640", "--report-quality", env=env)
    assert done.exit_code == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [(f, w) for f, w, *_ in lines] == [("webp", "320"), ("jpeg", "320"),
                                              ("webp", "640"), ("jpeg", "640")]
    assert all(q == "q80" and len(rest) == 0 for f, _, q, *rest in lines if f == "jpeg")
    assert all(rest[0] == "score" and float(rest[1]) > 0 for f, _, _, *rest in lines
               if f == "webp")
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
    auto = _auto(fixed)
    with pytest.raises(LimitExceeded, match=r"auto quality.*refused before decoding"):
        optimize_file(source, settings=auto, stores=Stores.local(auto.store))
