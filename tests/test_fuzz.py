"""The fuzzer, on every run: a few hundred mutated JPEGs through the real command, on the
full-size and the shrink-on-load paths; every invariant in tests/fuzzing.py must hold.
``bench/fuzz.py`` runs thousands."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.corpus import corpus_dir
from tests.support.fuzzing import (
    MUTATIONS,
    Report,
    check,
    corpus_seeds,
    make_cases,
    synthetic_seeds,
)

pytestmark = pytest.mark.slow

CASES = int(os.environ.get("IMGWARM_FUZZ_CASES", "300"))


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
