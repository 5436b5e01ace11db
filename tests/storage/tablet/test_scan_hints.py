"""Hint (advisory) predicates: they prune like any predicate but do not filter rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.options import TabletOptions, default_block_cache_bytes
from kudusql.common.predicates import ColumnPredicate as P
from kudusql.storage.tablet.tablet import Tablet
from tests.support.tablets import new_tablet, reopen, schema

SCH = schema(("a", "BIGINT"), ("c", "INT", {"nullable": False}), key=["a"])


def filled(tmp_path: Any, where: str) -> Tablet:
    """40 rows a = c = 0..39 in pages of 4 rows (when flushed), row 35 deleted."""
    t = new_tablet(tmp_path, SCH)
    t.insert(pa.table({"a": pa.array(range(40), pa.int64()), "c": pa.array(range(40), pa.int32())}))
    if where != "memory":
        t.flush()
    t.delete(pa.table({"a": pa.array([35], pa.int64())}))
    if where == "reopened":
        t.flush_deltas()
        t = reopen(t)
    return t


def values(t: Tablet, preds: list[P]) -> list[int]:
    return sorted(t.scan(["c"], preds).read_all().column("c").to_pylist())


@pytest.mark.parametrize("where", ["memory", "flushed", "reopened"])
def test_hints_return_a_superset_without_deleted_rows(tmp_path: Any, where: str) -> None:
    t = filled(tmp_path, where)
    exact = values(t, [P.ge("c", 30)])
    hinted = values(t, [P.ge("c", 30).advisory()])
    assert exact == [30, 31, 32, 33, 34, 36, 37, 38, 39]
    assert set(exact) <= set(hinted)
    assert 35 not in hinted  # MVCC liveness is never a hint
    if where == "memory":
        assert hinted == [c for c in range(40) if c != 35]  # nothing to prune in memory
    else:
        # pages whose zone maps rule the predicate out are skipped; the page holding
        # 28..31 passes and goes out whole
        assert hinted == [28, 29, *exact]
        _, stats = t.scan_stats(["c"], [P.ge("c", 30).advisory()])
        assert stats["pages_pruned"] == 7
    t.close()


@pytest.mark.parametrize("where", ["memory", "flushed"])
def test_key_hints_narrow_to_the_key_range(tmp_path: Any, where: str) -> None:
    t = filled(tmp_path, where)
    assert values(t, [P.ge("a", 10).advisory(), P.lt("a", 13).advisory()]) == [10, 11, 12]
    assert values(t, [P.eq("a", 35).advisory()]) == []
    t.close()


def test_hint_survives_bind_and_serialization() -> None:
    p = P.between("c", 1, 5).advisory()
    assert p.hint and p.advisory() is p
    assert p.bind(SCH).hint
    assert P.from_dict(p.to_dict()) == p
    assert not P.from_dict(P.ge("c", 1).to_dict()).hint
    assert "hint" not in P.ge("c", 1).to_dict()


def test_default_block_cache_is_bounded() -> None:
    n = default_block_cache_bytes()
    assert 256 << 20 <= n <= 8192 << 20
    assert TabletOptions().block_cache_bytes == n


def count(t: Tablet, preds: Sequence[P] = (), snapshot: int | None = None) -> int:
    """Rows of a scan of no column (what COUNT(*) reads)."""
    return t.scan([], preds, snapshot=snapshot).read_all().num_rows


@pytest.mark.parametrize("where", ["memory", "flushed", "reopened"])
def test_counting_rows_without_columns(tmp_path: Any, where: str) -> None:
    t = new_tablet(tmp_path, SCH)
    t.insert(pa.table({"a": pa.array(range(40), pa.int64()), "c": pa.array(range(40), pa.int32())}))
    if where != "memory":
        t.flush()
    before = t.mvcc.latest_snapshot()
    _, stats = t.scan_stats([])
    assert count(t) == 40
    if where != "memory":
        assert stats["rowsets_counted"] == 1 and "pages_scanned" not in stats
    t.delete(pa.table({"a": pa.array([3, 35], pa.int64())}))
    t.insert(pa.table({"a": pa.array([100], pa.int64()), "c": pa.array([100], pa.int32())}))
    if where == "reopened":
        t.flush_deltas()
        t = reopen(t)
    assert count(t) == 39
    assert count(t, snapshot=before) == 40  # time travel: the deleted rows come back
    assert count(t, [P.ge("a", 30)]) == 10  # key range: 30..39 less 35, plus 100
    assert count(t, [P.ge("c", 30).advisory()]) >= 10  # a hint only prunes pages
    assert count(t, [P.ge("c", 30)]) == 10  # an exact predicate is evaluated
    t.flush()
    t.compact()
    assert count(t) == 39
    t.close()
