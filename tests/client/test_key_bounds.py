"""Scanner and scan token key bounds: exactly the rows whose primary key is in the range,
checked against a filter of every row with Python's tuple order (Kudu's key order for
these types)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

import kudusql.client as kudu
from tests.client.conftest import ON_BOTH


def compound_table(client: kudu.Client) -> tuple[kudu.Table, list[tuple[Any, ...]]]:
    """Key (a INT32, b STRING, c INT64), hash-partitioned on a and range-partitioned on
    (a, b), with flushed and in-memory rows."""
    b = kudu.schema_builder()
    b.add_column("a", kudu.int32, nullable=False)
    b.add_column("b", kudu.string, nullable=False)
    b.add_column("c", kudu.int64, nullable=False)
    b.add_column("v", kudu.double)
    b.set_primary_keys(["a", "b", "c"])
    parts = (
        kudu.Partitioning()
        .add_hash_partitions(["a"], 3)
        .set_range_partition_columns(["a", "b"])
        .add_range_partition_split({"a": 2, "b": "m"})
    )
    t = client.create_table("c", b.build(), parts)
    rows = [
        (a, bb, c, float(a * c))
        for a, bb, c in itertools.product(
            range(-1, 5), ["", "a", "a\x00", "m", "mz", "z"], [-2, 0, 7]
        )
    ]
    t.insert_arrow({n: [r[i] for r in rows] for i, n in enumerate(["a", "b", "c", "v"])})
    t.core.flush()
    more = [(a, "q", c, 1.0) for a in range(0, 4) for c in (1, 2)]
    t.insert_arrow({n: [r[i] for r in more] for i, n in enumerate(["a", "b", "c", "v"])})
    return t, sorted(rows + more)


def expected(
    rows: list[tuple[Any, ...]], lo: tuple[Any, ...] | None, hi: tuple[Any, ...] | None
) -> list[tuple[Any, ...]]:
    # An unset trailing key column takes its lowest value: comparing the key prefix of
    # the bound's length, a key equal to an upper bound's prefix is out of range.
    def key(r: tuple[Any, ...], n: int) -> tuple[Any, ...]:
        return r[:n]

    return [
        r
        for r in rows
        if (lo is None or key(r, len(lo)) >= lo) and (hi is None or key(r, len(hi)) < hi)
    ]


BOUNDS: list[tuple[Any, ...] | None] = [
    None,
    (),
    (2,),
    (2, "m"),
    (2, "a\x00"),
    (2, "a", 0),
    (2, "a", 7),
    (3, "mz", -2),
    (-1, ""),
    (9,),
]


def test_scanner_bounds_match_a_filter_of_every_row(client: kudu.Client) -> None:
    t, rows = compound_table(client)
    assert sorted(t.scanner().read_all_tuples()) == rows
    for lo, hi in itertools.product(BOUNDS, BOUNDS):
        sc = t.scanner()
        if lo is not None:
            sc.add_lower_bound(list(lo))
        if hi is not None:
            bound = sc.new_bound()
            for name, v in zip("abc", hi, strict=False):
                bound[name] = v
            sc.add_exclusive_upper_bound(bound)
        want = expected(rows, lo, hi) if hi != () else []
        assert sorted(sc.read_all_tuples()) == want, (lo, hi)


@ON_BOTH
def test_bounds_combine_with_predicates_order_snapshots_and_tokens(client: kudu.Client) -> None:
    t, rows = compound_table(client)
    rng = random.Random(7)
    for _ in range(20):
        lo, hi = sorted(rng.sample([b for b in BOUNDS if b], 2), key=str)
        want = [r for r in expected(rows, lo, hi) if r[2] >= 0]
        # predicates, primary-key order and a snapshot scan
        sc = (
            t.scanner()
            .add_lower_bound(dict(zip("abc", lo, strict=False)))
            .add_exclusive_upper_bound(dict(zip("abc", hi, strict=False)))
            .add_predicate(t["c"] >= 0)
            .set_fault_tolerant()
            .set_read_mode(kudu.READ_AT_SNAPSHOT)
        )
        assert sc.read_all_tuples() == want, (lo, hi)
        # scan tokens: the pieces together are the range; empty pieces are dropped
        builder = (
            t.scan_token_builder()
            .add_lower_bound(list(lo))
            .add_upper_bound(list(hi))
            .add_predicate(t["c"] >= 0)
        )
        got = []
        for token in builder.build():
            got += client.deserialize_token_into_scanner(token.serialize()).read_all_tuples()
        assert sorted(got) == want, (lo, hi)


def test_several_bounds_keep_the_tightest(client: kudu.Client) -> None:
    t, rows = compound_table(client)
    sc = (
        t.scanner()
        .add_lower_bound([1])
        .add_lower_bound([2, "a"])
        .add_lower_bound([0])
        .add_exclusive_upper_bound([4])
        .add_exclusive_upper_bound([3, "q"])
    )
    assert sorted(sc.read_all_tuples()) == expected(rows, (2, "a"), (3, "q"))
    # a point-lookup predicate still honours the bounds
    key = t["a"] == 1
    sc = t.scanner().add_predicates([key, t["b"] == "a", t["c"] == 0]).add_lower_bound([2])
    assert sc.read_all_tuples() == []


def test_bad_bounds_are_refused(client: kudu.Client) -> None:
    t, _ = compound_table(client)
    with pytest.raises(kudu.KuduInvalidArgument, match="leading primary key columns"):
        t.scanner().add_lower_bound({"b": "x"})  # a gap: a is unset
    with pytest.raises(kudu.KuduInvalidArgument, match="leading primary key columns"):
        t.scanner().add_lower_bound({"a": 1, "v": 2.0})
    with pytest.raises(TypeError, match="a key bound is"):
        t.scanner().add_lower_bound(5)
    with pytest.raises(TypeError, match="an integer is required"):
        t.scanner().add_lower_bound(["x"])
    sc = t.scanner()
    sc.open()
    with pytest.raises(kudu.KuduInvalidArgument, match="already open"):
        sc.add_lower_bound([1])
