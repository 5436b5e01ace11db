"""UPDATE and DELETE by full primary key through a cluster connection: the key-write
fast path (a blind UPDATE_IGNORE / DELETE_IGNORE at the tablet server, and on a row
error the read at the ``exclusive()`` snapshot) gives what the general path gives on
the same cluster (the statement with a conjunct the fast path does not take, on a twin
table): rowcounts, errors, warnings and the stored rows."""

from __future__ import annotations

import kudusql
from kudusql.cluster.launcher import MiniCluster
from kudusql.engine.fastpath import KeyWrite
from tests.sql.test_fast_path_differential import Statement, _outcome

DDL = (
    "CREATE TABLE {t} (id BIGINT, name STRING, qty INT NOT NULL, note STRING, "
    "PRIMARY KEY (id, name)) PARTITION BY HASH (id) PARTITIONS 3"
)
STATEMENTS = [
    Statement("INSERT INTO {t} VALUES (1, 'a', 5, 'x'), (2, 'b', 6, NULL), (3, 'c', 7, 'z')"),
    Statement("UPDATE {t} SET qty = ?, note = ? WHERE id = ? AND name = ?", [50, "y", 1, "a"]),
    Statement("UPDATE {t} SET QTY = 60 WHERE ID = 2 AND {t}.name = 'b'"),
    Statement("UPDATE {t} SET qty = ? WHERE id = ? AND name = ?", [1, 9, "absent"]),
    Statement("UPDATE {t} SET qty = NULL WHERE id = 3 AND name = 'c'"),
    # A row error on an absent key: nothing, as the general path (no error).
    Statement("UPDATE {t} SET qty = NULL WHERE id = 99 AND name = 'absent'"),
    Statement("UPDATE {t} SET qty = ? WHERE id = ? AND name = ?", ["7x", 3, "c"]),
    Statement("UPDATE {t} SET name = 'q' WHERE id = 3 AND name = 'c'"),
    # Awkward values: out of range, strings for numbers, a NULL or string key, case.
    Statement("UPDATE {t} SET qty = ? WHERE id = ? AND name = ?", [2**40, 1, "a"]),
    Statement("UPDATE {t} SET qty = ? WHERE id = ? AND name = ?", ["12", 1, "a"]),
    Statement("UPDATE {t} SET qty = ? WHERE id = ? AND name = ?", [13, "1", "a"]),
    Statement("UPDATE {t} SET qty = ? WHERE id = ? AND name = ?", [14, None, "a"]),
    Statement("UPDATE {t} SET qty = ? WHERE id = ? AND name = ?", [15, 1, "A"]),
    Statement("DELETE FROM {t} WHERE id = ? AND name = ?", [2**70, "a"]),
    Statement("DELETE FROM {t} WHERE id = :i AND name = :n", {"i": 2, "n": "b"}),
    Statement("DELETE FROM {t} WHERE id = :i AND name = :n", {"i": 2, "n": "b"}),
    Statement("UPDATE {t} SET note = ? WHERE id = ? AND name = ?", ["gone", 2, "b"]),
    # A cluster table refuses atomic statements, on either path.
    Statement("SET abort_on_error = true"),
    Statement("UPDATE {t} SET qty = NULL WHERE id = 3 AND name = 'c'"),
    Statement("UPDATE {t} SET qty = NULL WHERE id = 99 AND name = 'absent'"),
    Statement("UPDATE {t} SET qty = 8 WHERE id = 99 AND name = 'absent'"),
    Statement("UPDATE {t} SET qty = 9 WHERE id = 1 AND name = 'a'"),
    Statement("DELETE FROM {t} WHERE id = 1 AND name = 'a'"),
    Statement("DELETE FROM {t} WHERE id = 99 AND name = 'absent'"),
]


def _as(s: Statement, table: str, general: bool) -> Statement:
    sql = s.sql.replace("{t}", table)
    if general:
        sql = sql.replace(" WHERE ", " WHERE 1 = 1 AND ")
    return Statement(sql, s.params)


def test_key_writes_on_a_cluster_match_its_general_path(mini_cluster: MiniCluster) -> None:
    url = f"kudusql://{mini_cluster.master_address}"
    with kudusql.connect(url, secret=mini_cluster.secret) as conn:
        conn.execute(DDL.replace("{t}", "kw_fast"))
        conn.execute(DDL.replace("{t}", "kw_general"))
        taken = 0
        for s in STATEMENTS:
            fast, general = _as(s, "kw_fast", False), _as(s, "kw_general", True)
            got = _outcome(conn, fast)
            want = _outcome(conn, general)
            assert repr(got).replace("kw_fast", "T") == repr(want).replace("kw_general", "T"), s
            entry = conn.session.statements.get(fast.sql)
            taken += entry is not None and isinstance(entry[1], KeyWrite)
            stored = [
                conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                for t in ("kw_fast", "kw_general")
            ]
            assert stored[0] == stored[1], s
        assert taken >= 8
        # and the fast path answers (an absent key: nothing written)
        probe = "UPDATE kw_fast SET qty = ? WHERE id = ? AND name = ?"
        entry = conn.session.statements.get(probe)
        assert entry is not None and isinstance(entry[1], KeyWrite)
        res = entry[1].run(conn.session, [1, 9, "absent"])
        assert res is not None and res.rowcount == 0 and res.timestamp is not None
        conn.execute("DROP TABLE kw_fast")
        conn.execute("DROP TABLE kw_general")
