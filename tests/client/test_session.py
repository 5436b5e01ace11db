"""Write operations and sessions: every operation kind in every flush mode, pending
errors mapped back to the operation objects, the mutation buffer, Arrow bulk writes."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import kudusql.client as kudu
from kudusql.common.errors import DataError, IntegrityError, OperationalError, ProgrammingError
from tests.client.conftest import ON_BOTH


def rows(table: kudu.Table) -> list[tuple[Any, ...]]:
    return sorted(table.scanner().read_all_tuples())


def errors_of(session: kudu.Session) -> list[tuple[str, Any]]:
    errors, overflowed = session.get_pending_errors()
    assert not overflowed
    return [(e.status, e.failed_op()) for e in errors]


# -- manual flush ------------------------------------------------------------------------------
@ON_BOTH
def test_manual_session_every_op_kind_and_pending_errors(table: kudu.Table) -> None:
    client = table.client
    session = client.new_session()  # manual by default
    assert session.flush_mode == kudu.FLUSH_MANUAL
    for i in range(6):
        session.apply(table.new_insert({"key": i, "name": f"n{i}", "value": float(i)}))
    assert session.count_buffered_operations() == 6
    assert rows(table) == []  # nothing written before flush
    session.flush()
    assert not session.has_pending_operations()
    assert len(rows(table)) == 6

    dup = table.new_insert({"key": 1, "name": "again"})
    missing_update = table.new_update({"key": 500, "name": "x"})
    uncovered = table.new_insert({"key": 5000, "name": "far"})
    missing_delete = table.new_delete({"key": 600})
    ok_ops = [
        table.new_insert_ignore({"key": 2, "name": "ignored"}),
        table.new_insert_ignore({"key": 10, "name": "new"}),
        table.new_upsert({"key": 3, "name": "up3"}),
        table.new_upsert({"key": 11, "name": "up11", "value": 1.5}),
        table.new_upsert_ignore({"key": 12, "name": "up12"}),
        table.new_update({"key": 4, "value": 40.0}),
        table.new_update_ignore({"key": 700, "value": 1.0}),
        table.new_delete({"key": 0}),
        table.new_delete_ignore({"key": 800}),
    ]
    for op in [dup, *ok_ops[:3], missing_update, *ok_ops[3:6], uncovered, *ok_ops[6:]]:
        session.apply(op)
    session.apply(missing_delete)
    with pytest.raises(IntegrityError, match="4 write operation\\(s\\) failed"):
        session.flush()
    # The errors stay pending, in apply order, each with its operation object.
    assert session.count_pending_errors() == 4
    errors, overflowed = session.get_pending_errors()
    assert not overflowed
    assert [(e.status, e.failed_op()) for e in errors] == [
        ("AlreadyPresent", dup),
        ("NotFound", missing_update),
        ("NotFound", uncovered),
        ("NotFound", missing_delete),
    ]
    assert "No tablet covering" in errors[2].message
    assert errors[0].key == (1,) and not errors[0].was_possibly_successful()
    assert repr(errors[0]) == "KuduError('Already present: key already present')"
    assert "Insert('t': key=1, name='again')" in str(errors[0])
    assert session.get_pending_errors() == ([], False)
    assert rows(table) == [
        (1, "n1", 1.0),
        (2, "n2", 2.0),
        (3, "up3", 3.0),
        (4, "n4", 40.0),
        (5, "n5", 5.0),
        (10, "new", None),
        (11, "up11", 1.5),
        (12, "up12", None),
    ]
    session.flush()  # nothing new failed: no raise


def test_one_flush_is_one_timestamp_per_batch(table: kudu.Table) -> None:
    """Operations setting the same columns share one Arrow batch, mixed kinds included
    (an operation column), so they become visible at one timestamp."""
    client = table.client
    table.insert_arrow({"key": [1], "name": ["a"]})
    session = client.new_session()
    session.apply(table.new_insert({"key": 2, "name": "b"}))
    session.apply(table.new_update({"key": 1, "name": "a2"}))
    session.apply(table.new_upsert({"key": 3, "name": "c"}))
    session.apply(table.new_update({"key": 2, "name": "b2"}))  # same key again in the batch
    session.apply(table.new_delete({"key": 3, "name": "c"}))
    session.flush()
    ts = client.latest_observed_timestamp()
    before = table.scanner().set_snapshot(kudu.HybridTime(ts - 1)).read_all_tuples()
    assert sorted(before) == [(1, "a", None)]
    after = table.scanner().set_snapshot(ts).read_all_tuples()
    assert sorted(after) == [(1, "a2", None), (2, "b2", None)]


def test_operations_setting_different_columns_keep_unset_cells(table: kudu.Table) -> None:
    table.insert_arrow({"key": [1, 2], "name": ["a", "b"], "value": [1.0, 2.0]})
    session = table.client.new_session()
    session.apply(table.new_update({"key": 1, "name": "x"}))
    session.apply(table.new_update({"key": 2, "value": 9.0}))
    session.apply(table.new_upsert({"key": 1, "value": None}))
    session.apply(table.new_insert({"key": 3}))
    session.flush()
    assert rows(table) == [(1, "x", None), (2, "b", 9.0), (3, None, None)]


# -- auto flush sync ---------------------------------------------------------------------------
@ON_BOTH
def test_sync_session_writes_at_apply_and_raises(table: kudu.Table) -> None:
    session = table.client.new_session(flush_mode=kudu.FLUSH_AUTO_SYNC)
    session.apply(table.new_insert({"key": 1, "name": "a"}))
    assert rows(table) == [(1, "a", None)]  # no flush needed
    dup = table.new_insert({"key": 1, "name": "b"})
    with pytest.raises(IntegrityError, match="AlreadyPresent"):
        session.apply(dup)
    upd = table.new_update({"key": 2, "name": "x"})
    with pytest.raises(IntegrityError, match="key not found"):
        session.apply(upd)
    far = table.new_upsert({"key": 10_000})
    with pytest.raises(IntegrityError, match="No tablet covering"):
        session.apply(far)
    for op in (
        table.new_insert_ignore({"key": 1}),
        table.new_upsert({"key": 2, "name": "b"}),
        table.new_upsert_ignore({"key": 3}),
        table.new_update({"key": 2, "value": 2.0}),
        table.new_update_ignore({"key": 99, "value": 1.0}),
        table.new_delete({"key": 3}),
        table.new_delete_ignore({"key": 3}),
    ):
        session.apply(op)
    session.flush()  # a no-op; the errors were already raised
    assert errors_of(session) == [("AlreadyPresent", dup), ("NotFound", upd), ("NotFound", far)]
    assert rows(table) == [(1, "a", None), (2, "b", 2.0)]
    with pytest.raises(DataError, match="NOT NULL"):
        table.new_insert({"key": None})


# -- auto flush background -----------------------------------------------------------------------
def test_background_session_flushes_at_the_watermark(table: kudu.Table) -> None:
    session = table.client.new_session(
        "background",
        mutation_buffer_sz=2000,
        mutation_buffer_watermark=0.5,
        mutation_buffer_flush_interval=60_000,
    )
    op = table.new_insert({"key": 0, "name": "x"})
    per_op = op.estimated_bytes()
    session.apply(op)
    assert session.count_buffered_operations() == 1
    n = 1
    while session.has_pending_operations():
        session.apply(table.new_insert({"key": n, "name": "x"}))
        n += 1
    assert n == -(-1000 // per_op)  # flushed when half the buffer was used
    assert len(rows(table)) == n
    dup = table.new_insert({"key": 0, "name": "x"})
    session.apply(dup)  # buffered: no error yet
    assert session.count_pending_errors() == 0
    with pytest.raises(IntegrityError):
        session.flush()
    assert errors_of(session) == [("AlreadyPresent", dup)]


def test_background_session_close_flushes_and_reports(table: kudu.Table) -> None:
    session = table.client.new_session("background", mutation_buffer_flush_interval=60_000)
    dup = table.new_insert({"key": 0})
    session.apply(table.new_insert({"key": 0}))
    session.apply(dup)
    with pytest.raises(IntegrityError):
        session.close()
    assert errors_of(session) == [("AlreadyPresent", dup)]
    assert rows(table) == [(0, None, None)]


def test_background_session_interval(table: kudu.Table) -> None:
    session = table.client.new_session("background", mutation_buffer_flush_interval=0)
    session.apply(table.new_insert({"key": 1}))
    assert not session.has_pending_operations()  # interval 0: every apply flushes
    assert rows(table) == [(1, None, None)]


# -- buffer, error buffer and misuse -----------------------------------------------------------
def test_manual_buffer_limit(table: kudu.Table) -> None:
    session = table.client.new_session(mutation_buffer_sz=1000)
    n = 0
    with pytest.raises(OperationalError, match="not enough mutation buffer space"):
        while True:
            session.apply(table.new_insert({"key": n, "name": "x" * 10}))
            n += 1
    assert session.count_buffered_operations() == n
    assert 0 < session.buffer_bytes <= 1000
    rejected = table.new_insert({"key": n, "name": "x" * 10})
    with pytest.raises(OperationalError):
        session.apply(rejected)
    session.flush()
    session.apply(rejected)  # not applied when refused: it can be applied after a flush
    session.flush()
    assert len(rows(table)) == n + 1
    with pytest.raises(ProgrammingError, match="positive"):
        session.set_mutation_buffer_space(0)


def test_error_buffer_overflow(table: kudu.Table) -> None:
    session = table.client.new_session(error_buffer_size=2)
    for k in range(5):
        session.apply(table.new_update({"key": k, "name": "x"}))
    with pytest.raises(IntegrityError, match="5 write operation"):
        session.flush()
    errors, overflowed = session.get_pending_errors()
    assert overflowed and len(errors) == 2
    assert session.get_pending_errors() == ([], False)


def test_session_misuse(table: kudu.Table, client: kudu.Client) -> None:
    session = client.new_session()
    op = table.new_insert({"key": 1})
    session.apply(op)
    with pytest.raises(ProgrammingError, match="already applied"):
        session.apply(op)
    with pytest.raises(ProgrammingError, match="already applied"):
        op["name"] = "late"
    with pytest.raises(ProgrammingError, match="while operations are buffered"):
        session.set_flush_mode("sync")
    with pytest.raises(ProgrammingError, match="buffered operation"):
        session.close()
    session.flush()
    session.set_flush_mode(kudu.FLUSH_AUTO_SYNC)
    with pytest.raises(ProgrammingError, match="key column\\(s\\) 'key' not set"):
        session.apply(table.new_update({"name": "no key"}))
    with pytest.raises(ProgrammingError, match="write operation"):
        session.apply({"key": 1})  # type: ignore[arg-type]
    session.close()
    with pytest.raises(ProgrammingError, match="closed"):
        session.apply(table.new_insert({"key": 2}))


def test_session_context_manager_flushes(table: kudu.Table) -> None:
    with table.client.new_session() as session:
        session.apply(table.new_insert({"key": 1}))
    assert rows(table) == [(1, None, None)]


# -- values ------------------------------------------------------------------------------------
def test_cells_by_name_position_and_record(table: kudu.Table) -> None:
    op = table.new_insert()
    op["key"] = 7
    op[1] = "seven"
    op.set_field("value", 7)
    assert (
        op["name"] == "seven"
        and op[2] == 7.0
        and op.to_dict()
        == {
            "key": 7,
            "name": "seven",
            "value": 7.0,
        }
    )
    assert op.key == (7,) and "name" in op
    op.unset("value")
    assert op.to_dict() == {"key": 7, "name": "seven"}
    tup = table.new_upsert((8, "eight"))
    assert tup.to_dict() == {"key": 8, "name": "eight"}
    mixed = table.new_insert({0: 9, "name": "nine"})
    assert mixed.to_dict() == {"key": 9, "name": "nine"}
    with pytest.raises(ProgrammingError, match="unknown column 'nope' in table 't'"):
        op["nope"] = 1
    with pytest.raises(IndexError, match="Column index 3 is out of bounds"):
        op[3] = 1
    with pytest.raises(ProgrammingError, match="4 values"):
        table.new_insert((1, "a", 1.0, 2))
    with pytest.raises(ProgrammingError, match="not set"):
        _ = table.new_insert()["key"]
    session = table.client.new_session()
    for o in (op, tup, mixed):
        session.apply(o)
    session.flush()
    assert rows(table) == [(7, "seven", None), (8, "eight", None), (9, "nine", None)]


def test_every_type_round_trips_and_bad_values_fail_at_set(client: kudu.Client) -> None:
    b = kudu.schema_builder()
    b.add_column("k", kudu.int8, primary_key=True)
    b.add_column("i16", kudu.int16)
    b.add_column("i32", kudu.int32)
    b.add_column("b", kudu.bool)
    b.add_column("f", kudu.float)
    b.add_column("s", kudu.string)
    b.add_column("vc", kudu.varchar, length=3)
    b.add_column("bin", kudu.binary)
    b.add_column("ts", kudu.unixtime_micros)
    b.add_column("d", kudu.date)
    b.add_column("dec", kudu.decimal, precision=5, scale=2)
    t = client.create_table("types", b.build())
    when = datetime.datetime(2021, 5, 6, 7, 8, 9, 123456)  # naive: UTC
    when_utc = when.replace(tzinfo=datetime.UTC)  # scans give UTC-aware datetimes
    aware = datetime.datetime(
        2021, 5, 6, 9, 8, 9, 123456, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
    )
    session = client.new_session()
    session.apply(
        t.new_insert(
            {
                "k": 1,
                "i16": -300,
                "i32": 2**31 - 1,
                "b": True,
                "f": 1,
                "s": b"bytes ok",
                "vc": "truncated",
                "bin": b"\x00\x01",
                "ts": when,
                "d": datetime.date(2020, 2, 29),
                "dec": decimal.Decimal("123.45"),
            }
        )
    )
    session.apply(t.new_insert({"k": 2, "ts": aware, "d": 1, "dec": 7, "bin": bytearray(b"x")}))
    session.apply(t.new_insert({"k": 3, "ts": 1_000_001, "dec": "0.5", "f": 2.5}))
    session.flush()
    got = sorted(t.scanner().read_all_tuples())
    assert got[0] == (
        1,
        -300,
        2**31 - 1,
        True,
        1.0,
        "bytes ok",
        "tru",
        b"\x00\x01",
        when_utc,
        datetime.date(2020, 2, 29),
        decimal.Decimal("123.45"),
    )
    assert got[1][8] == when_utc and got[1][9] == datetime.date(1970, 1, 2)
    assert got[1][10] == decimal.Decimal("7.00") and got[1][7] == b"x"
    assert got[2][8] == datetime.datetime(1970, 1, 1, 0, 0, 1, 1, tzinfo=datetime.UTC)
    assert got[2][10] == decimal.Decimal("0.50") and got[2][4] == 2.5

    op = t.new_insert({"k": 4})
    for col, bad in [
        ("k", 128),
        ("k", "1"),
        ("i16", 1.5),
        ("b", 1),
        ("f", "x"),
        ("s", 5),
        ("s", b"\xff"),
        ("bin", "text"),
        ("ts", "2020-13-45"),
        ("d", datetime.datetime(2020, 1, 1)),
        ("dec", decimal.Decimal("1.234")),
        ("dec", 1000),
        ("dec", float("nan")),
        ("k", None),
    ]:
        with pytest.raises(DataError, match=f"column '{col}'"):
            op[col] = bad


def test_invalid_rows_found_at_flush_fail_alone(client: kudu.Client) -> None:
    b = kudu.schema_builder()
    b.add_column("k", kudu.int64, primary_key=True)
    b.add_column("req", kudu.string, nullable=False)
    b.add_column("s", kudu.string)
    t = client.create_table("t", b.build())
    session = client.new_session()
    missing_required = t.new_insert({"k": 1})
    too_big = t.new_insert({"k": 2, "req": "x" * 70_000})
    ok = t.new_insert({"k": 3, "req": "fine"})
    for op in (missing_required, too_big, ok):
        session.apply(op)
    with pytest.raises(DataError, match="required column 'req'"):
        session.flush()
    errors, _ = session.get_pending_errors()
    assert [(e.status, e.failed_op()) for e in errors] == [
        ("InvalidArgument", missing_required),
        ("InvalidArgument", too_big),
    ]
    assert "too large" in errors[1].message
    assert t.scanner().read_all_tuples() == [(3, "fine", None)]


# -- Arrow bulk ----------------------------------------------------------------------------------
@ON_BOTH
def test_table_arrow_writes(table: kudu.Table) -> None:
    data = pa.table({"key": pa.array(range(100), pa.int64()), "name": [str(i) for i in range(100)]})
    res = table.insert_arrow(data)
    assert (res.applied, res.errors) == (100, [])
    # a cluster's observed timestamp is its server's clock when it answered
    assert table.client.latest_observed_timestamp() >= res.timestamp
    if not table.client.is_cluster:
        assert table.client.latest_observed_timestamp() == res.timestamp
    res = table.insert_arrow(pa.table({"key": [5, 2000, 100]}))
    assert [(e.index, e.status) for e in res.errors] == [(0, "AlreadyPresent"), (1, "NotFound")]
    assert table.upsert_arrow({"key": [0, 200], "value": [0.5, 1.5]}).applied == 2
    assert table.update_arrow(pa.record_batch({"key": [1], "name": ["one"]})).applied == 1
    assert table.update_ignore_arrow({"key": [999], "name": ["x"]}).ignored == 1
    assert table.insert_ignore_arrow({"key": [1, 300]}).applied == 1
    assert table.upsert_ignore_arrow({"key": [301]}).applied == 1
    assert table.delete_arrow({"key": [2, 3]}).applied == 2
    assert table.delete_ignore_arrow({"key": [2, 4]}).applied == 1
    reader = pa.RecordBatchReader.from_batches(
        pa.schema([("key", pa.int64())]),
        [pa.record_batch({"key": [400, 401]}), pa.record_batch({"key": [402, 400]})],
    )
    res = table.insert_arrow(reader)
    assert res.applied == 3 and [(e.index, e.status) for e in res.errors] == [(3, "AlreadyPresent")]
    mixed = pa.table(
        {"key": [500, 500, 401], "op": ["insert", "update", "delete"], "name": ["a", "b", None]}
    )
    assert table.write_arrow(mixed, op_column="op").applied == 3
    assert table.count_rows() == 104
    got = dict((r[0], r[1]) for r in table.scanner().read_all_tuples())
    assert got[1] == "one" and got[500] == "b" and 401 not in got
    with pytest.raises(IntegrityError):
        table.insert_arrow({"key": [7, 8]}, atomic=True)
    with pytest.raises(ProgrammingError, match="pyarrow Table"):
        table.insert_arrow([1, 2])  # type: ignore[arg-type]


def test_session_apply_arrow_keeps_order_and_collects_errors(table: kudu.Table) -> None:
    session = table.client.new_session()
    first = table.new_insert({"key": 1, "name": "from op"})
    session.apply(first)
    res = session.apply_arrow(table, pa.table({"key": [1, 2], "name": ["arrow", "two"]}))
    # the buffered insert was flushed first, so the Arrow insert of key 1 failed
    assert res.applied == 1 and res.errors[0].index == 0
    res = session.apply_arrow(table, {"key": [2], "name": ["upserted"]}, "upsert")
    assert res.applied == 1
    errors, _ = session.get_pending_errors()
    assert [(e.status, e.row_index, e.key, e.failed_op()) for e in errors] == [
        ("AlreadyPresent", 0, (1,), None)
    ]
    assert "row 0 key=(1,)" in str(errors[0])
    session.flush()  # Arrow row errors were returned, not raised later
    assert rows(table) == [(1, "from op", None), (2, "upserted", None)]


def test_flush_after_ddl_reports_each_operation(client: kudu.Client, table: kudu.Table) -> None:
    session = client.new_session()
    table.insert_arrow({"key": [1]})
    stale = table.new_update({"key": 1, "value": 2.0})
    fine = table.new_insert({"key": 2})
    session.apply(stale)
    session.apply(fine)
    alterer = client.new_table_alterer(table)
    alterer.drop_column("value")
    alterer.alter()
    with pytest.raises(DataError, match="unknown column 'value'"):
        session.flush()
    assert errors_of(session) == [("InvalidArgument", stale)]
    assert rows(table) == [(1, None), (2, None)]

    gone = table.new_insert({"key": 3})
    session.apply(gone)
    client.delete_table("t")
    with pytest.raises(ProgrammingError, match=r"does not exist|dropped"):
        session.flush()
    errors, _ = session.get_pending_errors()
    assert [e.failed_op() for e in errors] == [gone]
    assert errors[0].error_class is ProgrammingError


def test_cells_arrow_rejects_fail_alone_at_flush(table: kudu.Table) -> None:
    """A cell that passes the checks made when it is set but that Arrow cannot convert
    (a str holding a lone surrogate) fails its own row at flush, not the batch."""
    session = table.client.new_session()
    bad = table.new_insert({"key": 1, "name": "\ud800"})
    session.apply(bad)
    session.apply(table.new_insert({"key": 2, "name": "ok"}))
    with pytest.raises(DataError, match="invalid value"):
        session.flush()
    assert errors_of(session) == [("InvalidArgument", bad)]
    assert rows(table) == [(2, "ok", None)]


def test_numpy_values(client: kudu.Client) -> None:
    b = kudu.schema_builder()
    b.add_column("k", kudu.int32, primary_key=True)
    b.add_column("ts", kudu.unixtime_micros)
    b.add_column("f", kudu.double)
    t = client.create_table("np", b.build())
    session = client.new_session()
    session.apply(
        t.new_insert(
            {"k": np.int64(1), "ts": np.datetime64("2020-01-01T00:00:01"), "f": np.float32(2)}
        )
    )
    session.apply(t.new_insert({"k": 2, "ts": np.datetime64("NaT")}))
    session.flush()
    assert sorted(t.scanner().read_all_tuples()) == [
        (1, datetime.datetime(2020, 1, 1, 0, 0, 1, tzinfo=datetime.UTC), 2.0),
        (2, None, None),
    ]
    with pytest.raises(DataError, match="finer than a microsecond"):
        t.new_insert({"k": 3, "ts": np.datetime64("2020-01-01T00:00:00.000000001")})
    with pytest.raises(DataError, match="out of range"):
        t.new_insert({"k": np.int64(2**40)})


def test_operations_of_another_client_are_refused(tmp_path: Any, table: kudu.Table) -> None:
    other = kudu.Client(table.client.database)
    session = other.new_session()
    with pytest.raises(ProgrammingError, match="another client"):
        session.apply(table.new_insert({"key": 1}))
    with pytest.raises(ProgrammingError, match="another client"):
        session.apply_arrow(table, {"key": [1]})
    mine = other.table("t")
    session.apply(mine.new_insert({"key": 1}))
    session.flush()
    assert other.latest_observed_timestamp() > table.client.latest_observed_timestamp()
