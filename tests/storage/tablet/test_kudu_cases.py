"""Kudu's single-tablet behavioural cases (kudu-internals.md §7, cases 1-9 and 14-17),
each run with the data in memory and again after flushes, delta flushes and restarts."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.errors import ProgrammingError
from kudusql.common.predicates import ColumnPredicate as P
from kudusql.storage.tablet.tablet import Tablet
from tests.support.tablets import SMALL, new_tablet, reopen, rows, schema

KV = schema(("key", "BIGINT"), ("val", "INT"), key=["key"])


def kv(keys: list[int], vals: list[int | None] | None = None) -> pa.Table:
    cols: dict[str, Any] = {"key": pa.array(keys, pa.int64())}
    if vals is not None:
        cols["val"] = pa.array(vals, pa.int32())
    return pa.table(cols)


def settle(t: Tablet, how: str) -> Tablet:
    """Move the data to where the case wants it: memory, disk, or a reopened tablet."""
    if how in ("flushed", "reopened"):
        t.flush()
        t.flush_deltas()
    if how == "reopened":
        t = reopen(t)
    return t


WHERE = ["memory", "flushed", "reopened"]


@pytest.mark.parametrize("where", WHERE)
def test_case1_duplicate_insert_is_a_row_error(tmp_path: Any, where: str) -> None:
    t = new_tablet(tmp_path, KV)
    res = t.insert(kv([1, 1, 2], [10, 11, 20]))
    assert [(e.index, e.status, e.message) for e in res.errors] == [
        (1, "AlreadyPresent", "key already present")
    ]
    assert res.applied == 2
    t = settle(t, where)
    assert t.count_rows() == 2
    res = t.insert(kv([1], [12]))
    assert res.errors[0].message == "key already present"
    assert rows(t) == [{"key": 1, "val": 10}, {"key": 2, "val": 20}]
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_case2_insert_ignore(tmp_path: Any, where: str) -> None:
    t = new_tablet(tmp_path, KV)
    t.write(
        pa.table(
            {
                "key": pa.array([0, 0], pa.int64()),
                "val": pa.array([1000, 1000], pa.int32()),
                "op": ["INSERT", "INSERT_IGNORE"],
            }
        ),
        op_column="op",
    )
    assert rows(t) == [{"key": 0, "val": 1000}]
    t = settle(t, where)
    res = t.write(kv([0], [2000]), "INSERT_IGNORE")
    assert res.errors == [] and res.ignored == 1
    assert rows(t) == [{"key": 0, "val": 1000}]
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_case3_update_delete_missing_key(tmp_path: Any, where: str) -> None:
    t = new_tablet(tmp_path, KV)
    t.insert(kv([5], [1]))
    t = settle(t, where)
    for op in ("UPDATE", "DELETE"):
        data = kv([7], [1]) if op == "UPDATE" else kv([7])
        res = t.write(data, op)
        assert [(e.status, e.message) for e in res.errors] == [("NotFound", "key not found")]
        res = t.write(data, op + "_IGNORE")
        assert res.errors == [] and res.ignored == 1
    assert rows(t) == [{"key": 5, "val": 1}]
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_case4_upsert_changes_only_given_columns(tmp_path: Any, where: str) -> None:
    sch = schema(("key", "BIGINT"), ("v", "INT"), ("w", "STRING"), key=["key"])
    t = new_tablet(tmp_path, sch)
    t.insert(
        pa.table({"key": pa.array([1], pa.int64()), "v": pa.array([1], pa.int32()), "w": ["x"]})
    )
    t = settle(t, where)
    t.upsert(pa.table({"key": pa.array([1], pa.int64()), "v": pa.array([2], pa.int32())}))
    assert rows(t) == [{"key": 1, "v": 2, "w": "x"}]
    res = t.upsert(kv([1]))  # primary-key-only upsert: a no-op
    assert res.errors == []
    assert rows(t) == [{"key": 1, "v": 2, "w": "x"}]
    t = settle(t, where)
    assert rows(t) == [{"key": 1, "v": 2, "w": "x"}]
    t.close()


@pytest.mark.parametrize("flush_between", [False, True])
def test_case5_insert_delete_insert(tmp_path: Any, flush_between: bool) -> None:
    t = new_tablet(tmp_path, KV)
    t.insert(kv([1], [1]))
    if flush_between:
        t.flush()
    t.delete(kv([1]))
    if flush_between:
        t.flush_deltas()
    t.insert(kv([1], [2]))
    assert rows(t) == [{"key": 1, "val": 2}]
    t.flush()
    assert rows(t) == [{"key": 1, "val": 2}]
    t = reopen(t)
    assert rows(t) == [{"key": 1, "val": 2}]
    t.close()


def test_case6_time_travel_across_flushes(tmp_path: Any) -> None:
    t = new_tablet(tmp_path, KV)
    t1 = t.insert(kv([1], [1])).timestamp
    t2 = t.update(kv([1], [2])).timestamp
    t3 = t.delete(kv([1])).timestamp
    t4 = t.insert(kv([1], [3])).timestamp
    expected = [[{"key": 1, "val": 1}], [{"key": 1, "val": 2}], [], [{"key": 1, "val": 3}]]

    def check(tab: Tablet) -> None:
        for ts, exp in zip((t1, t2, t3, t4), expected, strict=True):
            assert rows(tab, snapshot=ts + 1) == exp
        assert rows(tab, snapshot=t1) == []

    check(t)
    t.flush()
    check(t)
    t.flush_deltas()
    check(t)
    t = reopen(t)
    check(t)
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_case7_diff_scan(tmp_path: Any, where: str) -> None:
    t = new_tablet(tmp_path, KV)
    t.insert(kv([1, 2, 3, 4], [10, 20, 30, 40]))
    t = settle(t, where)
    s = t.latest_timestamp()
    t.update(kv([1], [11]))  # updated inside
    t.delete(kv([2]))  # deleted inside
    t.insert(kv([5], [50]))
    t.delete(kv([5]))  # born and died inside
    t = settle(t, where)
    e = t.latest_timestamp()
    got = t.diff_scan(s, e).read_all().to_pylist()
    assert got == [
        {"key": 1, "val": 11, "is_deleted": False},
        {"key": 2, "val": 20, "is_deleted": True},
    ]
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_case8_unobservable_batch(tmp_path: Any, where: str) -> None:
    t = new_tablet(tmp_path, KV)
    s = t.latest_timestamp()
    ops = ["INSERT", "DELETE", "INSERT", "UPDATE", "DELETE", "INSERT", "DELETE", "INSERT", "DELETE"]
    keys = [0, 0, 1, 1, 1, 2, 2, 2, 2]
    res = t.write(
        pa.table(
            {"key": pa.array(keys, pa.int64()), "val": pa.array([1] * 9, pa.int32()), "op": ops}
        ),
        op_column="op",
    )
    assert res.errors == []
    t = settle(t, where)
    assert t.diff_scan(s, t.latest_timestamp()).read_all().num_rows == 0
    assert rows(t) == []
    t.close()


def test_case9_snapshot_before_ancient_history_mark(tmp_path: Any) -> None:
    t = Tablet.create(str(tmp_path / "t"), KV, SMALL.with_(history_max_age_s=0.05))
    ts = t.insert(kv([1], [1])).timestamp
    assert rows(t, snapshot=ts + 1) == [{"key": 1, "val": 1}]
    time.sleep(0.1)
    with pytest.raises(ProgrammingError, match="ancient history mark"):
        t.scan(snapshot=ts + 1)
    with pytest.raises(ProgrammingError, match="ancient history mark"):
        t.diff_scan(ts, t.latest_timestamp())
    t.close()


def test_case14_invalid_rows(tmp_path: Any) -> None:
    sch = schema(("k", "STRING"), ("a", "STRING"), ("n", "INT", {"nullable": False}), key=["k"])
    t = new_tablet(tmp_path, sch)
    big = "x" * (64 * 1024 + 1)
    data = pa.table(
        {
            "k": ["ok", None, "big", "k" * (16 * 1024 + 1)],
            "a": ["a", "a", big, "a"],
            "n": pa.array([1, 1, 1, 1], pa.int32()),
        }
    )
    res = t.insert(data)
    msgs = {e.index: e.message for e in res.errors}
    assert set(msgs) == {1, 2, 3}
    assert "NULL values not allowed for key column" in msgs[1]
    assert "value too large" in msgs[2]
    assert msgs[3] == "encoded primary key too large"
    res = t.insert(pa.table({"k": ["m"]}))
    assert "No value provided for required column 'n'" in res.errors[0].message
    res = t.insert(pa.table({"a": ["m"]}))
    assert "No value provided for key column 'k'" in res.errors[0].message
    res = t.update(pa.table({"k": ["ok"]}))
    assert res.errors[0].message == "No fields updated"
    res = t.update(pa.table({"k": ["ok"], "n": pa.array([None], pa.int32())}))
    assert "NULL value not allowed for non-nullable column 'n'" in res.errors[0].message
    res = t.insert(pa.table({"k": ["z"], "n": ["not a number"]}))
    assert "invalid value" in res.errors[0].message
    res = t.insert(pa.table({"k": ["z"], "n": pa.array([1], pa.int32()), "nope": [1]}))
    assert "unknown column 'nope'" in res.errors[0].message
    res = t.insert(pa.table({"k": ["z"], "n": pa.array([2**40], pa.int64())}))
    assert "invalid value" in res.errors[0].message
    assert rows(t) == [{"k": "ok", "a": "a", "n": 1}]
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_case15_predicates(tmp_path: Any, where: str) -> None:
    sch = schema(("a", "INT"), ("b", "INT"), ("c", "INT", {"nullable": False}), key=["a", "b"])
    t = new_tablet(tmp_path, sch)
    n = 40
    t.insert(
        pa.table(
            {
                "a": pa.array([i // 10 for i in range(n)], pa.int32()),
                "b": pa.array([i % 10 for i in range(n)], pa.int32()),
                "c": pa.array(list(range(n)), pa.int32()),
            }
        )
    )
    t = settle(t, where)
    assert t.scan(predicates=[P.is_null("c")]).read_all().num_rows == 0
    assert t.scan(predicates=[P.ge("a", 5), P.lt("a", 5)]).read_all().num_rows == 0
    got = t.scan(["c"], [P.in_list("c", [3, 3, 7, 99])]).read_all().column("c").to_pylist()
    assert sorted(got) == [3, 7]
    table, stats = t.scan_stats(["c"], [P.eq("a", 1), P.ge("b", 5)])
    assert sorted(table.column("c").to_pylist()) == [15, 16, 17, 18, 19]
    if where != "memory":
        # a key seek: only the pages holding a=1, b>=5 are read
        assert stats.get("pages_scanned", 0) <= 2
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_case16_immutable_column(tmp_path: Any, where: str) -> None:
    sch = schema(("k", "BIGINT"), ("imm", "INT", {"immutable": True}), ("v", "INT"), key=["k"])
    t = new_tablet(tmp_path, sch)
    t.insert(
        pa.table(
            {
                "k": pa.array([1], pa.int64()),
                "imm": pa.array([1], pa.int32()),
                "v": pa.array([1], pa.int32()),
            }
        )
    )
    t = settle(t, where)
    change = pa.table(
        {
            "k": pa.array([1], pa.int64()),
            "imm": pa.array([2], pa.int32()),
            "v": pa.array([2], pa.int32()),
        }
    )
    res = t.upsert(change)
    assert [(e.status, e.message) for e in res.errors] == [
        ("Immutable", "UPDATE not allowed for immutable column")
    ]
    assert rows(t) == [{"k": 1, "imm": 1, "v": 1}]
    res = t.write(change, "UPSERT_IGNORE")
    assert res.errors == []
    assert rows(t) == [{"k": 1, "imm": 1, "v": 2}]
    t.close()


def test_case17_upsert_sequence_with_restart(tmp_path: Any) -> None:
    """Fuzz TestUpsertSeq: INSERT 1, UPSERT 1, flush, UPSERT 1, DELETE 1, UPSERT 1,
    INSERT 0, flush, restart, UPDATE 1."""
    t = new_tablet(tmp_path, KV)
    t.insert(kv([1], [1]))
    t.upsert(kv([1], [2]))
    t.flush()
    t.upsert(kv([1], [3]))
    t.delete(kv([1]))
    t.upsert(kv([1], [4]))
    t.insert(kv([0], [0]))
    t.flush()
    t = reopen(t)
    res = t.update(kv([1], [5]))
    assert res.errors == []
    assert rows(t) == [{"key": 0, "val": 0}, {"key": 1, "val": 5}]
    t.close()


@pytest.mark.parametrize("where", WHERE)
def test_atomic_batch_applies_all_or_nothing(tmp_path: Any, where: str) -> None:
    from kudusql.common.errors import IntegrityError

    t = new_tablet(tmp_path, KV)
    t.insert(kv([1], [1]))
    t = settle(t, where)
    with pytest.raises(IntegrityError, match="key already present"):
        t.insert(kv([2, 1], [2, 2]), atomic=True)
    assert rows(t) == [{"key": 1, "val": 1}]
    res = t.insert(kv([2, 3], [2, 3]), atomic=True)
    assert res.applied == 2
    t.close()
