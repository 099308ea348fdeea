"""The quality search on score curves of known shape (smooth, flat for a stretch, jumping
past the band): the real metric on real pixels, distorted by an amount the quality sets."""

from __future__ import annotations

from collections.abc import Callable

import numpy
import pytest

from imgwarm.quality.search import lowest_quality
from imgwarm.quality.ssimulacra2 import Reference, pixels
from imgwarm.samples import photo

TARGET, TOLERANCE = 75.0, 3.0
ORIGINAL = pixels(photo(160, 120, seed=9))
NOISE = numpy.random.default_rng(1).standard_normal(ORIGINAL.shape)


def _distorted(amount: float) -> numpy.ndarray:
    return numpy.clip(ORIGINAL + NOISE * amount, 0, 255).astype(numpy.uint8)


AMOUNTS = numpy.linspace(0, 40, 161)
SCORES = [Reference(ORIGINAL).score(_distorted(a)) for a in AMOUNTS]  # falling with amount


def _scoring(wanted: float) -> numpy.ndarray:
    """Pixels that score about ``wanted``."""
    return _distorted(float(numpy.interp(wanted, SCORES[::-1], AMOUNTS[::-1])))


def _smooth(q: int) -> float:  # 0.7 a step: reaches 75 at 79
    return 20 + 0.7 * q


def _plateau(q: int) -> float:  # 80 from 40 to 85 (above the band), 75 reached at 34
    return 44.5 + 0.9 * q if q < 40 else 80 if q <= 85 else 80 + 0.5 * (q - 85)


def _jump(q: int) -> float:  # a step at 90 leaps over the band: 71 at 89, 85 at 90
    return 40 + 0.35 * q if q < 90 else 85 + 0.1 * (q - 90)


@pytest.mark.parametrize("curve", [_smooth, _plateau, _jump])
@pytest.mark.parametrize("hint", [None, 10, 99])
def test_the_search_finds_the_lowest_quality_that_reaches_the_target(
        curve: Callable[[int], float], hint: int | None) -> None:
    reference = Reference(ORIGINAL)
    scores = {q: reference.score(_scoring(curve(q))) for q in range(1, 101)}
    reaching = [q for q in scores if scores[q] >= TARGET]
    assert reaching, "the curve must reach the target somewhere"
    in_band = [q for q in reaching if scores[q] <= TARGET + TOLERANCE]
    chosen = lowest_quality(lambda q: bytes([q]), lambda data: _scoring(curve(data[0])),
                            reference, target=TARGET, tolerance=TOLERANCE, hint=hint)
    assert chosen.data == bytes([chosen.quality])
    assert chosen.score == pytest.approx(scores[chosen.quality])
    assert (curve is _jump) == (not in_band)  # the curves are as drawn
    if in_band:
        assert chosen.quality in in_band
    else:  # nothing in the band: the lowest quality that reaches the target
        assert chosen.quality == min(reaching)
    assert chosen.tries <= 9  # a search, not a scan of 100 qualities


def test_a_target_nothing_reaches_takes_100() -> None:
    reference = Reference(ORIGINAL)
    chosen = lowest_quality(lambda q: bytes([q]), lambda data: _scoring(60.0), reference,
                            target=TARGET, tolerance=TOLERANCE)
    assert chosen.quality == 100 and chosen.score < TARGET
