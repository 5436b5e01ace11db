"""The key-range index of a tablet's DiskRowSets (``RowSets.covering``) against a scan of
every rowset's range; the state machine exercises it through lookups and writes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import hypothesis.strategies as st
from hypothesis import given

from kudusql.storage.tablet.rowsets import RowSets

key_st = st.binary(min_size=0, max_size=3)


def fake_drs(lo: bytes, hi: bytes, rows: int) -> Any:
    """Only what the index reads: the key range and the row count."""
    return SimpleNamespace(meta=SimpleNamespace(min_key=lo, max_key=hi), num_rows=rows)


@given(
    ranges=st.lists(st.tuples(key_st, key_st, st.integers(0, 3)), max_size=12),
    probes=st.lists(key_st, min_size=1, max_size=10),
)
def test_covering_equals_brute_force(
    ranges: list[tuple[bytes, bytes, int]], probes: list[bytes]
) -> None:
    drs = tuple(fake_drs(min(a, b), max(a, b), n) for a, b, n in ranges)
    rs = RowSets(None, (), drs)  # type: ignore[arg-type]
    for k in probes:
        want = sorted(
            i for i, d in enumerate(drs) if d.num_rows and d.meta.min_key <= k <= d.meta.max_key
        )
        assert sorted(rs.covering(k)) == want


def test_disjoint_rowsets_take_one_probe() -> None:
    drs = tuple(fake_drs(bytes([i, 0]), bytes([i, 255]), 1) for i in range(0, 200, 2))
    rs = RowSets(None, (), drs)  # type: ignore[arg-type]
    assert rs.covering(bytes([10, 7])) == [5]
    assert rs.covering(bytes([11, 7])) == []
    assert rs.covering(b"") == []
    assert rs.covering(bytes([255])) == []
