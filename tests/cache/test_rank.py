"""The ranking: decay, the prior of new uploads, density by pages, the greedy choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from imgwarm.cache.index import Index
from imgwarm.cache.rank import Decay, choose, density, pages
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
