"""The ranking: decay, the prior of new uploads, density by pages, the greedy choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.cache.index import Index
from imgwarm.cache.rank import (
    AGE_FLOOR,
    SHARE_PRIOR,
    YOUNG_FOR,
    Decay,
    choose,
    class_weights,
    density,
    estimate,
    measure_shares,
    pages,
    width_class,
)
from imgwarm.manifest import Variant


def test_density_is_value_per_page() -> None:
    assert pages(1) == pages(4096) == 4096 and pages(4097) == 8192
    assert density(3, 1, 100) == density(3, 1, 4000) == 4 / 4096
    assert density(3, 1, 5000) == 4 / 8192


def _index(tmp_path: Path, sizes: dict[str, int]) -> Index:
    index = Index(tmp_path / "index.sqlite")
    index.set_source("k", [Variant(format="webp", width=320, height=200, bytes=size, path=p)
                           for p, size in sizes.items()], prior=0.0)
    return index


def test_the_prior_is_a_busy_variant_s_score(tmp_path: Path) -> None:
    index = _index(tmp_path, {f"v{i}.webp": 1000 for i in range(1, 101)})
    assert index.prior(now_weight=2.0) == 2.0  # no traffic yet: one request now
    index.add_scores({f"v{i}.webp": float(i) for i in range(1, 101)})
    assert index.prior(now_weight=2.0) == 91.0  # the 90th percentile


@pytest.mark.parametrize("seed", range(6))
def test_the_percentile_found_from_the_last_is_the_one_counted_afresh(tmp_path: Path,
                                                                      seed: int) -> None:
    """score_percentile walks from the last percentile it found (issue 41); it is always the
    one a count over every scored variant finds, as scores move, ties form, sources go and
    every score is rescaled."""
    import random

    rnd = random.Random(seed)
    index = _index(tmp_path, {f"v{i}.webp": 1000 for i in range(200)})
    for s in range(20):
        index.set_source(f"s{s}", [Variant(format="webp", width=320, height=200, bytes=900,
                                           path=f"s{s}-{w}.webp") for w in range(3)], 0.0)
    paths = [p for (p,) in index.db.execute("SELECT path FROM variants")]
    for run in range(40):
        index.add_scores({p: float(rnd.choice([0.5, 1, 1, 2, 7, 40, rnd.random()]))
                          for p in rnd.sample(paths, rnd.randint(1, 30))})
        if rnd.random() < 0.2:
            index.set_source(f"s{rnd.randrange(20)}", [], 0.0)
        if rnd.random() < 0.1:
            index.rescale(rnd.choice([0.5, 0.25]))
        fraction = rnd.choice([0.9, 0.9, 0.5, 0.0, 0.99])
        scored = [s for (s,) in index.db.execute(
            "SELECT score FROM variants WHERE score > 0 AND refs > 0 ORDER BY score")]
        expected = scored[min(len(scored) - 1, int(len(scored) * fraction))] if scored else None
        assert index.score_percentile(fraction) == expected, f"run {run}"
    index.close(keep=False)


def test_choose_is_greedy_by_density_within_the_budget(tmp_path: Path) -> None:
    sizes = {"big-hot": 40_000, "small-hot": 4_000, "pinned": 8_000, "cold": 4_000,
             "small-warm": 4_000}
    index = _index(tmp_path, sizes)
    densities = {"big-hot": 0.9, "small-hot": 0.8, "small-warm": 0.5}
    index.add_scores({p: d * pages(sizes[p]) for p, d in densities.items()})
    index.set_pinned({"pinned"})
    items = list(index.ranked(1 << 30))  # the order the index gives: pinned, then densest
    assert [c.path for c in items][:2] == ["pinned", "big-hot"]
    chosen = [c.path for c in choose(items, 20_000)]
    assert chosen == ["pinned", "small-hot", "small-warm"]  # big-hot does not fit: passed over
    assert "cold" not in [c.path for c in choose(items, 10**9)]  # nothing of value: no room


def test_decay_rebases_before_floats_overflow() -> None:
    decay = Decay(0.0, 3600.0)
    assert not decay.due_for_rebase(3600.0 * 200)
    assert decay.due_for_rebase(3600.0 * 300)


def test_the_index_keeps_the_density_rank_defines(tmp_path: Path) -> None:
    index = Index(tmp_path / "index.sqlite")
    sizes = {"a.webp": 1, "b.webp": 4096, "c.webp": 4097, "d.webp": 123_456}
    index.set_source("k", [Variant(format="webp", width=320, height=200, bytes=size, path=p)
                           for p, size in sizes.items()], prior=3)  # an int prior, too
    index.add_scores({"b.webp": 2.5, "d.webp": 7})
    found = dict(index.db.execute("SELECT path, density FROM variants"))
    scores = {"b.webp": 2.5, "d.webp": 7}
    for path, size in sizes.items():
        assert found[path] == pytest.approx(density(scores.get(path, 0), 3, size))
    index.close(keep=False)


def test_a_young_variant_s_score_is_corrected_for_the_time_it_has_had() -> None:
    hour = 3600.0
    assert estimate(10.0, None, 1e9, 4 * hour) == 10.0  # age unknown: old
    # an hour old with a 4 h half-life: 1 - 2^(-1/4) of a half-life's exposure
    assert estimate(10.0, 1e9 - hour, 1e9, 4 * hour) == pytest.approx(
        10.0 / (1 - 2 ** -0.25))
    # minutes old: as if AGE_FLOOR old (a first request is not an hourly rate of 360)
    assert estimate(1.0, 1e9 - 10, 1e9, 4 * hour) == estimate(1.0, 1e9 - AGE_FLOOR, 1e9,
                                                                4 * hour)
    # past YOUNG_FOR half-lives: as it is
    assert estimate(10.0, 1e9 - YOUNG_FOR * 4 * hour, 1e9, 4 * hour) == 10.0
    ages = [estimate(10.0, 1e9 - a * hour, 1e9, 4 * hour) for a in (1, 2, 4, 8, 15)]
    assert ages == sorted(ages, reverse=True)  # younger: the same requests are worth more


def _source(index: Index, key: str, sizes: dict[str, int], *, born: float | None,
            prior: float = 1.0) -> None:
    """A source whose variants are named ``{key}-{width}`` (width from the name)."""
    index.set_sources([(key, [Variant(format="webp", width=int(p.split("-")[-1]), height=200,
                                      bytes=size, path=p) for p, size in sizes.items()],
                        prior)], born=None if born is None else {key: born})


def test_widths_within_half_an_octave_share_a_class() -> None:
    assert width_class(310) == width_class(320) == width_class(360)
    assert len({width_class(w) for w in (320, 640, 1280, 1920)}) == 4
    assert width_class(0) == width_class(1)  # (no log of 0)


def test_the_index_computes_rank_s_width_class_and_estimate(tmp_path: Path) -> None:
    """The index's SQL versions of width_class and estimate (a Python function called for
    every row of a re-rank would cost more than the re-rank) agree with rank.py's."""
    from imgwarm.cache.index.scores import _estimate, _width_class

    index = Index(tmp_path / "index.sqlite")
    widths = list(range(1, 20_001))
    found = index.db.execute(
        "WITH RECURSIVE v(width) AS (SELECT 1 UNION ALL SELECT width + 1 FROM v "
        f"WHERE width < 20000) SELECT {_width_class('v')} FROM v").fetchall()
    assert [c for (c,) in found] == [width_class(w) for w in widths]
    now, half_life = 1e9, 4 * 3600.0
    for born in (None, now, now - 60, now - AGE_FLOOR, now - 3600, now - 5 * 3600,
                 now - YOUNG_FOR * half_life + 1, now - YOUNG_FOR * half_life, now - 1e6):
        (sql,) = index.db.execute(
            f"SELECT {_estimate('v')} FROM (SELECT 7.5 AS score, :born AS born) AS v",
            {"now": now, "half_life": half_life, "born": born}).fetchone()
        assert sql == pytest.approx(estimate(7.5, born, now, half_life), rel=1e-12)
    index.close(keep=False)
    shares = measure_shares({("webp", 17): (1.0, 1.0)}, 0.5,
                            [("webp", 17, 4.0, 2.0), ("webp", 21, 2.0, 4.0)], unit=2.0)
    assert shares == {("webp", 17): (2.5, 1.5), ("webp", 21): (1.0, 2.0)}
    assert class_weights(shares) == {("webp", 17): 2.5 / 1.5, ("webp", 21): 0.5}
    assert class_weights({("jpeg", 17): (0.0, 0.0)}) == {}  # no traffic yet: even shares


def test_rerank_pools_a_source_and_shares_it_as_the_site_asks(tmp_path: Path) -> None:
    """A listing's traffic is pooled and shared out by its variants' own requests plus
    SHARE_PRIOR requests spread by the site's shares: the thumbnails (320) have three times
    the large views' (1280) mean score, so a listing nobody has asked for yet ranks its
    thumbnail three times as high as its large view. Worked out: now is the epoch (a request
    now weighs 1), the listings old (no age correction), priors 0.25 (made long ago)."""
    now = 1e9
    decay = Decay(now, 4 * 3600.0)
    index = Index(tmp_path / "index.sqlite")
    _source(index, "hot", {"hot-320": 4000, "hot-1280": 4000}, born=None, prior=0.25)
    _source(index, "cold", {"cold-320": 4000, "cold-1280": 4000}, born=None, prior=0.25)
    index.add_scores({"hot-320": 6.0, "hot-1280": 2.0})
    assert index.rerank(["hot-320", "hot-1280", "cold-320"], now=now, decay=decay) == 2
    # the hot listing's mean is 4: its thumbnail has 1.5 times that, its large view 0.5 (the
    # cold one, with no traffic, says nothing of the site's shares)
    assert index.weights == {("webp", width_class(320)): 1.5, ("webp", width_class(1280)): 0.5}
    found = dict(index.db.execute("SELECT path, density * 4096 FROM variants"))
    k = SHARE_PRIOR
    total = (6 + 0.25) + (2 + 0.25)  # scores plus priors
    assert found["hot-320"] == pytest.approx(total * (6 + k * 1.5) / (8 + k * 2))
    assert found["hot-1280"] == pytest.approx(total * (2 + k * 0.5) / (8 + k * 2))
    assert found["hot-320"] + found["hot-1280"] == pytest.approx(total)  # shared, not made
    # no traffic of its own: its priors shared as the site asks
    assert found["cold-320"] == pytest.approx(0.5 * 0.75)
    assert found["cold-1280"] == pytest.approx(0.5 * 0.25)
    assert found["hot-1280"] > found["cold-320"]


def test_the_site_s_shares_follow_the_site(tmp_path: Path) -> None:
    """Measured on the sources each run re-ranks, kept in the index between runs, older
    measures fading with the half-life as scores do. Worked out: the epoch is ``now``."""
    now, half_life = 1e9, 4 * 3600.0
    decay = Decay(now, half_life)
    index = Index(tmp_path / "index.sqlite")
    for key in "abc":
        _source(index, key, {f"{key}-320": 4000, f"{key}-1280": 4000}, born=None)
    index.add_scores({"a-320": 3.0, "a-1280": 1.0})
    index.rerank(["a-320"], now=now, decay=decay)
    assert index.weights == {("webp", width_class(320)): 1.5, ("webp", width_class(1280)): 0.5}
    index.add_scores({"b-320": 1.0, "b-1280": 3.0})  # a listing asked for the other way
    index.rerank(["b-1280"], now=now, decay=decay)
    assert index.weights == {("webp", width_class(320)): 1.0, ("webp", width_class(1280)): 1.0}
    index.commit()
    again = Index(tmp_path / "index.sqlite")  # a later run reads them from the index
    later = now + 4 * half_life  # what was measured now weighs 1/16
    again.add_scores({"c-320": 6.0, "c-1280": 2.0})
    again.rerank(["c-320"], now=later, decay=decay)
    # kept (4, 4) each, faded to (0.25, 0.25); c's mean 4, its scores in requests then: /16
    assert again.weights == {("webp", width_class(320)): (0.25 + 6 / 16) / (0.25 + 4 / 16),
                             ("webp", width_class(1280)): (0.25 + 2 / 16) / (0.25 + 4 / 16)}
    index.close(keep=False)
    again.close(keep=False)


def test_rerank_takes_young_sources_whatever_was_asked(tmp_path: Path) -> None:
    """A listing uploaded an hour ago, with the same score as an old one, ranks above it,
    and is ranked again at each run (its age moves) though nothing new was asked of it."""
    now = 1e9
    decay = Decay(now, 4 * 3600.0)
    index = Index(tmp_path / "index.sqlite")
    _source(index, "old", {"old-320": 4000}, born=None, prior=0.0)
    _source(index, "new", {"new-320": 4000}, born=now - 3600, prior=0.0)
    index.add_scores({"old-320": 5.0, "new-320": 5.0})
    assert index.rerank([], now=now, decay=decay) == 1  # the young one only
    found = dict(index.db.execute("SELECT path, density * 4096 FROM variants"))
    assert found["new-320"] == pytest.approx(estimate(5.0, now - 3600, now, 4 * 3600.0))
    assert found["new-320"] > 2 * found["old-320"]
    later = now + 3 * 3600
    index.rerank([], now=later, decay=decay)
    aged = dict(index.db.execute("SELECT path, density * 4096 FROM variants"))["new-320"]
    assert aged == pytest.approx(estimate(5.0, now - 3600, later, 4 * 3600.0))
    assert aged < found["new-320"]
