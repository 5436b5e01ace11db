"""numpy scalars as parameters (what pandas and numpy hand out) bind as the Python values
they hold, on the fast paths and the general path alike."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pytest

import kudusql
from kudusql.common.errors import InterfaceError

DDL = (
    "CREATE TABLE t (id BIGINT PRIMARY KEY, f DOUBLE, b BOOLEAN, r FLOAT, ts TIMESTAMP, "
    "s STRING) PARTITION BY HASH (id) PARTITIONS 2"
)


def _run(fast_paths: bool) -> list[Any]:
    out: list[Any] = []
    with kudusql.connect(":memory:", fast_paths=fast_paths, maintenance=False) as conn:
        cur = conn.cursor()
        cur.execute(DDL)
        cur.execute(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)",
            (
                np.int64(1),
                np.float64(1.5),
                np.bool_(True),
                np.float32(0.25),
                np.datetime64("2020-01-02T03:04:05.123456789"),
                np.str_("a"),
            ),
        )
        cur.execute(
            "INSERT INTO t SELECT ?, ?, ?, ?, ?, ?",
            (
                np.int32(2),
                np.float32(2.5),
                np.bool_(False),
                np.float64(3),
                np.datetime64("NaT"),
                None,
            ),
        )
        cur.executemany(
            "INSERT INTO t (id, b) VALUES (?, ?)",
            [(np.uint8(7), np.bool_(True)), (np.int16(8), np.bool_(False))],
        )
        cur.execute("SELECT id, f, b, r, ts, s FROM t WHERE id = ?", (np.int64(1),))
        out.append(cur.fetchall())
        cur.execute("SELECT ? + 1, ?, ?", {"a": np.int64(1), "b": np.bool_(True), "c": 4}.values())
        out.append(cur.fetchall())
        cur.execute("SELECT :x * 2, :y", {"x": np.int8(21), "y": np.float16(0.5)})
        out.append(cur.fetchall())
        cur.execute("SELECT * FROM t ORDER BY id")
        out.append(cur.fetchall())
    return out


def test_numpy_scalars_bind_as_their_values_on_every_path() -> None:
    fast, general = _run(True), _run(False)
    assert fast == general
    stamp = datetime.datetime(2020, 1, 2, 3, 4, 5, 123456)
    assert fast[0] == [(1, 1.5, True, 0.25, stamp, "a")]
    assert fast[1] == [(2, True, 4)]
    assert fast[2] == [(42, 0.5)]
    assert fast[3] == [
        (1, 1.5, True, 0.25, stamp, "a"),
        (2, 2.5, False, 3.0, None, None),
        (7, None, True, None, None, None),
        (8, None, False, None, None, None),
    ]
    assert all(type(row[0]) is int for row in fast[3])


@pytest.mark.parametrize("fast_paths", [True, False])
def test_a_numpy_value_with_no_sql_meaning_is_refused_by_name(fast_paths: bool) -> None:
    with kudusql.connect(":memory:", fast_paths=fast_paths, maintenance=False) as conn:
        cur = conn.cursor()
        with pytest.raises(InterfaceError, match="timedelta64"):
            cur.execute("SELECT ?", (np.timedelta64(1, "D"),))
