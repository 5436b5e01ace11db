"""Scanners: predicates, projection, order, limits, batches, Arrow and pandas output,
snapshot reads (time travel), the client's latest observed timestamp, scan tokens."""

from __future__ import annotations

import datetime
import importlib.util
import itertools
from typing import Any

import pyarrow as pa
import pytest

import kudusql.client as kudu
from kudusql.common.errors import Error, NotSupportedError, ProgrammingError
from kudusql.common.predicates import ColumnPredicate
from tests.client.conftest import ON_BOTH, simple_schema


@pytest.fixture
def filled(table: kudu.Table) -> kudu.Table:
    n = 200
    table.insert_arrow(
        {
            "key": list(range(n)),
            "name": [None if i % 10 == 0 else f"name{i:03d}" for i in range(n)],
            "value": [i / 2 for i in range(n)],
        }
    )
    return table


def keys(scanner: kudu.Scanner) -> list[int]:
    return sorted(r[0] for r in scanner.read_all_tuples())


@ON_BOTH
def test_comparison_predicates(filled: kudu.Table) -> None:
    t = filled
    assert keys(t.scanner().add_predicate(t["key"] < 3)) == [0, 1, 2]
    assert keys(t.scanner().add_predicate(t["key"] <= 2)) == [0, 1, 2]
    assert keys(t.scanner().add_predicate(t["key"] > 197)) == [198, 199]
    assert keys(t.scanner().add_predicate(t["key"] >= 198)) == [198, 199]
    assert keys(t.scanner().add_predicate(t["key"] == 42)) == [42]
    assert keys(t.scanner().add_predicates([t["key"] >= 10, t["key"] < 13])) == [10, 11, 12]
    assert keys(t.scanner().add_predicate(t["value"] > 98.5)) == [198, 199]
    assert keys(t.scanner().add_predicate(t["name"] == "name005")) == [5]
    assert keys(t.scanner().add_predicate(t["key"].in_list([3, 5, 500]))) == [3, 5]
    assert keys(t.scanner().add_predicate(t["name"].in_list(["name001", "zzz"]))) == [1]
    assert keys(t.scanner().add_predicate(t["key"].in_list([]))) == []
    assert keys(t.scanner().add_predicate(t["name"].is_null())) == list(range(0, 200, 10))
    assert len(keys(t.scanner().add_predicate(t["name"].is_not_null()))) == 180
    assert keys(t.scanner().add_predicate(t["name"].prefix("name19"))) == list(range(191, 200))
    # storage predicates are accepted as they are
    assert keys(t.scanner().add_predicate(ColumnPredicate.between("key", 5, 6))) == [5, 6]
    # a literal is converted to the column's type
    assert keys(t.scanner().add_predicate(t["value"] == 1)) == [2]


def test_predicate_errors(filled: kudu.Table, client: kudu.Client) -> None:
    t = filled
    with pytest.raises(ProgrammingError, match="an integer is required"):
        _ = t["key"] > "abc"
    with pytest.raises(ProgrammingError, match="is_null"):
        _ = t["key"] == None  # noqa: E711
    with pytest.raises(NotSupportedError, match="!="):
        _ = t["key"] != 1
    with pytest.raises(ProgrammingError, match="unknown column 'nope'"):
        _ = t["nope"]
    with pytest.raises(ProgrammingError, match="prefix predicate on non-string"):
        t["key"].prefix("1")
    other = client.create_table("other", simple_schema())
    with pytest.raises(ProgrammingError, match="another table"):
        t.scanner().add_predicate(other["key"] > 1)
    with pytest.raises(ProgrammingError, match="scan predicate"):
        t.scanner().add_predicate("key > 1")  # type: ignore[arg-type]
    assert repr(t["key"]) == "Column(key, parent=t, type=int64)"
    assert repr(t["key"] >= 5) == "Predicate(key >= 5)"


@ON_BOTH
def test_projection_order_limit_and_batches(filled: kudu.Table) -> None:
    t = filled
    sc = t.scanner().set_projected_column_names(["value", "key"]).add_predicate(t["key"] < 4)
    assert sorted(sc.read_all_tuples(), key=lambda r: r[1]) == [
        (0.0, 0),
        (0.5, 1),
        (1.0, 2),
        (1.5, 3),
    ]
    assert sc.get_projection_schema().names == ["value", "key"]
    by_index = t.scanner().set_projected_column_indexes([1]).add_predicate(t["key"] == 1)
    assert by_index.read_all_tuples() == [("name001",)]
    # an empty projection still returns one (empty) tuple per row
    empty = t.scanner().set_projected_column_names([]).add_predicate(t["key"] < 5)
    assert empty.read_all_tuples() == [()] * 5
    # fault tolerant scans return rows in key order, across hash tablets
    ordered = t.scanner().set_fault_tolerant().set_projected_column_names("key")
    assert [r[0] for r in ordered.read_all_tuples()] == list(range(200))
    limited = t.scanner().set_fault_tolerant().set_limit(7)
    assert [r[0] for r in limited.read_all_tuples()] == list(range(7))
    # batch by batch
    sc = t.scanner().open()
    seen: list[tuple[Any, ...]] = []
    while sc.has_more_rows():
        seen.extend(sc.read_next_batch_tuples())
    assert len(seen) == 200 and not sc.has_more_rows()
    with pytest.raises(StopIteration):
        sc.next_batch()
    batches = list(t.scanner().xbatches())
    assert sum(len(b) for b in batches) == 200
    batch = t.scanner().add_predicate(t["key"] == 3).next_batch()
    assert len(batch) == 1 and batch[0] == (3, "name003", 1.5) and list(batch) == [batch[0]]
    assert batch.to_arrow().num_rows == 1
    assert len(list(t.scanner().add_predicate(t["key"] < 3))) == 3
    with pytest.raises(ProgrammingError, match="already open"):
        sc.add_predicate(t["key"] > 1)
    with pytest.raises(ProgrammingError, match="positive"):
        t.scanner().set_limit(0)
    with pytest.raises(ProgrammingError, match="twice"):
        t.scanner().set_projected_column_names(["key", "key"])
    with pytest.raises(ProgrammingError, match="out of range"):
        t.scanner().set_projected_column_indexes([3])


@ON_BOTH
def test_to_arrow(filled: kudu.Table) -> None:
    t = filled
    sc = t.scanner().set_projected_column_names(["key", "name"]).add_predicate(t["key"] < 10)
    got = sc.to_arrow()
    assert got.schema.names == ["key", "name"] and got.schema.field("key").type == pa.int64()
    assert sorted(got.column("key").to_pylist()) == list(range(10))
    assert t.scanner().add_predicate(t["key"] > 1000).to_arrow().num_rows == 0
    with t.scanner() as sc2:
        sc2.open()
    assert not sc2.has_more_rows()


@pytest.mark.skipif(importlib.util.find_spec("pandas") is not None, reason="pandas installed")
def test_to_pandas_without_pandas(filled: kudu.Table) -> None:
    with pytest.raises(kudu.MissingDependencyError, match="pip install pandas") as info:
        filled.scanner().to_pandas()
    assert isinstance(info.value, ImportError) and isinstance(info.value, Error)


@ON_BOTH
def test_snapshot_reads_time_travel(table: kudu.Table) -> None:
    client = table.client
    session = client.new_session(kudu.FLUSH_AUTO_SYNC)
    session.apply(table.new_insert({"key": 1, "name": "v1"}))
    t_insert = client.latest_observed_timestamp()
    session.apply(table.new_update({"key": 1, "name": "v2"}))
    t_update = client.latest_observed_timestamp()
    session.apply(table.new_delete({"key": 1}))
    t_delete = client.latest_observed_timestamp()
    assert t_insert < t_update < t_delete

    def at(ts: Any) -> list[tuple[Any, ...]]:
        return table.scanner().set_snapshot(ts).read_all_tuples()

    # Embedded, the observed timestamp is each write's own HybridTime; a cluster's is
    # its server's clock when it answered (as Kudu propagates it), at or after the write.
    exact = not client.is_cluster
    if exact:
        assert at(t_insert - 1) == []  # HybridTime arithmetic stays a HybridTime
    assert at(t_insert) == [(1, "v1", None)]
    if exact:
        assert at(t_update - 1) == [(1, "v1", None)]
    assert at(t_update) == [(1, "v2", None)]
    assert at(t_delete) == []
    assert table.scanner().read_all_tuples() == []
    # microseconds and datetimes read the writes made before that instant
    assert at(t_update.physical_micros + 1) in ([(1, "v2", None)], [])
    after_update = t_update.to_datetime() + datetime.timedelta(microseconds=1)
    if exact and after_update < t_delete.to_datetime():
        assert at(after_update) == [(1, "v2", None)]
    start = t_insert.to_datetime().replace(tzinfo=None)  # naive datetimes are UTC
    if exact:
        assert at(start) == []
        text = start.strftime("%Y-%m-%d %H:%M:%S.%f")
        assert table.scanner().set_snapshot(text, "%Y-%m-%d %H:%M:%S.%f").read_all_tuples() == []
    else:
        before = t_insert.to_datetime() - datetime.timedelta(seconds=30)
        assert at(before) == []
    # the snapshot read mode without a timestamp reads now
    sc = table.scanner().set_read_mode(kudu.READ_AT_SNAPSHOT)
    assert sc.read_all_tuples() == [] and sc.snapshot_timestamp is not None
    with pytest.raises(ProgrammingError, match="future"):
        table.scanner().set_snapshot(kudu.HybridTime.from_micros(2**53)).open()
    # raw HybridTimes (WriteResult.timestamp) go through set_snapshot_raw
    res = table.insert_arrow({"key": [5]})
    raw = table.scanner().set_snapshot_raw(res.timestamp).read_all_tuples()
    assert raw == [(5, None, None)]
    assert table.scanner().set_snapshot_raw(res.timestamp - 1).read_all_tuples() == []
    with pytest.raises(ProgrammingError, match="set_snapshot_raw"):
        table.scanner().set_snapshot(res.timestamp)
    # a string without a format is ISO 8601 (kudu-python's default format)
    iso = (start if exact else before.replace(tzinfo=None)).isoformat()
    assert table.scanner().set_snapshot(iso).read_all_tuples() == []
    with pytest.raises(ProgrammingError, match="invalid timestamp"):
        table.scanner().set_snapshot("yesterday")
    with pytest.raises(ProgrammingError, match="epoch"):
        table.scanner().set_snapshot(-5)


@ON_BOTH
def test_latest_observed_timestamp_is_monotonic(table: kudu.Table) -> None:
    client = table.client
    seen = [client.latest_observed_timestamp()]
    assert seen[0] == 0 or client.is_cluster  # a cluster's: the master's answers too
    session = client.new_session()
    for i in range(3):
        session.apply(table.new_insert({"key": i}))
        session.flush()
        seen.append(client.latest_observed_timestamp())
        table.scanner().read_all_tuples()
        seen.append(client.latest_observed_timestamp())
        table.insert_arrow({"key": [100 + i]})
        seen.append(client.latest_observed_timestamp())
        # an old snapshot scan does not move it back
        table.scanner().set_snapshot(seen[1]).read_all_tuples()
        seen.append(client.latest_observed_timestamp())
    assert all(a <= b for a, b in itertools.pairwise(seen))
    assert seen[-1] > seen[1]
    assert isinstance(seen[-1], kudu.HybridTime) and repr(seen[-1]).startswith("HybridTime(P:")
    # a scan at the latest observed timestamp sees every write of this client
    assert len(table.scanner().set_snapshot(seen[-1]).read_all_tuples()) == 6
    ryw = table.scanner().set_read_mode("read_your_writes")
    assert len(ryw.read_all_tuples()) == 6


@ON_BOTH
def test_scan_tokens(filled: kudu.Table, client: kudu.Client) -> None:
    t = filled
    builder = (
        t.scan_token_builder()
        .set_projected_column_names(["key", "value"])
        .add_predicate(t["key"] < 50)
    )
    tokens = builder.build()
    assert len(tokens) == 2  # one per hash tablet
    got = []
    for tok in tokens:
        got += tok.into_kudu_scanner().read_all_tuples()
    assert sorted(r[0] for r in got) == list(range(50))
    # serialized tokens run at the planned snapshot, after later writes
    blobs = [tok.serialize() for tok in tokens]
    t.delete_arrow({"key": list(range(50))})
    again = []
    for blob in blobs:
        again += client.deserialize_token_into_scanner(blob).read_all_tuples()
    assert sorted(again) == sorted(got)
    with pytest.raises(ProgrammingError, match="cannot be reconfigured"):
        client.deserialize_token_into_scanner(blobs[0]).add_predicate(t["key"] > 1)
    with pytest.raises(ProgrammingError, match="not a scan token"):
        client.deserialize_token_into_scanner(b"junk")
