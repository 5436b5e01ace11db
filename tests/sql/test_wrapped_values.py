"""Impala's wrapped row list, VALUES ((..), (..)), stores the same rows on the fast paths
and the general path, with literals, parameters and executemany, awkward values included."""

from __future__ import annotations

from typing import Any

import kudusql
from kudusql.common.errors import Error

DDL = "CREATE TABLE t (id INT PRIMARY KEY, v STRING, d DATE) PARTITION BY HASH (id) PARTITIONS 2"
STATEMENTS: list[tuple[str, Any]] = [
    ("INSERT INTO t VALUES ((1, 'a', '2020-01-02'), (2, NULL, NULL))", None),
    ("INSERT INTO t VALUES ((?, ?, ?))", ("3", "Mixed Case", "2021-02-03")),
    ("INSERT INTO t (d, id) VALUES (('2022-03-04', 4), (NULL, '5'))", None),
    ("INSERT INTO t VALUES ((99999999999, 'out of range', NULL))", None),
    ("INSERT INTO t VALUES ((1, 'dup', NULL), (6, 'ok', NULL))", None),
    ("UPSERT INTO t VALUES ((?, ?, ?), (?, ?, ?))", (2, "B", None, 7, "g", "2023-04-05")),
    ("INSERT INTO t VALUES ((8, 'x', 'not a date'))", None),
]


def _run(fast_paths: bool) -> list[Any]:
    seen: list[Any] = []
    with kudusql.connect(":memory:", fast_paths=fast_paths, maintenance=False) as conn:
        cur = conn.cursor()
        cur.execute(DDL)
        for sql, params in STATEMENTS:
            try:
                cur.execute(sql, params)
                seen.append((cur.rowcount, list(cur.warnings)))
            except Error as e:
                seen.append((type(e).__name__, str(e)))
        cur.executemany("INSERT INTO t VALUES ((?, ?, NULL))", [(9, "i"), ("10", "j")])
        cur.execute("SELECT * FROM t ORDER BY id")
        seen.append(cur.fetchall())
    return seen


def test_wrapped_values_agree_on_every_path() -> None:
    fast, general = _run(True), _run(False)
    assert fast == general
    ids = [row[0] for row in fast[-1]]
    assert ids == [1, 2, 3, 4, 5, 6, 7, 9, 10]
