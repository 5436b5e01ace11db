"""``Table.write_rows``: a few rows of Python values routed by their key values and
written through the tablets' row path, with the results ``Table.write`` gives for the
same rows as Arrow (row errors mapped back to the caller's indices, one timestamp)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.errors import DataError, IntegrityError
from kudusql.common.options import TabletOptions
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds
from kudusql.storage.tables.table import Table
from tests.support.tablets import schema

OPTS = TabletOptions(sync=False, rows_per_page=64, history_max_age_s=3600)
SCHEMA = schema(("id", "INT64"), ("name", "STRING"), ("v", "INT32"), key=["id"])
NAMES = ["id", "name", "v"]


def make(db: Database, name: str, shape: str) -> Table:
    if shape == "hash":
        ps = PartitionSchema.create(SCHEMA, [HashDimension(("id",), 3)])
    else:
        ps = PartitionSchema.create(
            SCHEMA, [], ["id"], [RangeBounds((0,), (10,)), RangeBounds((20,), (30,))]
        )
    return db.create_table(name, SCHEMA, ps)


def arrow(rows: list[list[Any]]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "name": pa.array([r[1] for r in rows], pa.string()),
            "v": pa.array([r[2] for r in rows], pa.int32()),
        }
    )


def errors(res: Any) -> list[tuple[Any, ...]]:
    return [(e.index, e.op, e.key, e.status, e.message) for e in res.errors]


@pytest.fixture
def db(tmp_path: Path) -> Any:
    d = Database(str(tmp_path / "db"), OPTS, maintenance=False)
    yield d
    d.close()


@pytest.mark.parametrize("shape", ["hash", "range"])
def test_write_rows_equals_write(db: Database, shape: str) -> None:
    a, b = make(db, "a", shape), make(db, "b", shape)
    batches: list[tuple[str, list[list[Any]]]] = [
        ("INSERT", [[1, "x", 1], [2, "y", 2], [25, "z", 3]]),
        ("INSERT", [[2, "dup", 0], [3, None, 4], [15, "gap", 5], [26, "w", 6]]),
        ("INSERT_IGNORE", [[1, "again", 0], [4, "new", 7]]),
        ("UPSERT", [[1, "up", 9], [5, "ins", 10]]),
        ("INSERT", [[6, "big", 2**40], [None, "nokey", 1], [7, "ok", 1]]),
    ]
    for op, rows in batches:
        ra = a.write_rows(NAMES, rows, op)
        rb = b.write(arrow(rows) if None not in [r[0] for r in rows] else _loose(rows), op)
        assert (ra.applied, ra.ignored, errors(ra)) == (rb.applied, rb.ignored, errors(rb))
    assert a.scan(ordered=True).read_all() == b.scan(ordered=True).read_all()


def _loose(rows: list[list[Any]]) -> pa.Table:
    """Rows with values an Arrow column of the table's type cannot hold, as the SQL
    layer builds them (typed where possible, else inferred)."""
    cols = {}
    for i, (n, t) in enumerate([("id", pa.int64()), ("name", pa.string()), ("v", pa.int32())]):
        vals = [r[i] for r in rows]
        try:
            cols[n] = pa.array(vals, t)
        except (pa.ArrowInvalid, OverflowError):
            cols[n] = pa.array(vals)
    return pa.table(cols)


def test_write_rows_atomic(db: Database) -> None:
    t = make(db, "t", "hash")
    t.write_rows(NAMES, [[1, "x", 1]], "INSERT")
    with pytest.raises(IntegrityError, match="key already present"):
        t.write_rows(NAMES, [[1, "x", 1]], "INSERT", atomic=True)
    with pytest.raises(IntegrityError):  # several tablets: checked before any is written
        t.write_rows(
            NAMES, [[2, "a", 1], [3, "b", 1], [4, "c", 1], [1, "x", 1]], "INSERT", atomic=True
        )
    assert [r["id"] for r in t.scan(ordered=True).read_all().to_pylist()] == [1]
    r = make(db, "r", "range")
    with pytest.raises(DataError, match="No tablet covering"):
        r.write_rows(NAMES, [[15, "gap", 1]], "INSERT", atomic=True)
    res = t.write_rows(NAMES, [[2, "a", 1], [3, "b", 1]], "INSERT", atomic=True)
    assert res.applied == 2


def test_write_rows_one_timestamp_across_tablets(db: Database) -> None:
    t = make(db, "t", "hash")
    res = t.write_rows(NAMES, [[i, f"n{i}", i] for i in range(8)], "INSERT")
    assert res.applied == 8
    assert sum(1 for x in t.tablets() if x.count_rows()) > 1
    assert t.count_rows(res.timestamp) == 0
    assert t.count_rows(res.timestamp + 1) == 8
