"""Results reach Arrow consumers as Arrow: the PyCapsule stream interface, record-batch
streams and DuckDB's method names, with no tuple built on the way."""

from __future__ import annotations

import sys
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


def test_pl_returns_a_polars_frame(cur: Cursor) -> None:
    pl = pytest.importorskip("polars")

    cur.execute("SELECT id, s FROM t WHERE id < 3 ORDER BY id")
    df = cur.pl()
    assert isinstance(df, pl.DataFrame)
    assert df.to_dict(as_series=False) == {"id": [0, 1, 2], "s": ["v0", "v1", "v2"]}
    cur.execute("SELECT count(*) AS n FROM t")
    lazy = cur.pl(lazy=True)
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect().item() == 2500


def test_pl_without_polars_says_what_to_install(
    cur: Cursor, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kudusql.common.errors import NotSupportedError

    monkeypatch.setitem(sys.modules, "polars", None)  # import polars raises ImportError
    cur.execute("SELECT 1 AS one")
    with pytest.raises(NotSupportedError, match="pip install polars"):
        cur.pl()


def test_polars_read_database_takes_the_arrow_path(cur: Cursor) -> None:
    pl = pytest.importorskip("polars")

    conn = cur.connection
    df = pl.read_database("SELECT id, s FROM t WHERE id < 1000 ORDER BY id", conn)
    assert df.shape == (1000, 2)
    assert df["id"].to_list()[:3] == [0, 1, 2]
    assert df["s"][999] == "v999"
    # A cursor works too, and batches come as Arrow batches of exactly batch_size rows.
    frames = list(
        pl.read_database(
            "SELECT id FROM t ORDER BY id", conn.cursor(), iter_batches=True, batch_size=1000
        )
    )
    assert [f.height for f in frames] == [1000, 1000, 500]
    assert pl.concat(frames)["id"].to_list() == list(range(2500))


def test_duckdb_reads_a_cursor_by_its_variable_name(cur: Cursor) -> None:
    cur.execute("SELECT id, s FROM t")
    cursor_arrow = cur  # noqa: F841 (DuckDB's replacement scan finds it by name)
    assert duckdb.sql("SELECT count(*), sum(id) FROM cursor_arrow").fetchall() == [
        (2500, sum(range(2500)))
    ]
    cur.execute("SELECT id FROM t WHERE id < 5")
    assert sorted(duckdb.from_arrow(cur).fetchall()) == [(i,) for i in range(5)]


def test_repr_html_shows_the_next_rows_without_taking_them(cur: Cursor) -> None:
    cur.execute("SELECT id, CASE WHEN id = 1 THEN NULL ELSE '<b>&' END AS h FROM t ORDER BY id")
    page = cur._repr_html_()
    assert page is not None
    assert "<th>id</th><th>h</th>" in page
    assert "<td>0</td><td>&lt;b&gt;&amp;</td>" in page
    assert "<td>1</td><td>NULL</td>" in page
    assert page.count("<tr>") == 1 + 10  # the header and HTML_ROWS rows
    assert "2500 rows x 2 columns, the first 10 shown" in page
    assert cur.fetch_arrow_table().num_rows == 2500  # nothing was taken
    assert "0 rows x 2 columns" in (cur._repr_html_() or "")
    cur.execute("CREATE TABLE u (k INT PRIMARY KEY) PARTITION BY HASH (k) PARTITIONS 2")
    assert cur._repr_html_() is None  # no result set: Jupyter shows the repr
