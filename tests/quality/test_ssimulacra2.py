"""SSIMULACRA2 as imgwarm computes it, against the ``ssimulacra2`` package (the published
metric in numpy and scipy) on corpus photos and synthetic images, on decoded pixels."""

from __future__ import annotations

import io
from pathlib import Path

import numpy
import pytest
import pyvips
from PIL import Image

from imgwarm.quality.ssimulacra2 import Reference, pixels, score
from imgwarm.samples import photo

pytestmark = pytest.mark.slow

reference = pytest.importorskip("ssimulacra2")  # ./test.sh installs it (test extra)

PHOTOS = ["Landscape_1.jpg", "kodim03.png", "kodim07.png", "pyvips_sample.jpg", "cat.jpg",
          "33-type_error.jpg", "canon_hdr_YES.jpg", "concert.jpg"]


def _encoded(image: pyvips.Image, fmt: str, quality: int) -> bytes:
    out = io.BytesIO()
    picture = Image.fromarray(pixels(image))
    picture.save(out, "WEBP" if fmt == "webp" else "JPEG", quality=quality)
    return out.getvalue()


def _reference(original: numpy.ndarray, distorted: numpy.ndarray, folder: Path) -> float:
    Image.fromarray(original).save(folder / "o.png")
    Image.fromarray(distorted).save(folder / "d.png")
    return float(reference.compute_ssimulacra2(str(folder / "o.png"), str(folder / "d.png")))


def _decoded(data: bytes) -> numpy.ndarray:
    return numpy.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize("name", PHOTOS)
def test_scores_match_the_reference_on_corpus_photos(corpus: Path, name: str,
                                                     tmp_path: Path) -> None:
    image = pyvips.Image.thumbnail(str(corpus / name), 480).copy_memory()
    original = pixels(image)
    for fmt, quality in (("jpeg", 25), ("jpeg", 85), ("webp", 50), ("webp", 95)):
        distorted = _decoded(_encoded(image, fmt, quality))
        ours, theirs = score(original, distorted), _reference(original, distorted, tmp_path)
        assert abs(ours - theirs) <= 0.5, (name, fmt, quality, ours, theirs)


def test_scores_match_on_hard_easy_odd_and_tiny_images(tmp_path: Path) -> None:
    rng = numpy.random.default_rng(7)
    noise = rng.integers(0, 256, (97, 131, 3), dtype=numpy.uint8)  # hard: odd sizes too
    flat = numpy.full((64, 80, 3), (200, 120, 40), dtype=numpy.uint8)  # easy
    tiny = rng.integers(0, 256, (9, 12, 3), dtype=numpy.uint8)  # one scale only
    smooth = pixels(photo(300, 200, seed=3))
    # 2, 3 and 5 scales: which weights count moves with how many scales there are (the
    # SSIM maps left out where they weigh nothing must be the ones that do not)
    fewer = [pixels(photo(width, height, seed=width)) for width, height in
             ((30, 20), (50, 40), (200, 130))]
    for original in (noise, flat, tiny, smooth, *fewer):
        image = pyvips.Image.new_from_array(original, interpretation="srgb")
        for fmt, quality in (("jpeg", 40), ("webp", 80)):
            distorted = _decoded(_encoded(image, fmt, quality))
            ours = score(original, distorted)
            assert abs(ours - _reference(original, distorted, tmp_path)) <= 0.5


def test_the_scale_runs_from_identical_down() -> None:
    original = pixels(photo(400, 300, seed=1))
    image = pyvips.Image.new_from_array(original, interpretation="srgb")
    assert score(original, original) == pytest.approx(100.0)
    found = [score(original, _decoded(_encoded(image, "jpeg", q))) for q in (95, 75, 40, 10)]
    assert found == sorted(found, reverse=True) and found[0] > 85 and found[-1] < 40


def test_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="sizes must agree"):
        score(numpy.zeros((10, 10, 3), numpy.uint8), numpy.zeros((10, 12, 3), numpy.uint8))
    with pytest.raises(ValueError, match="uint8"):
        score(numpy.zeros((10, 10), numpy.uint8), numpy.zeros((10, 10), numpy.uint8))
    rgba = numpy.zeros((10, 10, 4), numpy.uint8)
    assert score(rgba, rgba) == pytest.approx(100.0)  # alpha flattened, then compared


def test_a_prepared_reference_scores_many_distortions_as_the_reference(
        corpus: Path, tmp_path: Path) -> None:
    image = pyvips.Image.thumbnail(str(corpus / "kodim07.png"), 360).copy_memory()
    original = pixels(image)
    prepared = Reference(image)
    for fmt, quality in (("webp", 30), ("jpeg", 90), ("webp", 30), ("jpeg", 5)):
        distorted = _decoded(_encoded(image, fmt, quality))
        # the kept planes are not changed by a score: the same answer each time, and the
        # package's
        assert prepared.score(distorted) == score(original, distorted)
        assert abs(prepared.score(distorted) - _reference(original, distorted, tmp_path)) <= 0.5
    with pytest.raises(ValueError, match="sizes must agree"):
        prepared.score(original[:-1])
