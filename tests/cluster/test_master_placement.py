"""Placement: power of two choices over live servers, weighted by hosted replicas and
decaying recent picks, deterministic under a seed."""

from __future__ import annotations

import random
from collections import Counter

from kudusql.cluster.placement import RecentPicks, pick_tserver


def test_a_batch_spreads_evenly() -> None:
    recent = RecentPicks()
    rng = random.Random(3)
    picks = Counter(pick_tserver(["a", "b", "c"], {}, recent, rng, 0.0) for _ in range(30))
    assert set(picks.values()) <= {9, 10, 11}


def test_hosted_replicas_steer_new_ones_to_the_emptier_server() -> None:
    picks = Counter(
        pick_tserver(["a", "b"], {"a": 50}, RecentPicks(), random.Random(s), 0.0) for s in range(20)
    )
    assert picks == {"b": 20}


def test_same_seed_same_picks_and_none_without_servers() -> None:
    def run(seed: int) -> list[str | None]:
        recent, rng = RecentPicks(), random.Random(seed)
        return [pick_tserver(["a", "b", "c", "d"], {}, recent, rng, i) for i in range(12)]

    assert run(5) == run(5)
    assert pick_tserver([], {}, RecentPicks(), random.Random(0), 0.0) is None


def test_recent_picks_decay_with_a_half_life() -> None:
    recent = RecentPicks(half_life=10.0)
    recent.record("a", 0.0)
    recent.record("a", 0.0)
    assert recent.value("a", 0.0) == 2.0
    assert recent.value("a", 10.0) == 1.0
    assert recent.value("b", 5.0) == 0.0
