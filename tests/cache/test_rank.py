"""The ranking: decay, the prior of new uploads, density by pages, the greedy choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.cache.index import Index
from imgwarm.cache.rank import AGE_FLOOR, YOUNG_FOR, Decay, choose, density, estimate, pages
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
    index.set_sources([(key, [Variant(format="webp", width=320, height=200, bytes=size,
                                      path=p) for p, size in sizes.items()], prior)],
                      born=None if born is None else {key: born})


def test_rerank_pools_a_source_and_shares_it_by_each_variant_s_score(tmp_path: Path) -> None:
    """A listing with a hot thumbnail: its never-asked large view gets a share of the
    listing's traffic (one request's worth of the total per variant, add-one), ahead of a
    cold listing's; the thumbnail keeps most of it. Worked out: now is the epoch (a request
    now weighs 1), both listings old (no age correction), priors 0.25 (made long ago)."""
    now = 1e9
    decay = Decay(now, 4 * 3600.0)
    index = Index(tmp_path / "index.sqlite")
    _source(index, "hot", {"hot-320": 4000, "hot-1280": 4000}, born=None, prior=0.25)
    _source(index, "cold", {"cold-320": 4000, "cold-1280": 4000}, born=None, prior=0.25)
    index.add_scores({"hot-320": 8.0})
    assert index.rerank(["hot-320"], now=now, decay=decay) == 1  # (no young source)
    found = dict(index.db.execute("SELECT path, density * 4096 FROM variants"))
    total = (8 + 0.25) + (0 + 0.25)  # scores plus priors
    assert found["hot-320"] == pytest.approx(total * (8 + 1) / (8 + 2))
    assert found["hot-1280"] == pytest.approx(total * (0 + 1) / (8 + 2))
    assert found["cold-320"] == found["cold-1280"] == pytest.approx(0.25)  # its prior
    assert found["hot-1280"] > found["cold-1280"]


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
