"""The fuzzer, on every run: a few hundred mutated JPEGs through the real command, on the
full-size and the shrink-on-load paths; mutated files of every other source format (the table
of tests/support/fuzz_formats.py); mutated Ultra HDR JPEGs (tests/support/fuzz_gainmap.py).
Every invariant of tests/support/fuzzing.py must hold. ``bench/fuzz.py`` runs thousands."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import fuzz_gainmap
from tests.support.corpus import corpus_dir
from tests.support.fuzz_formats import FORMATS, OTHERS
from tests.support.fuzzing import (
    MUTATIONS,
    Report,
    check,
    corpus_seeds,
    format_cases,
    make_cases,
    synthetic_seeds,
)

pytestmark = pytest.mark.slow

CASES = int(os.environ.get("IMGWARM_FUZZ_CASES", "300"))
# Per other source format: 250 meets every mutation of its table at least 20 times.
FORMAT_CASES = int(os.environ.get("IMGWARM_FUZZ_FORMAT_CASES", "250"))
GAINMAP_CASES = int(os.environ.get("IMGWARM_FUZZ_GAINMAP_CASES", "132"))


@pytest.fixture(scope="module")
def seeds() -> dict[str, bytes]:
    from_corpus = corpus_seeds(corpus_dir())
    assert from_corpus, "no corpus JPEG is small and whole enough to be a seed"
    return synthetic_seeds() | from_corpus


@pytest.mark.parametrize("widths", [None, "64,120"], ids=["full-size", "shrink-on-load"])
def test_no_mutation_breaks_an_invariant(seeds: dict[str, bytes], tmp_path: Path,
                                         widths: str | None) -> None:
    cases = make_cases(seeds, CASES)
    report: Report = check(tmp_path, seeds, cases, widths)
    assert report.findings == [], "\n".join(report.findings[:20])
    assert report.exit_code == 1  # some cases are refused, and the batch goes on
    assert report.accepted + report.refused == len(cases)
    # The run exercised what it is meant to: every mutation, both verdicts, and comparisons
    # of accepted cases that strict decoding refuses.
    assert {c.kind for c in cases} == set(MUTATIONS)
    assert report.accepted > CASES // 5 and report.refused > CASES // 5
    assert report.strict_refused_accepted > 10


@pytest.mark.parametrize("format_name", OTHERS)
def test_no_mutation_of_another_format_breaks_an_invariant(format_name: str,
                                                           tmp_path: Path) -> None:
    """The same invariants for PNG, WebP, AVIF, HEIC, TIFF and GIF: a file its strict
    decoder refuses is never published unless it shows its seed's picture."""
    fmt = FORMATS[format_name]
    seeds = fmt.seeds()
    cases = format_cases(format_name, FORMAT_CASES)
    report = check(tmp_path, seeds, cases)
    assert report.findings == [], "\n".join(report.findings[:20])
    assert report.accepted + report.refused == len(cases)
    assert {c.kind for c in cases} == set(fmt.mutations)
    if fmt.decodable:  # both verdicts met (a format this build cannot decode: refusals only)
        assert report.accepted > 0 and report.refused > 0


def test_no_mutation_of_a_gain_map_breaks_an_invariant(tmp_path: Path) -> None:
    """Ultra HDR JPEGs with their gain map or its metadata damaged: never refused for it,
    HDR only with a gain map that decodes strictly, the SDR picture the seed's."""
    seeds = fuzz_gainmap.seeds()
    cases = fuzz_gainmap.make_cases(seeds, GAINMAP_CASES, heavy_every=3)
    report = fuzz_gainmap.check(tmp_path, seeds, cases)
    assert report.findings == [], "\n".join(report.findings[:20])
    assert report.accepted + report.refused == len(cases)
    assert {c.kind for c in cases} == set(fuzz_gainmap.MUTATIONS)
    assert {c.seed for c in cases} == set(seeds)
    assert report.hdr > 0 and report.made_sdr_warned > 0  # both outcomes met
