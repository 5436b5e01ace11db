"""The row path for small write batches (``row_write``, ``Tablet.write_rows``, the compact
WAL record and the MemRowSet's pending tuples): the same results, errors, visibility,
durability and recovery as the batch path."""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from kudusql.common.errors import CorruptionError, IntegrityError
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet import log_record
from kudusql.storage.tablet.log_record import CompactBatch, decode_record, encode_rows
from kudusql.storage.tablet.memrowset import MemRowSet
from kudusql.storage.tablet.row_write import ArrowRows, RowLayout
from kudusql.storage.tablet.tablet import Tablet
from kudusql.storage.wal import read_log

SCHEMA = Schema.build(
    [
        ColumnSchema("k", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("s", DataType.parse("STRING")),
        ColumnSchema("f", DataType.parse("FLOAT")),
        ColumnSchema("d", DataType.parse("DATE")),
        ColumnSchema("ts", DataType.parse("TIMESTAMP")),
        ColumnSchema("m", DataType.parse("DECIMAL(9,2)")),
        ColumnSchema("v", DataType.parse("VARCHAR(3)")),
        ColumnSchema("b", DataType.parse("BINARY")),
        ColumnSchema("ok", DataType.parse("BOOL")),
        ColumnSchema("dflt", DataType.parse("INT32"), nullable=False, default=7),
    ],
    ["k"],
)
NAMES = ["k", "s", "f", "d", "ts", "m", "v", "b", "ok"]
OPTS = TabletOptions(sync=False, rows_per_page=8, file_grace_s=0)


def row(k: int, **kw: Any) -> list[Any]:
    base: dict[str, Any] = {
        "k": k,
        "s": f"s{k}",
        "f": 1.1,
        "d": datetime.date(2024, 2, 29),
        "ts": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901),
        "m": decimal.Decimal("12.34"),
        "v": "abcdef",
        "b": b"\x00\xff",
        "ok": True,
    }
    base.update(kw)
    return [base[n] for n in NAMES]


def scan(t: Tablet, snapshot: int | None = None) -> list[dict[str, Any]]:
    out = t.scan(snapshot=snapshot).read_all().to_pylist()
    return sorted(out, key=lambda r: r["k"])


def arrow(rows: list[list[Any]]) -> pa.Table:
    sch = SCHEMA.arrow_schema(NAMES)
    return pa.table([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(sch)], sch)


@pytest.fixture
def tablets(tmp_path: Any) -> Any:
    """A tablet written through the row path and one written through the batch path."""
    a = Tablet.create(str(tmp_path / "rows"), SCHEMA, OPTS)
    b = Tablet.create(str(tmp_path / "batch"), SCHEMA, OPTS)
    yield a, b
    a.close()
    b.close()


def batch_path(t: Tablet, rows: list[list[Any]], op: str) -> Any:
    """The batch path: an operation column keeps a write off the row path."""
    data = arrow(rows)
    return t.write(data.append_column("op", pa.array([op] * len(rows))), op_column="op")


def same_result(a: Any, b: Any) -> None:
    assert (a.applied, a.ignored) == (b.applied, b.ignored)
    assert [(e.index, e.op, e.key, e.status, e.message) for e in a.errors] == [
        (e.index, e.op, e.key, e.status, e.message) for e in b.errors
    ]


def test_values_stored_as_the_batch_path_stores_them(tablets: Any) -> None:
    a, b = tablets
    rows = [row(1), row(2, s=None, f=None, m=None, v="é✓xyz", b=None, ok=None), row(3, f=3)]
    same_result(a.write_rows(NAMES, rows, "INSERT"), batch_path(b, rows, "INSERT"))
    a.insert(arrow([row(4)]))  # Arrow values of the table's types: the row path too
    batch_path(b, [row(4)], "INSERT")
    assert len(a._rowsets.mrs._p_rows) == 4  # the row path took them all
    for k in (1, 2, 3, 4):  # point lookups read the pending tuples
        assert a.lookup((k,)) == b.lookup((k,))
    assert scan(a) == scan(b)
    assert scan(a)[0]["v"] == "abc" and scan(a)[0]["dflt"] == 7  # VARCHAR cut; default
    assert scan(a)[0]["f"] == pa.scalar(1.1, pa.float32()).as_py()


def test_single_rows_mixed_with_bulk_batches_flushes_and_reopen(tmp_path: Any) -> None:
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, OPTS)
    expect = {}
    for k in range(0, 40):
        if k % 10 == 0:  # a large batch between single rows
            big = [row(1000 + 100 * k + j) for j in range(20)]
            assert t.insert(arrow(big)).applied == 20
            expect.update({r[0]: r for r in big})
        r = row(k)
        res = t.write_rows(NAMES, [r], "INSERT") if k % 2 else t.insert(arrow([r]))
        assert res.applied == 1 and not res.errors
        expect[k] = r
        if k == 25:
            t.flush()
    assert [x["k"] for x in scan(t)] == sorted(expect)
    t.close()
    t = Tablet.open(str(tmp_path / "t"), OPTS)
    assert [x["k"] for x in scan(t)] == sorted(expect)
    assert t.lookup((39,))["s"] == "s39"  # type: ignore[index]
    t.close()


def test_duplicates_in_every_store(tablets: Any) -> None:
    a, b = tablets
    for t in (a, b):
        t.write_rows(NAMES, [row(1)], "INSERT") if t is a else batch_path(t, [row(1)], "INSERT")
    a.flush()
    b.flush()
    for k in (2, 3):
        a.write_rows(NAMES, [row(k)], "INSERT")
        batch_path(b, [row(k)], "INSERT")
    a.scan().read_all()  # k=2, 3 become Arrow, the next rows stay pending
    a.write_rows(NAMES, [row(4)], "INSERT")
    batch_path(b, [row(4)], "INSERT")
    dup = [row(1, s="x"), row(3, s="x"), row(4, s="x"), row(5, s="x")]
    same_result(a.write_rows(NAMES, dup, "INSERT"), batch_path(b, dup, "INSERT"))
    ra = a.write_rows(NAMES, [row(4)], "INSERT")
    assert ra.errors[0].status == "AlreadyPresent" and ra.errors[0].key == (4,)
    same_result(a.write_rows(NAMES, dup, "INSERT_IGNORE"), batch_path(b, dup, "INSERT_IGNORE"))
    with pytest.raises(IntegrityError, match="key already present"):
        a.write_rows(NAMES, [row(6), row(1)], "INSERT", atomic=True)
    assert a.lookup((6,)) is None
    # UPSERT of present keys, a repeated key and bad values go to the batch path
    same_result(a.write_rows(NAMES, dup, "UPSERT"), batch_path(b, dup, "UPSERT"))
    rep = [row(7), row(7, s="again")]
    same_result(a.write_rows(NAMES, rep, "INSERT"), batch_path(b, rep, "INSERT"))
    assert scan(a) == scan(b)


def test_reinsert_over_a_deleted_row(tablets: Any) -> None:
    a, _ = tablets
    a.write_rows(NAMES, [row(1)], "INSERT")
    a.delete(pa.table({"k": pa.array([1], pa.int64())}))
    assert a.write_rows(NAMES, [row(1, s="back")], "INSERT").applied == 1
    assert [x["s"] for x in scan(a)] == ["back"]


def test_bad_values_report_the_batch_paths_errors(tablets: Any) -> None:
    a, b = tablets
    names = ["k", "dflt", "s"]
    rows: list[list[Any]] = [[1, 2**40, "x"], [None, 1, "y"], [3, None, "z"], [4, 1, "ok"]]
    ra = a.write_rows(names, rows, "INSERT")
    sch = pa.schema([("k", pa.int64()), ("dflt", pa.int64()), ("s", pa.string())])
    data = pa.table([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(sch)], sch)
    rb = b.write(data.append_column("op", pa.array(["INSERT"] * 4)), op_column="op")
    same_result(ra, rb)
    assert [e.status for e in ra.errors] == ["InvalidArgument"] * 3
    assert scan(a) == scan(b)


def test_mvcc_snapshot_before_a_row_does_not_see_it(tablets: Any) -> None:
    a, _ = tablets
    r1 = a.write_rows(NAMES, [row(1)], "INSERT")
    r2 = a.insert(arrow([row(2)]))
    assert [x["k"] for x in scan(a, r1.timestamp)] == []
    assert [x["k"] for x in scan(a, r2.timestamp)] == [1]
    assert [x["k"] for x in scan(a, r2.timestamp + 1)] == [1, 2]


def test_crash_replays_row_path_records(tmp_path: Any) -> None:
    path = str(tmp_path / "t")
    t = Tablet.create(path, SCHEMA, OPTS)
    t.write_rows(NAMES, [row(1), row(2, s=None)], "INSERT")
    t.flush()
    stamps = [t.write_rows(NAMES, [row(k)], "INSERT").timestamp for k in range(3, 8)]
    t.write_rows(NAMES, [row(3)], "INSERT_IGNORE")
    t.delete(pa.table({"k": pa.array([4], pa.int64())}))
    t.write_rows(NAMES, [row(4, s="again")], "INSERT")  # reinsert: the batch path
    before = scan(t)
    at = scan(t, stamps[2] + 1)
    t.abandon()
    t = Tablet.open(path, OPTS)
    assert t.replay_stats.rows_replayed > 0
    assert scan(t) == before
    assert scan(t, stamps[2] + 1) == at
    assert t.write_rows(NAMES, [row(5)], "INSERT").errors[0].status == "AlreadyPresent"
    t.abandon()
    ro = Tablet.open(path, OPTS, read_only=True)
    assert scan(ro) == before
    ro.close()


def test_compact_record_round_trip_and_old_records_still_read(tmp_path: Any) -> None:
    lay = RowLayout(SCHEMA, NAMES)
    values = lay.convert(row(5, s="ü", m=decimal.Decimal("-0.05")))
    assert values is not None
    nulls = lay.convert(row(6, s=None, f=None, d=None, ts=None, m=None, v=None, b=None, ok=None))
    assert nulls is not None
    payload = encode_rows(
        9,
        100,
        3,
        lay.col_ids,
        [(0, 1, 1, 4, -1, -1, False, b"k5", values), (2, 1, 1, 4, -1, -1, False, b"k6", nulls)],
    )
    got = decode_record(payload, "wal", 0)
    assert isinstance(got, CompactBatch)
    assert (got.ts, got.seq_base, got.n, got.col_ids) == (9, 100, 3, lay.col_ids)
    assert got.rows[0][8] == values and got.rows[1][8] == nulls
    db = got.to_decided({c.id: c.type.arrow_type() for c in SCHEMA.columns})
    assert db.row.tolist() == [0, 2] and db.keys.to_pylist() == [b"k5", b"k6"]
    # a batch of more rows than the row path takes is logged as an Arrow IPC record
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, OPTS)
    t.insert(arrow([row(k) for k in range(20)]))
    t.write_rows(NAMES, [row(99)], "INSERT")
    t.abandon()
    recs = list(read_log(str(tmp_path / "t" / "wal")))
    kinds = [type(decode_record(r.payload, r.segment, r.offset)).__name__ for r in recs]
    assert kinds == ["DecidedBatch", "CompactBatch"]
    t = Tablet.open(str(tmp_path / "t"), OPTS)
    assert len(scan(t)) == 21
    t.close()


@pytest.mark.parametrize("cut", [1, 30, 60])
def test_undecodable_compact_record_is_corruption(cut: int) -> None:
    lay = RowLayout(SCHEMA, NAMES)
    values = lay.convert(row(5))
    payload = encode_rows(1, 1, 1, lay.col_ids, [(0, 1, 1, 1, -1, -1, False, b"k", values)])
    with pytest.raises(CorruptionError, match="undecodable WAL record"):
        decode_record(payload[: len(payload) - cut], "seg", 7)
    bad_tag = payload[:-1] + bytes([99])  # the last value is a bool tag
    with pytest.raises(CorruptionError):
        decode_record(bad_tag, "seg", 7)


def test_memrowset_pending_tail_becomes_arrow(monkeypatch: Any) -> None:
    monkeypatch.setattr(MemRowSet, "PENDING_ROWS", 4)
    m = MemRowSet(1, SCHEMA)
    lay = RowLayout(SCHEMA, NAMES)
    for k in range(10):
        v = lay.convert(row(k))
        assert v is not None
        key = lay.key(v)
        assert key is not None
        m.insert_rows([lay.full(v)], [key], 100 + k, [k], 10)
        assert m.lookup_one(key) == k
    assert len(m._rows) == 2 and len(m._p_rows) == 2  # two chunks of 4, two pending
    v = m.view()
    assert v.rows.column("k").to_pylist() == list(range(10))
    assert v.insert_ts.tolist() == [100 + k for k in range(10)]
    assert m.row_at(9, SCHEMA.columns)["s"] == "s9"


def test_arrow_rows_decode_like_to_pylist() -> None:
    sch = SCHEMA.arrow_schema(["k", "s", "f", "d", "ts", "b"])
    rows = [row(k) for k in range(5)]
    cols = {n: pa.array([r[NAMES.index(n)] for r in rows], sch.field(n).type) for n in sch.names}
    big = pa.RecordBatch.from_pydict(cols, schema=sch)
    reader = ArrowRows(sch)
    expect = [tuple(r.values()) for r in big.to_pylist()]
    assert reader.rows(big) == expect
    assert reader.rows(big.slice(2, 2)) == expect[2:4]  # sliced: offsets not 0
    with_null = pa.RecordBatch.from_pydict(
        {**cols, "s": pa.array([None, "a", None, "b", "c"])}, schema=sch
    )
    assert reader.rows(with_null) == [tuple(r.values()) for r in with_null.to_pylist()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.integers(0, 6),
            st.one_of(st.none(), st.text(max_size=5)),
            st.one_of(st.none(), st.floats(allow_nan=False, width=32)),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["INSERT", "INSERT_IGNORE", "UPSERT", "UPSERT_IGNORE"]),
)
def test_row_path_equals_batch_path(tmp_path_factory: Any, rows: list[Any], op: str) -> None:
    d = tmp_path_factory.mktemp("eq")
    a = Tablet.create(str(d / "a"), SCHEMA, OPTS)
    b = Tablet.create(str(d / "b"), SCHEMA, OPTS)
    try:
        seed = [row(1), row(3)]
        a.write_rows(NAMES, seed, "INSERT")
        batch_path(b, seed, "INSERT")
        names = ["k", "s", "f"]
        rs = [list(r) for r in rows]
        sch = SCHEMA.arrow_schema(names)
        data = pa.table([pa.array([r[i] for r in rs], f.type) for i, f in enumerate(sch)], sch)
        same_result(
            a.write(data, op),
            b.write(data.append_column("op", pa.array([op] * len(rs))), op_column="op"),
        )
        same_result(
            a.write_rows(names, rs, op),
            b.write(data.append_column("op", pa.array([op] * len(rs))), op_column="op"),
        )
        assert scan(a) == scan(b)
    finally:
        a.close()
        b.close()


def test_payload_header_marks_the_layout() -> None:
    """Schema length 0 marks the compact layout (an Arrow schema is never empty)."""
    head = struct.Struct("<QQII")
    lay = RowLayout(SCHEMA, ["k", "dflt"])
    payload = encode_rows(1, 2, 1, lay.col_ids, [(0, 1, 1, 1, -1, -1, False, b"k", (1, 2))])
    assert head.unpack_from(payload)[3] == 0
    assert log_record._HEAD.size == head.size


def test_arrow_values_python_cannot_hold_take_the_batch_path(tablets: Any) -> None:
    """Nanosecond timestamps: to_pylist fails, the batch path casts or rejects them."""
    a, b = tablets
    for ns in (1_000_000_000_000, 1_000_000_000_001):
        data = pa.table({"k": pa.array([ns], pa.int64()), "ts": pa.array([ns], pa.timestamp("ns"))})
        ra = a.write(data, "INSERT")
        rb = b.write(data.append_column("op", pa.array(["INSERT"])), op_column="op")
        same_result(ra, rb)
    assert scan(a) == scan(b)
    assert len(scan(a)) == 1 and scan(a)[0]["ts"] == datetime.datetime(1970, 1, 1, 0, 16, 40)


def test_one_row_record_encoder_writes_encode_rows_bytes() -> None:
    """``RowLayout.encode_record`` (the one-row writes' record) and the generated value
    encoder give exactly the compact layout's bytes."""
    lay = RowLayout(SCHEMA, NAMES)
    for r in (
        row(5, s="ü€", m=decimal.Decimal("-0.05")),
        row(6, s=None, f=None, d=None, ts=None, m=None, v=None, b=None, ok=None),
        row(-(2**63), s="", ok=False),
    ):
        values = lay.convert(r)
        assert values is not None
        key = lay.key(values)
        assert key is not None
        got = lay.encode_record(2**63, 7, 1, 0, 1, 1, 3, -1, -1, False, key, values)
        want = encode_rows(2**63, 7, 1, lay.col_ids, [(0, 1, 1, 3, -1, -1, False, key, values)])
        assert got == want
        plain = encode_rows(
            2**63, 7, 1, lay.col_ids, [(0, 1, 1, 3, -1, -1, False, key, values)], lay.encode_values
        )
        generic = encode_rows(  # no generated value encoder: dispatch on each value's type
            2**63, 7, 1, lay.col_ids, [(0, 1, 1, 3, -1, -1, False, key, values)], None
        )
        assert plain == generic
        dec = decode_record(got, "wal", 0)
        assert isinstance(dec, CompactBatch) and dec.rows[0][8] == values


def test_memrowset_insert_row_equals_insert_rows(monkeypatch: Any) -> None:
    monkeypatch.setattr(MemRowSet, "PENDING_ROWS", 4)
    lay = RowLayout(SCHEMA, NAMES)
    one, many = MemRowSet(1, SCHEMA), MemRowSet(1, SCHEMA)
    for k in range(10):
        v = lay.convert(row(k))
        assert v is not None
        key = lay.key(v)
        assert key is not None
        one.insert_row(lay.full(v), key, 100 + k, 50 + k, 10)
        many.insert_rows([lay.full(v)], [key], 100 + k, [50 + k], 10)
        assert one.lookup_one(key) == many.lookup_one(key) == k
    for attr in ("min_ts", "min_seq", "max_seq", "bytes", "num_slots"):
        assert getattr(one, attr) == getattr(many, attr)
    a, b = one.view(), many.view()
    assert a.rows.equals(b.rows) and a.keys.equals(b.keys)
    assert a.insert_ts.tolist() == b.insert_ts.tolist()
    assert a.insert_seq.tolist() == b.insert_seq.tolist()
    assert one.live_count() == 10
