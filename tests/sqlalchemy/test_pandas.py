"""pandas through the dialect: DataFrame.to_sql creates a Kudu table keyed by the frame's
index, appends and replaces; read_sql_table and read_sql read it back; no warnings (the
suite turns them into errors)."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import exc

pd = pytest.importorskip("pandas")


def _frame() -> Any:
    return pd.DataFrame(
        {
            "id": np.array([3, 1, 2], dtype="int64"),
            "name": ["c", None, "a\\b'"],
            "score": [1.5, np.nan, -2.25],
            "flag": [True, False, True],
            "small": np.array([1, -2, 3], dtype="int16"),
            "medium": np.array([10, 20, 30], dtype="int32"),
            "at": pd.to_datetime(
                ["2024-01-01 10:00:00", None, "2024-03-01 00:00:01.5"], format="ISO8601"
            ),
        }
    ).set_index("id")


def test_reflection_and_pandas_round_trip(engine: sa.Engine) -> None:
    """The issue's done-when: a frame written with to_sql is a Kudu table keyed by its
    index, reflection sees the frame's columns and key, and read_sql_table gives the
    frame back."""
    df = _frame()
    assert df.to_sql("frames", engine) == 3
    i = sa.inspect(engine)
    assert i.get_pk_constraint("frames")["constrained_columns"] == ["id"]
    cols = {c["name"]: c for c in i.get_columns("frames")}
    assert list(cols) == ["id", "name", "score", "flag", "small", "medium", "at"]
    types = {n: c["type"].compile(engine.dialect) for n, c in cols.items()}
    assert types == {
        "id": "BIGINT",
        "name": "STRING",
        "score": "DOUBLE",
        "flag": "BOOLEAN",
        "small": "SMALLINT",
        "medium": "INT",
        "at": "TIMESTAMP",
    }
    assert cols["id"]["nullable"] is False
    back = pd.read_sql_table("frames", engine, index_col="id").sort_index()
    expected = df.sort_index()
    pd.testing.assert_frame_equal(back, expected, check_dtype=False)
    assert back["small"].tolist() == [-2, 3, 1] and back["at"].iloc[0] is pd.NaT


def test_read_sql_with_parameters(engine: sa.Engine) -> None:
    _frame().to_sql("frames", engine)
    q = pd.read_sql("SELECT id, name FROM frames WHERE id >= ? ORDER BY id", engine, params=(2,))
    assert q.to_dict("list") == {"id": [2, 3], "name": ["a\\b'", "c"]}
    q = pd.read_sql(
        sa.text("SELECT count(*) AS n FROM frames WHERE score < :s"), engine, params={"s": 0}
    )
    assert q["n"].tolist() == [1]
    t = sa.Table("frames", sa.MetaData(), autoload_with=engine)
    q = pd.read_sql(sa.select(t.c.id).where(t.c.flag).order_by(t.c.id), engine)
    assert q["id"].tolist() == [2, 3]


def test_a_multiindex_is_a_composite_key(engine: sa.Engine) -> None:
    df = pd.DataFrame({"region": ["eu", "eu", "us"], "day": [1, 2, 1], "v": [1.0, 2.0, 3.0]})
    df.set_index(["region", "day"]).to_sql("by_region", engine)
    i = sa.inspect(engine)
    assert i.get_pk_constraint("by_region")["constrained_columns"] == ["region", "day"]
    back = pd.read_sql("SELECT * FROM by_region ORDER BY region, day", engine)
    assert back.to_dict("list") == df.to_dict("list")


def test_default_index_becomes_the_key(engine: sa.Engine) -> None:
    pd.DataFrame({"v": ["x", "y"]}).to_sql("plain", engine)
    assert sa.inspect(engine).get_pk_constraint("plain")["constrained_columns"] == ["index"]
    assert pd.read_sql_table("plain", engine)["v"].tolist() == ["x", "y"]


def test_no_index_no_key_names_the_remedy(engine: sa.Engine) -> None:
    df = pd.DataFrame({"id": [1], "v": ["x"]})
    with pytest.raises(exc.CompileError, match=r"need a primary key.*set_index"):
        df.to_sql("nokey", engine, index=False)
    assert not sa.inspect(engine).has_table("nokey")


def test_append_and_replace(engine: sa.Engine) -> None:
    df = _frame()
    df.to_sql("frames", engine)
    more = pd.DataFrame(
        {
            "name": ["d"],
            "score": [0.0],
            "flag": [False],
            "small": [4],
            "medium": [40],
            "at": [None],
        },
        index=pd.Index([4], name="id"),
    )
    assert more.to_sql("frames", engine, if_exists="append") == 1
    # An existing table takes rows without a key in the frame's index too.
    more.reset_index().assign(id=5).to_sql("frames", engine, if_exists="append", index=False)
    ids = pd.read_sql("SELECT id FROM frames ORDER BY id", engine)["id"].tolist()
    assert ids == [1, 2, 3, 4, 5]
    # Appending a key again fails the write, and nothing of it is stored.
    with pytest.raises(Exception, match="key already present"):
        more.to_sql("frames", engine, if_exists="append")
    with pytest.raises(ValueError, match="already exists"):
        more.to_sql("frames", engine)
    more.to_sql("frames", engine, if_exists="replace")
    assert pd.read_sql_table("frames", engine)["id"].tolist() == [4]


def test_chunks_and_multi_row_inserts(engine: sa.Engine) -> None:
    n = 2500
    df = pd.DataFrame({"v": np.arange(n, dtype="float64")}, index=pd.Index(range(n), name="k"))
    assert df.to_sql("big", engine, chunksize=1000) == n
    df2 = df.set_axis(df.index + n)
    assert df2.to_sql("big", engine, if_exists="append", method="multi", chunksize=300) == n
    got = pd.read_sql("SELECT count(*) AS n, sum(v) AS s FROM big", engine)
    assert got.iloc[0].tolist() == [2 * n, 2 * float(np.arange(n).sum())]


def test_a_url_string_works_where_pandas_takes_a_connection(url: str) -> None:
    """pandas builds (and disposes) the engine itself from a URL string; a raw kudusql
    connection is not one pandas can use (it takes any other DB-API object for sqlite3)."""
    pd.DataFrame({"v": [1, 2]}, index=pd.Index([1, 2], name="k")).to_sql("u", url)
    assert pd.read_sql("SELECT sum(v) AS s FROM u", url)["s"].tolist() == [3]
    assert pd.read_sql_table("u", url)["k"].tolist() == [1, 2]


EARLY = "1400-01-01" if int(pd.__version__.split(".")[0]) >= 3 else "1700-01-01"


def test_timestamps_and_dates_round_trip(engine: sa.Engine) -> None:
    df = pd.DataFrame(
        {
            "d": [datetime.date(2024, 2, 29), None],
            # pandas 3 keeps microseconds, so 1400 fits; pandas 2 holds nanoseconds from 1677.
            "ts": pd.to_datetime(["2024-02-29 23:59:59.999999", EARLY], format="ISO8601"),
        },
        index=pd.Index([1, 2], name="k"),
    )
    df.to_sql("when", engine, dtype={"d": sa.Date()})
    assert sa.inspect(engine).get_columns("when")[1]["type"].compile(engine.dialect) == "DATE"
    back = pd.read_sql_table("when", engine, index_col="k")
    assert back["d"].tolist()[0] == pd.Timestamp("2024-02-29")  # pandas reads DATE so
    assert back["ts"].tolist() == df["ts"].tolist()
