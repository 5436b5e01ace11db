"""The YCSB benchmark's key chooser and workloads (``benchmarks/ycsb_workloads.py``): the
Zipfian generator's head frequencies against the analytic Zipf probabilities, YCSB's
FNV-64 scrambling and key names, and determinism under a seed."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.ycsb_workloads import (
    FIELD_BYTES,
    WORKLOADS,
    ScrambledZipfianGenerator,
    ZipfianGenerator,
    fnv64,
    key_names,
    operations,
    records_table,
    zeta,
)

DRAWS = 400_000


def test_zeta_matches_a_direct_sum() -> None:
    n = 5000
    direct = sum(1.0 / i**0.99 for i in range(1, n + 1))
    assert zeta(n, 0.99) == pytest.approx(direct, rel=1e-12)


def test_ycsb_precomputed_zeta_is_the_sum_it_names() -> None:
    # zeta(10^10, 0.99) by the Euler-Maclaurin tail over a direct head.
    head = 10**6
    s = 1 - 0.99
    tail = ((10**10) ** s - head**s) / s + 0.5 * ((10**10) ** -0.99 - head**-0.99)
    assert ScrambledZipfianGenerator(10).zipf.zetan == pytest.approx(
        zeta(head, 0.99) + tail, rel=1e-6
    )


@pytest.mark.parametrize("items", [1000, 1_000_000])
def test_head_frequencies_follow_zipf(items: int) -> None:
    g = ZipfianGenerator(items)
    ranks = g.ranks(np.random.default_rng(7), DRAWS)
    assert ranks.min() >= 0 and ranks.max() < items
    freq = np.bincount(ranks, minlength=items) / DRAWS
    # Ranks 0 and 1 are drawn exactly (Gray et al.'s first two branches) ...
    for r in (0, 1):
        assert freq[r] == pytest.approx(g.probability(r), rel=0.03)
    # ... higher ranks by a closed-form approximation of the inverse CDF, which YCSB
    # shares: within 25% over the head, and still decreasing.
    for r in range(2, 10):
        assert freq[r] == pytest.approx(g.probability(r), rel=0.25)
    assert np.all(np.diff(freq[:10]) < 0)
    # The head's total mass matches too.
    head = sum(g.probability(r) for r in range(100))
    assert freq[:100].sum() == pytest.approx(head, rel=0.05)


def test_fnv64_is_ycsbs_hash() -> None:
    # YCSB's first key of a hashed-order load is "user6284781860667377211".
    assert fnv64(np.array([0, 1])).tolist() == [6284781860667377211, 8517097267634966620]
    assert key_names(np.array([0]))[0] == "user6284781860667377211"
    h = fnv64(np.arange(100_000))
    assert (h >= 0).all() and len(np.unique(h)) == 100_000


def test_scrambled_zipfian_spreads_the_hot_records() -> None:
    records = 100_000
    g = ScrambledZipfianGenerator(records)
    recs = g.records_for(np.random.default_rng(3), DRAWS)
    assert recs.min() >= 0 and recs.max() < records
    freq = np.bincount(recs, minlength=records) / DRAWS
    hot = g.record_of_rank(np.arange(5))
    # The hottest records are the hashed ranks, with the ranks' probabilities ...
    for r in (0, 1):
        assert freq[hot[r]] == pytest.approx(g.zipf.probability(r), rel=0.05)
    assert np.argmax(freq) == hot[0]
    # ... and they are not clustered at the start of the key space.
    assert len(set((hot * 10 // records).tolist())) > 1


def test_same_seed_same_operations() -> None:
    a = operations(WORKLOADS["A"], 10_000, 2000, seed=5)
    assert a == operations(WORKLOADS["A"], 10_000, 2000, seed=5)
    assert a != operations(WORKLOADS["A"], 10_000, 2000, seed=6)
    g = ZipfianGenerator(1000)
    r1 = g.ranks(np.random.default_rng(1), 100)
    assert (r1 == g.ranks(np.random.default_rng(1), 100)).all()


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_workload_mixes(name: str) -> None:
    w = WORKLOADS[name]
    ops = operations(w, 10_000, 20_000, seed=1)
    kinds = [o.kind for o in ops]
    for kind, share in (("read", w.read), ("update", w.update), ("read-modify-write", w.rmw)):
        assert kinds.count(kind) / len(ops) == pytest.approx(share, abs=0.015)
    assert all((o.field == -1) == (o.kind == "read") for o in ops)
    assert all(0 <= o.record < 10_000 for o in ops)


def test_records_have_ycsbs_shape_and_are_reproducible() -> None:
    t = records_table(10, 20, seed=1)
    assert t.column_names == ["ycsb_key"] + [f"field{i}" for i in range(10)]
    assert t.num_rows == 10
    assert t.column("ycsb_key")[0].as_py() == key_names(np.array([10]))[0]
    values = [str(v) for v in t.column("field3").to_pylist()]
    assert all(len(v) == FIELD_BYTES and v.isascii() and v.isprintable() for v in values)
    assert records_table(10, 20, seed=1).equals(t)
