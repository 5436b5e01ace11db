"""Table owner and comment, table statistics, soft delete and recall, and range
partitions with their own hash schemas, through the client."""

from __future__ import annotations

from pathlib import Path

import pytest

import kudusql
import kudusql.client as kudu
import kudusql.storage.tables.database as database_module
from kudusql.common.errors import ProgrammingError
from tests.client.conftest import ON_BOTH, simple_schema


def fill(t: kudu.Table, n: int) -> None:
    t.insert_arrow({"key": list(range(n)), "name": [f"n{i}" for i in range(n)]})


# -- owner and comment --------------------------------------------------------------------------
def test_owner_and_comment_are_set_altered_and_kept(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    with kudu.connect(path) as c:
        t = c.create_table("t", simple_schema(), owner="alice", comment="first")
        assert (t.owner, t.comment) == ("alice", "first")
        t = c.new_table_alterer(t).set_owner("bob").set_comment("second").alter()
        assert (c.table("t").owner, c.table("t").comment) == ("bob", "second")
        with pytest.raises(TypeError, match="a table owner is a str"):
            c.new_table_alterer(t).set_owner(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="a table comment is a str"):
            c.new_table_alterer(t).set_comment(None)  # type: ignore[arg-type]
        with pytest.raises(kudu.KuduInvalidArgument, match="non-empty"):
            c.new_table_alterer(t).set_owner("").alter()
        c.new_table_alterer(t).set_comment("").alter()
    with kudu.connect(path) as c:  # the catalog keeps them
        assert (c.table("t").owner, c.table("t").comment) == ("bob", "")


# -- statistics ---------------------------------------------------------------------------------
@ON_BOTH
def test_table_statistics_count_live_rows_and_disk_bytes(client: kudu.Client) -> None:
    t = client.create_table(
        "t", simple_schema(), kudu.Partitioning().add_hash_partitions(["key"], 2)
    )
    empty = client.get_table_statistics("t")
    assert empty.live_row_count == 0 and empty.on_disk_size >= 0
    assert (empty.on_disk_size_limit, empty.live_row_count_limit) == (-1, -1)
    fill(t, 20)
    s = client.new_session()
    s.apply(t.new_delete({"key": 3}))
    s.flush()
    t.core.flush()
    stats = client.get_table_statistics("t")
    assert stats.live_row_count == 19 and stats.on_disk_size > empty.on_disk_size
    text = repr(stats)
    for line in ("on disk size:", "live row count: 19", "on disk size limit: N/A"):
        assert line in text
    with pytest.raises(kudu.KuduNotFound):
        client.get_table_statistics("missing")


# -- soft delete --------------------------------------------------------------------------------
def test_soft_deleted_table_is_hidden_kept_and_recalled(client: kudu.Client) -> None:
    keep = client.create_table("keep", simple_schema())
    t = client.create_table("t", simple_schema())
    fill(t, 10)
    client.soft_delete_table("t", 600)
    assert client.list_tables() == ["keep"]
    assert client.list_soft_deleted_tables() == ["t"]
    assert client.list_soft_deleted_tables("x") == []
    assert client.table_exists("t")  # as in Kudu: it still exists
    # reads and writes of an open handle go on
    fill_more = {"key": [10], "name": ["ten"]}
    t.insert_arrow(fill_more)
    assert t.count_rows() == 11 and client.table("t").count_rows() == 11
    # it may not be altered, soft-deleted again, or replaced by a new table
    with pytest.raises(
        kudu.KuduInvalidArgument, match="soft_deleted table t should not be altered"
    ):
        client.new_table_alterer(t).rename("u").alter()
    with pytest.raises(kudu.KuduInvalidArgument, match="should not be soft deleted again"):
        client.soft_delete_table("t", 600)
    with pytest.raises(kudu.KuduAlreadyPresent, match=f"table t already exists with id {t.id}"):
        client.create_table("t", simple_schema())
    # recalled, under its own name or a new one
    client.recall_table(t.id)
    assert client.list_tables() == ["keep", "t"] and client.list_soft_deleted_tables() == []
    client.delete_table("t", reserve_seconds=60)
    recalled = client.recall_table(t.id, "u")
    assert recalled.name == "u" and recalled.count_rows() == 11
    assert client.list_tables() == ["keep", "u"]
    with pytest.raises(kudu.KuduNotFound, match="can't recall"):
        client.recall_table(t.id)  # not soft-deleted
    with pytest.raises(kudu.KuduNotFound, match="can't recall"):
        client.recall_table(keep.id + 100)


def test_soft_delete_without_reserve_drops_and_delete_table_forces(client: kudu.Client) -> None:
    client.create_table("t", simple_schema())
    client.soft_delete_table("t")
    assert not client.table_exists("t") and client.list_soft_deleted_tables() == []
    client.create_table("t", simple_schema())
    client.soft_delete_table("t", 600)
    client.delete_table("t")  # a soft-deleted table is deleted at once
    assert not client.table_exists("t") and client.list_soft_deleted_tables() == []
    client.create_table("t", simple_schema())  # the name is free again
    with pytest.raises(kudu.KuduNotFound):
        client.soft_delete_table("missing", 5)


def test_expired_soft_deleted_table_is_purged(
    client: kudu.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = client.create_table("t", simple_schema())
    fill(t, 3)
    client.soft_delete_table("t", 30)
    now = database_module.wall_micros()
    monkeypatch.setattr(database_module, "wall_micros", lambda: now + 31_000_000)
    assert client.list_soft_deleted_tables() == []  # hidden once expired
    with pytest.raises(kudu.KuduNotFound, match="the table does not exist"):
        client.table("t")
    with pytest.raises(kudu.KuduNotFound, match="can't recall"):
        client.recall_table(t.id)
    client.create_table("t", simple_schema())  # purged: the name is free
    assert client.table("t").count_rows() == 0
    assert client.list_tables() == ["t"]


def test_sql_does_not_see_a_soft_deleted_table(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    with kudu.connect(path) as c:
        fill(c.create_table("t", simple_schema()), 2)
        c.soft_delete_table("t", 3600)
    con = kudusql.connect(path)
    try:
        cur = con.cursor()
        cur.execute("SHOW TABLES")
        assert cur.fetchall() == []
        with pytest.raises(ProgrammingError, match="table 't' does not exist"):
            cur.execute("SELECT * FROM t")
        with pytest.raises(ProgrammingError, match="soft-deleted"):
            cur.execute("CREATE TABLE t (k BIGINT PRIMARY KEY) STORED AS KUDU")
    finally:
        con.close()
    with kudu.connect(path) as c:  # kept across the reopen, and recallable
        (tid,) = [c.table("t").id]
        c.recall_table(tid)
        assert c.table("t").count_rows() == 2


# -- custom hash schemas per range ---------------------------------------------------------------
def test_range_partitions_with_their_own_hash_schema(client: kudu.Client) -> None:
    p = kudu.RangePartition({"key": 0}, {"key": 100}).add_hash_partitions(["key"], 5)
    t = client.create_table(
        "t",
        simple_schema(),
        kudu.Partitioning()
        .set_range_partition_columns(["key"])
        .add_hash_partitions(["key"], 2)
        .add_range_partition({"key": -100}, {"key": 0})
        .add_custom_range_partition(p),
    )
    assert t.num_tablets == 7 and len(t.scan_token_builder().build()) == 7
    fill(t, 100)
    extra = kudu.RangePartition({"key": 100}, {"key": 200}).add_hash_partitions(["key"], 3, 8)
    t = client.new_table_alterer(t).add_custom_range_partition(extra).alter()
    assert t.num_tablets == 10
    t.insert_arrow({"key": [150]})
    assert t.count_rows() == 101
    with pytest.raises(TypeError, match="RangePartition"):
        client.new_table_alterer(t).add_custom_range_partition(({"key": 1}, {"key": 2}))  # type: ignore[arg-type]


def test_auto_incrementing_column_alterations_follow_kudu(client: kudu.Client) -> None:
    b = kudu.schema_builder()
    b.add_column("key", kudu.int32, nullable=False).non_unique_primary_key()
    t = client.create_table("t", b.build())
    col = kudu.Schema.get_auto_incrementing_column_name()
    cases = [
        (lambda a: a.drop_column(col), f"can't drop column: {col}"),
        (lambda a: a.add_column(col, "int64"), f"can't add a column with reserved name: {col}"),
        (lambda a: a.alter_column(col, "x"), f"can't change name for column: {col}"),
        (lambda a: a.alter_column(col).remove_default(), "can't change remove default"),
    ]
    for change, message in cases:
        alterer = client.new_table_alterer(t)
        change(alterer)
        with pytest.raises(kudu.KuduInvalidArgument, match=message):
            alterer.alter()
    alterer = client.new_table_alterer(t)
    alterer.alter_column(col).comment("row number")
    alterer.alter()
    assert client.table("t").schema[col].comment == "row number"


def test_sql_and_the_client_share_owner_and_comment(tmp_path: Path) -> None:
    """SQL's COMMENT / ``comment`` property and SET OWNER USER are the values the client
    reads and sets (one comment, not a property beside a field)."""
    path = str(tmp_path / "db")
    with kudusql.connect(path) as conn:
        cur = conn.cursor()
        cur.execute(
            "CREATE TABLE t (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2 "
            "COMMENT 'from sql'"
        )
        cur.execute("ALTER TABLE t SET OWNER USER alice")
    client = kudu.connect(path)
    t = client.table("t")
    assert (t.owner, t.comment) == ("alice", "from sql")
    client.new_table_alterer(t).set_comment("from the client").alter()
    client.close()
    with kudusql.connect(path) as conn:
        cur = conn.cursor()
        cur.execute("SHOW CREATE TABLE t")
        assert "COMMENT 'from the client'" in cur.fetchone()[0]


def test_a_client_and_a_dbapi_connection_in_one_process_share_the_database(
    tmp_path: Path,
) -> None:
    """One registry of open databases serves both: the directory's writer lock does not
    refuse the second, and each sees the other's writes at once."""
    path = str(tmp_path / "db")
    with kudusql.connect(path) as conn:
        cur = conn.cursor()
        cur.execute(
            "CREATE TABLE t (id INT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2"
        )
        client = kudu.connect(path)
        try:
            t = client.table("t")
            session = client.new_session()
            session.apply(t.new_insert({"id": 1, "v": "from the client"}))
            session.flush()
            cur.execute("SELECT v FROM t")
            assert cur.fetchall() == [("from the client",)]
            cur.execute("INSERT INTO t VALUES (2, 'from sql')")
            assert sorted(r[0] for r in t.scanner().open().read_all_tuples()) == [1, 2]
        finally:
            client.close()
        cur.execute("SELECT count(*) FROM t")  # the connection's use outlives the client's
        assert cur.fetchone() == (2,)
