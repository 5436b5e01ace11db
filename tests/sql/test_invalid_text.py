"""A Python string UTF-8 cannot hold (a lone surrogate) is refused with a clear error
wherever it enters: a key or a value, a parameter or a literal, on every path and in
both modes; nothing of the statement is stored. (A raw ``UnicodeEncodeError`` reached
users from the key encoding and from building a column.)"""

from __future__ import annotations

import pytest

from kudusql.common.errors import DataError, Error
from tests.support.targets import Target

BAD = "a\udc80b"


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("INSERT INTO t VALUES (?, 'v')", (BAD,)),
        ("INSERT INTO t VALUES ('k', ?)", (BAD,)),
        ("INSERT INTO t VALUES ('ok', 'v'), (?, 'w')", (BAD,)),
        ("UPSERT INTO t VALUES (?, 'v')", (BAD,)),
        ("SELECT * FROM t WHERE k = ?", (BAD,)),
        ("UPDATE t SET v = 'z' WHERE k = ?", (BAD,)),
        ("DELETE FROM t WHERE k = ?", (BAD,)),
        (f"UPDATE t SET v = 'z' WHERE k = '{BAD}'", ()),
    ],
)
def test_a_lone_surrogate_is_a_clear_error(target: Target, sql: str, params: tuple[str]) -> None:
    with target.connect() as conn:
        conn.execute(
            "CREATE TABLE t (k STRING PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 2"
        )
        conn.execute("INSERT INTO t VALUES ('x', 'y')")
        with pytest.raises(Error) as e:
            conn.execute(sql, params)
        assert not isinstance(e.value, UnicodeError)
        assert "UTF-8 cannot hold" in str(e.value), str(e.value)
        assert isinstance(e.value, DataError) or "bad primary key" in str(e.value)
        assert conn.execute("SELECT k, v FROM t").fetchall() == [("x", "y")]
