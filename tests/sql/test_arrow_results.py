"""Results reach Arrow consumers as Arrow: the PyCapsule stream interface, record-batch
streams and DuckDB's method names, with no tuple built on the way."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import kudusql
from kudusql.common.errors import ProgrammingError
from kudusql.dbapi.connection import Cursor


@pytest.fixture
def cur(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cursor]:
    def no_tuples(self: Cursor, n: int) -> list[tuple[object, ...]]:
        raise AssertionError("a result was read as tuples")

    with kudusql.connect(":memory:", maintenance=False) as conn:
        c = conn.cursor()
        c.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, s STRING) PARTITION BY HASH (id) PARTITIONS 2"
        )
        c.execute("INSERT INTO t SELECT i, 'v' || i FROM range(0, 2500) r(i)")
        monkeypatch.setattr(Cursor, "_take", no_tuples)
        yield c


def test_pa_table_reads_the_cursor_through_the_stream_interface(cur: Cursor) -> None:
    cur.execute("SELECT id, s FROM t ORDER BY id")
    t = pa.table(cur)
    assert t.num_rows == 2500
    assert t.column("id").to_pylist()[:3] == [0, 1, 2]
    assert t.schema.names == ["id", "s"]


def test_duckdb_reads_the_cursor_as_arrow(cur: Cursor) -> None:
    cur.execute("SELECT id FROM t WHERE id < 10")
    reader = cur.fetch_record_batch(4)
    batches = list(reader)
    assert [b.num_rows for b in batches] == [4, 4, 2]
    cur.execute("SELECT id, s FROM t")
    rel = duckdb.from_arrow(cur.fetch_record_batch())
    assert rel.aggregate("count(*), max(id)").fetchall() == [(2500, 2499)]


def test_duckdb_names_and_what_is_left_of_a_result(cur: Cursor) -> None:
    cur.execute("SELECT id FROM t ORDER BY id LIMIT 5")
    assert cur.arrow().column("id").to_pylist() == [0, 1, 2, 3, 4]
    assert cur.to_arrow_table().num_rows == 0  # the result is consumed
    cur.execute("SELECT 1 AS one")
    assert cur.to_arrow_table().to_pylist() == [{"one": 1}]
    with pytest.raises(ProgrammingError, match="at least 1"):
        cur.fetch_record_batch(0)


def test_fetchnumpy_masks_nulls(cur: Cursor) -> None:
    cur.execute(
        "SELECT id, CASE WHEN id % 2 = 0 THEN id END AS even FROM t WHERE id < 4 ORDER BY id"
    )
    cols = cur.fetchnumpy()
    assert cols["id"].tolist() == [0, 1, 2, 3]
    assert not isinstance(cols["id"], np.ma.MaskedArray)
    assert cols["even"].mask.tolist() == [False, True, False, True]
    assert cols["even"].compressed().tolist() == [0, 2]
