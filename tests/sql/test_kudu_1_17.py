"""Kudu 1.17 through SQL, beyond the golden files: SHOW HASH SCHEMA's column label
(Impala's), and the schema hooks DESCRIBE uses for a non-unique key."""

from __future__ import annotations

import kudusql
from kudusql.parser.names import TableName


def test_show_hash_schema_label_and_describe_hooks() -> None:
    with kudusql.connect(":memory:", maintenance=False, sync=False) as conn:
        cur = conn.cursor()
        cur.execute(
            "CREATE TABLE c (id INT, c2 INT, PRIMARY KEY (id, c2)) PARTITION BY HASH (id) "
            "PARTITIONS 3, RANGE (c2) (PARTITION 0 <= VALUES < 10 HASH (id, c2) PARTITIONS 2)"
        )
        cur.execute("SHOW HASH SCHEMA c")
        assert [d[0] for d in cur.description] == ["RANGE (c2) HASH SCHEMA"]
        assert cur.fetchall() == [("0 <= VALUES < 10 HASH(id,c2) PARTITIONS 2",)]
        cur.execute("CREATE TABLE nu (id INT NON UNIQUE PRIMARY KEY, v STRING)")
        cur.execute("DESCRIBE nu")
        rows = cur.fetchall()
        assert [(r[0], r[3], r[4]) for r in rows] == [
            ("id", True, False),
            ("auto_incrementing_id", True, False),
            ("v", False, None),
        ]
        schema = conn.session.table(TableName("nu")).schema
        assert not schema.key_unique
        assert schema.column("auto_incrementing_id").auto_incrementing
