"""The plan of a tier with a budget: what ``Index.plan`` places and evicts is what the
greedy choice (rank.choose over every row) asks for, from wherever the last run's cut was."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from imgwarm.cache.index import Index
from imgwarm.cache.steps.plan import still_met
from imgwarm.manifest import Variant

PAGE = 4096


def _site(index: Index, rnd: random.Random, sources: int) -> list[str]:
    paths = []
    for s in range(sources):
        variants = [Variant(format="webp", width=w, height=w, path=f"{s}-{w}.webp",
                            bytes=rnd.choice([1, 4096, 4097, 9000, 20_000, 70_000]))
                    for w in (320, 640, 1280)]
        index.set_source(f"s{s}", variants, prior=0.0)
        paths += [v.path for v in variants]
    return paths


def _expected(index: Index, tier: str, budget: int, max_width: int, page: int
              ) -> tuple[dict[str, int], dict[str, int]]:
    chosen = index.choose(budget, max_width=max_width, page=page)
    held = index.held(tier)
    return ({p: s for p, s in chosen.items() if p not in held},
            {p: s for p, s in held.items() if p not in chosen})


@pytest.mark.parametrize("seed", range(16))
def test_the_plan_is_the_greedy_choice_as_scores_move(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    index = Index(tmp_path / "index.sqlite")
    paths = _site(index, rnd, 40)
    # ties on purpose: scores from a few values, so that many densities are equal
    for run in range(8):
        index.add_scores({p: float(rnd.choice([0, 1, 1, 2, 5, 40])) for p in
                          rnd.sample(paths, rnd.randint(1, len(paths)))})
        if rnd.random() < 0.3:
            index.set_pinned(set(rnd.sample(paths, 3)))
        if rnd.random() < 0.2:  # a source gone: its variants no longer candidates
            index.set_source(f"s{rnd.randrange(40)}", [], prior=0.0)
        budget = rnd.choice([0, 4096, 50_000, 300_000, 1_000_000, 10**9])
        max_width = rnd.choice([320, 640, 1 << 14])
        page = rnd.choice([1, PAGE])  # (a disk tier may count bytes, not pages)
        tier = rnd.choice(["ram", "nvme"])
        expected = _expected(index, tier, budget, max_width, page)
        place, evict = index.plan(tier, budget, max_width=max_width, page=page)
        assert (place, evict) == expected, f"run {run}"
        index.mark(tier, evict, None)  # as warm settles them: the next run starts from here
        index.mark(tier, place, "placed")
        if rnd.random() < 0.2:  # a killed run left some unsettled
            index.mark(tier, rnd.sample(paths, 2), rnd.choice(["placing", "evicting"]))
    index.close(keep=False)


def test_a_plan_holds_nothing_of_no_value_and_reads_its_cut_back(tmp_path: Path) -> None:
    index = Index(tmp_path / "index.sqlite")
    _site(index, random.Random(1), 3)
    place, evict = index.plan("ram", 10**9, max_width=1 << 14, page=PAGE)
    assert (place, evict) == ({}, {})  # no traffic, no prior: nothing is worth a page
    index.add_scores({"0-320.webp": 1.0, "1-320.webp": 2.0})
    place, _ = index.plan("ram", 10**9, max_width=1 << 14, page=PAGE)
    assert set(place) == {"0-320.webp", "1-320.webp"}
    assert index.meta("cut:ram") is None  # everything fit: no cut
    index.close(keep=False)


@pytest.mark.parametrize("seed", range(8))
def test_a_budget_moved_by_others_is_ranked_again_only_where_the_choice_changes(
        tmp_path: Path, seed: int) -> None:
    """A tier's budget follows its file system's free space, which other programs move: a
    quiet run takes a moved budget as met (no ranking) only where ranking again at it would
    place and evict nothing."""
    rnd = random.Random(seed)
    index = Index(tmp_path / "index.sqlite")
    paths = _site(index, rnd, 40)
    index.add_scores({p: float(rnd.choice([0, 1, 2, 5, 40])) for p in paths})
    kept = {True: 0, False: 0}
    for _ in range(10):
        budget = rnd.choice([0, 50_000, 300_000, 1_000_000, 10**9])
        place, evict = index.plan("ram", budget, max_width=1 << 14, page=PAGE)
        index.mark("ram", evict, None)
        index.mark("ram", place, "placed")
        index.remember("ram_budget", budget)  # met, as the finish step records it
        for moved in (budget + rnd.randint(-60_000, 60_000) for _ in range(6)):
            moved = max(0, moved)
            met = still_met(index, "ram", moved)
            kept[met] += 1
            if met:
                assert _expected(index, "ram", moved, 1 << 14, PAGE) == ({}, {}), moved
    assert kept[True] and kept[False]  # both answers came up: the check can fail
    index.close(keep=False)
