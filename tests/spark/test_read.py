"""Spark reads of kudusql tables through ``format("kudusql")``: schema and types, filters
against Spark's own evaluation, snapshots, views, errors, and why the source takes no
filters (``kudusql.pushFilters`` is refused)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

import kudusql
from kudusql.common.hybrid_time import to_micros
from kudusql.spark.reader import pack_tokens
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.scan_token import ScanToken
from pyspark_kudusql import DefaultSource
from tests.spark.conftest import all_types_rows, kudusql_rows, make_db

N = 300
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_db(tmp_path_factory.mktemp("read") / "db", rows=N)


def load(spark: SparkSession, db: str, table: str = "t", **opts: str) -> DataFrame:
    r = spark.read.format("kudusql").option("kudu.master", db).option("kudu.table", table)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def reference(spark: SparkSession) -> DataFrame:
    """The same rows as a plain Spark DataFrame (Spark's own evaluation)."""
    data = all_types_rows(N)
    return spark.createDataFrame(list(zip(*data.to_pydict().values(), strict=True)), _schema(spark))


def _schema(spark: SparkSession) -> Any:
    from pyspark.sql.types import StructType

    return StructType.fromDDL(
        "id bigint, b boolean, i8 tinyint, i16 smallint, i32 int, f float, d double, "
        "dec decimal(12,2), s string, v string, bin binary, dt date, ts timestamp, n bigint"
    )


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def test_schema_maps_every_type(spark: SparkSession, db: str) -> None:
    df = load(spark, db)
    assert df.schema.simpleString() == (
        "struct<id:bigint,b:boolean,i8:tinyint,i16:smallint,i32:int,f:float,d:double,"
        "dec:decimal(12,2),s:string,v:string,bin:binary,dt:date,ts:timestamp,n:bigint>"
    )
    assert not df.schema["id"].nullable and not df.schema["n"].nullable
    assert df.schema["s"].nullable


def test_full_read_equals_the_stored_rows(spark: SparkSession, db: str) -> None:
    got = rows(load(spark, db))
    want = rows(reference(spark))
    assert len(got) == N
    assert got == want


def test_timestamps_are_utc_whatever_the_session_zone(spark: SparkSession, db: str) -> None:
    df = load(spark, db).filter("id = 1").selectExpr("CAST(ts AS STRING) AS t")
    assert df.collect()[0].t == "2024-02-29 12:00:01.000001"


FILTERS = [
    "id = 17",
    "id > 250",
    "id >= 250",
    "id < 5",
    "id <= 5",
    "id IN (3, 99, 150, 1000)",
    "s IS NULL",
    "s IS NOT NULL AND id < 20",
    "s LIKE 'name-001%'",
    "dec >= 1.50 AND dec < 3",
    "dt = DATE '2020-01-11'",
    "ts > TIMESTAMP '2024-02-29 12:04:00'",
    "v = 'v7'",
    "i8 < -90",
    "b = true AND i16 > 100",
    "bin = X'0A00FF'",
    "d > 100",  # floating point: stays with Spark
    "id = 5 OR id = 7",  # OR: stays with Spark
    "NOT (id > 3)",
]


@pytest.mark.parametrize("where", FILTERS)
def test_filters_match_spark(spark: SparkSession, db: str, where: str) -> None:
    got = load(spark, db).filter(where)
    assert rows(got) == rows(reference(spark).filter(where))


def _reader(db: str, **opts: str) -> Any:
    source = DefaultSource({"kudu.master": db, "kudu.table": "t", **opts})
    return source.reader(source.schema())


@pytest.mark.parametrize("spark_pushdown", ["false", "true"])
def test_a_reused_dataframe_and_view_answer_each_query(
    spark: SparkSession, db: str, spark_pushdown: str
) -> None:
    """A DataFrame or view queried with and then without a filter answers both, with
    Spark's filter pushdown for Python sources off or on (on, Spark asks the reader to
    take the filters; it takes none, so the plan Spark keeps is the whole table)."""
    spark.conf.set(PUSHDOWN_CONF, spark_pushdown)
    try:
        _query_twice(spark, db)
    finally:
        spark.conf.unset(PUSHDOWN_CONF)


def _query_twice(spark: SparkSession, db: str) -> None:
    df = load(spark, db)
    assert df.filter("id IN (5, 9)").count() == 2
    assert df.count() == N
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW tv USING kudusql "
        f"OPTIONS (`kudu.master` '{db}', `kudu.table` 't')"
    )
    assert spark.sql("SELECT COUNT(*) FROM tv WHERE id < 10").collect()[0][0] == 10
    assert spark.sql("SELECT COUNT(*) FROM tv").collect()[0][0] == N
    got = spark.sql("SELECT v, COUNT(*) c FROM tv WHERE v IS NOT NULL GROUP BY v ORDER BY v")
    want = kudusql_rows(db, "SELECT v, COUNT(*) c FROM t WHERE v IS NOT NULL GROUP BY v ORDER BY v")
    assert [tuple(r) for r in got.collect()] == want


def test_user_schema_selects_columns(spark: SparkSession, db: str) -> None:
    df = (
        spark.read.format("kudusql")
        .schema("s string, id bigint")
        .option("kudu.master", db)
        .option("kudu.table", "t")
        .load()
    )
    assert df.columns == ["s", "id"]
    assert rows(df.filter("id < 3")) == [("name-00000", 0), ("name-00001", 1), ("name-00002", 2)]


def test_user_schema_with_a_wrong_type_names_the_column(spark: SparkSession, db: str) -> None:
    df = (
        spark.read.format("kudusql")
        .schema("id int")
        .option("kudu.master", db)
        .option("kudu.table", "t")
        .load()
    )
    with pytest.raises(Exception, match=r"schema mismatch for column 'id'.*INT64.*\bint\b"):
        df.collect()


def test_pruned_schema_keeps_the_tables_nullability(spark: SparkSession, db: str) -> None:
    from kudusql.spark.spark_schema import pruned_schema

    with Database(db, read_only=True) as store:
        schema = pruned_schema(store.table("t").schema, "t", ["N", "s", "id"])
        with pytest.raises(Exception, match=r"column 'nope' is not in table 't'"):
            pruned_schema(store.table("t").schema, "t", ["nope"])
    assert [(f.name, f.nullable) for f in schema.fields] == [
        ("n", False),
        ("s", True),
        ("id", False),
    ]
    df = (
        spark.read.format("kudusql")
        .schema(schema)
        .option("kudu.master", db)
        .option("kudu.table", "t")
        .load()
    )
    assert not df.schema["id"].nullable
    assert rows(df.filter("id < 2")) == [(0, "name-00000", 0), (1, "name-00001", 1)]


def test_user_schema_cannot_declare_a_nullable_column_not_null(
    spark: SparkSession, db: str
) -> None:
    """Spark would read the column's NULLs as values (0, "") without a null check."""
    from pyspark.sql.types import StringType, StructField, StructType

    df = (
        spark.read.format("kudusql")
        .schema(StructType([StructField("s", StringType(), nullable=False)]))
        .option("kudu.master", db)
        .option("kudu.table", "t")
        .load()
    )
    with pytest.raises(Exception, match=r"column 's'.*allows NULL, the given schema says NOT NULL"):
        df.collect()


def test_batch_size_never_cuts_below_min_split_rows(spark: SparkSession, db: str) -> None:
    """``kudu.batchSize=1`` once meant one-row batches (Python workers crashed)."""
    from kudusql.spark.reader import MIN_SPLIT_ROWS, split_batch

    batch = all_types_rows(3 * MIN_SPLIT_ROWS + 5).to_batches()[0]
    sizes = [b.num_rows for b in split_batch(batch, 1)]
    assert sizes == [MIN_SPLIT_ROWS, MIN_SPLIT_ROWS, MIN_SPLIT_ROWS, 5]
    small = batch.slice(0, MIN_SPLIT_ROWS)
    assert [b.num_rows for b in split_batch(small, 1)] == [MIN_SPLIT_ROWS]
    assert [b.num_rows for b in split_batch(batch, batch.nbytes)] == [batch.num_rows]
    assert sum(b.num_rows for b in split_batch(batch, batch.nbytes // 2)) == batch.num_rows
    assert load(spark, db, **{"kudu.batchSize": "1"}).count() == N


def test_snapshot_is_fixed_when_partitions_are_planned(tmp_path: Path) -> None:
    """Rows written after planning are invisible to every task of the job."""
    db = make_db(tmp_path / "db", rows=50)
    reader = _reader(db, **{"kudu.splitSizeBytes": "1"})
    parts = reader.partitions()
    conn = kudusql.connect(db)
    try:
        conn.session.db.table("t").insert(all_types_rows(25, start=1000))
        conn.cursor().execute("DELETE FROM t WHERE id < 10")
    finally:
        conn.close()
    got = sum(b.num_rows for p in parts for b in reader.read(p))
    assert got == 50
    assert kudusql_rows(db, "SELECT COUNT(*) FROM t") == [(65,)]


def test_a_worker_keeps_its_open_only_while_the_files_are_unchanged(tmp_path: Path) -> None:
    """Read tasks reuse this process's read-only open; writes, flushes and DDL by the
    writer make the next task reopen what changed."""
    db = make_db(tmp_path / "db", rows=50)

    def count() -> int:
        reader = _reader(db)  # planning opens afresh and fixes the latest snapshot
        return sum(b.num_rows for p in reader.partitions() for b in reader.read(p))

    assert count() == 50
    conn = kudusql.connect(db)
    try:
        store = conn.session.db
        store.table("t").insert(all_types_rows(10, start=1000))  # WAL appends
        assert count() == 60
        store.table("t").flush()  # superblock swaps
        conn.cursor().execute("DELETE FROM t WHERE id < 5")
        assert count() == 55
        conn.cursor().execute("ALTER TABLE t ADD COLUMNS (extra INT)")  # catalog
        assert count() == 55
    finally:
        conn.close()
    assert count() == 55


def test_snapshot_option_travels_in_time(spark: SparkSession, tmp_path: Path) -> None:
    db = make_db(tmp_path / "db", rows=40)
    conn = kudusql.connect(db)
    try:
        table = conn.session.db.table("t")
        before = to_micros(table.db.latest_timestamp())
        table.insert(all_types_rows(10, start=5000))
    finally:
        conn.close()
    assert load(spark, db).count() == 50
    old = load(spark, db, **{"kudu.snapshotTimestampMicros": str(before)})
    assert old.count() == 40
    assert old.filter("id >= 5000").count() == 0


def test_split_size_and_batch_size_keep_every_row(spark: SparkSession, tmp_path: Path) -> None:
    db = make_db(tmp_path / "db", rows=0)
    with Database(db, maintenance=False) as store:  # no compaction: several rowsets per tablet
        t = store.table("t")
        for i in range(4):
            t.insert(all_types_rows(500, start=i * 500))
            t.flush()
    df = load(spark, db, **{"kudu.splitSizeBytes": "2000", "kudu.batchSize": "4096"})
    assert df.rdd.getNumPartitions() > 3
    assert df.count() == 2000
    ft = load(spark, db, **{"kudu.faultTolerantScan": "true"})
    assert sorted(r.id for r in ft.select("id").collect()) == list(range(2000))


def test_errors_are_clear(spark: SparkSession, db: str, tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"table 'nope' does not exist"):
        load(spark, db, table="nope").collect()
    # an unknown option is ignored with a warning (tests/spark/test_kudu_spark_compat.py)
    assert load(spark, db, **{"kudu.bogus": "1"}).count() == N
    with pytest.raises(Exception, match=r"no database at"):
        load(spark, str(tmp_path / "missing")).collect()
    with pytest.raises(Exception, match=r"kudu.splitSizeBytes: expected an integer"):
        load(spark, db, **{"kudu.splitSizeBytes": "big"}).collect()


def test_qualified_names_reach_the_sql_database(spark: SparkSession, tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    conn = kudusql.connect(db)
    try:
        cur = conn.cursor()
        cur.execute("CREATE DATABASE sales")
        cur.execute("CREATE TABLE sales.o (id INT PRIMARY KEY, x STRING)")
        cur.execute("INSERT INTO sales.o VALUES (1, 'a'), (2, 'b')")
        cur.execute("CREATE TABLE o (id INT PRIMARY KEY, x STRING)")
        cur.execute("INSERT INTO o VALUES (9, 'z')")
    finally:
        conn.close()
    assert rows(load(spark, db, table="sales.o")) == [(1, "a"), (2, "b")]
    assert rows(load(spark, db, table="default.o")) == [(9, "z")]
    assert not os.path.exists(os.path.join(db, "spark-staging"))


def _token(tablet_id: int, size: int) -> ScanToken:
    return ScanToken(
        db_path="/db",
        table_id=1,
        table_name="t",
        schema_version=1,
        tablet_id=tablet_id,
        partition="",
        columns=("id",),
        predicates=(),
        snapshot=1,
        key_lo=None,
        key_hi=None,
        size_bytes=size,
    )


@given(
    sizes=st.lists(st.integers(0, 1000), max_size=30),
    min_partitions=st.integers(1, 10),
    max_bytes=st.integers(1, 5000),
)
@example(sizes=[0, 0], min_partitions=2, max_bytes=1)  # empty tokens filled one group
def test_pack_tokens_balances_every_token_into_one_group(
    sizes: list[int], min_partitions: int, max_bytes: int
) -> None:
    tokens = [_token(i, s) for i, s in enumerate(sizes)]
    groups = pack_tokens(tokens, min_partitions, max_bytes)
    ids = [t.tablet_id for g in groups for t in g]
    assert sorted(ids) == list(range(len(sizes)))
    if not sizes:
        assert groups == []
        return
    need = max(1, -(-sum(sizes) // max_bytes))
    waves = -(-need // min_partitions)  # whole waves of min_partitions tasks
    assert len(groups) == min(len(sizes), waves * min_partitions)
    assert all(groups)
    loads = [sum(t.size_bytes for t in g) for g in groups]
    assert max(loads) - min(loads) <= max(sizes)  # largest first, into the lightest
    assert all([t.tablet_id for t in g] == sorted(t.tablet_id for t in g) for g in groups)


def test_pack_tokens_fills_whole_waves_of_task_slots() -> None:
    """Eight equal tablets whose size asks for three tasks, on two slots: four tasks of
    two tablets (three tasks ran as 3 + 3, then 2 alone beside an idle slot: TPC-H Q1
    over Spark took 1.6x Parquet's time against 1.3x in four)."""
    tokens = [_token(i, 100) for i in range(8)]
    groups = pack_tokens(tokens, 2, 300)
    assert [len(g) for g in groups] == [2, 2, 2, 2]
    assert [len(g) for g in pack_tokens(tokens, 3, 300)] == [3, 3, 2]  # one wave of 3
    assert [len(g) for g in pack_tokens(tokens, 1, 300)] == [3, 3, 2]


def test_read_partitions_pack_the_tablets(tmp_path: Path) -> None:
    """Tablets share a read task unless the options ask for more tasks."""
    db = make_db(tmp_path / "db", rows=300)

    def plan(**opts: str) -> list[int]:
        reader = _reader(db, **opts)
        parts = reader.partitions()
        assert sum(b.num_rows for p in parts for b in reader.read(p)) == 300
        return [len(p.value) for p in parts]

    assert plan(**{"kudusql.minPartitions": "1"}) == [3]  # three hash tablets, one task
    assert plan(**{"kudusql.minPartitions": "2"}) in ([1, 2], [2, 1])
    assert plan(**{"kudusql.minPartitions": "9"}) == [1, 1, 1]
    assert plan(**{"kudusql.minPartitions": "1", "kudusql.maxPartitionBytes": "1"}) == [1, 1, 1]
    # pieces cut by kudu.splitSizeBytes stay one per task
    assert plan(**{"kudusql.minPartitions": "1", "kudu.splitSizeBytes": "1"}) == [1, 1, 1]


def test_spark_reads_packed_partitions(spark: SparkSession, db: str) -> None:
    df = load(spark, db, **{"kudusql.minPartitions": "1"})
    assert df.rdd.getNumPartitions() == 1
    assert df.count() == N
    with pytest.raises(Exception, match=r"kudusql.minPartitions: must be positive"):
        load(spark, db, **{"kudusql.minPartitions": "0"}).collect()


def test_push_filters_is_refused(spark: SparkSession, db: str) -> None:
    """``kudusql.pushFilters=true`` made ``df.filter("id IN (5, 9)").count()`` then
    ``df.count()`` answer 2 and 2 (Spark 4.3 reuses a relation's last pushed read plan;
    see the next test). It is refused when Spark first hands the options to the source:
    at ``load()``, or with a user schema at the first action."""
    refused = r"kudusql.pushFilters=true is not supported: Spark 4.3 reuses"
    spark.conf.set(PUSHDOWN_CONF, "true")  # even with Spark's pushdown on
    try:
        with pytest.raises(Exception, match=refused):
            load(spark, db, **{"kudusql.pushFilters": "true"})
        with_schema = (
            spark.read.format("kudusql")
            .schema("id bigint")
            .option("kudu.master", db)
            .option("kudu.table", "t")
            .option("kudusql.pushfilters", "TRUE")
            .load()
        )
        with pytest.raises(Exception, match=refused):
            with_schema.filter("id IN (5, 9)").count()
        df = load(spark, db, **{"kudusql.pushFilters": "false"})
        assert df.filter("id IN (5, 9)").count() == 2
        assert df.count() == N
    finally:
        spark.conf.unset(PUSHDOWN_CONF)


def test_spark_reuses_a_relations_last_pushed_plan(spark: SparkSession) -> None:
    """Why ``kudusql.pushFilters`` is refused. A source that takes Spark's IN filter
    (``tests/support/pushdown_canary.py``): the plan made for the filtered query runs
    again for the next query on the DataFrame, which pushes nothing, and for both scans
    of a relation read twice in one query. The Python worker running a plan gets only
    the planned reader and partition (the same bytes for a legitimate re-run), so no
    source can detect this. If this test fails, the Spark in use plans each query's
    read afresh and the option can be reconsidered (docs/SPARK.md)."""
    from tests.support.pushdown_canary import ROWS, InPushingSource

    spark.dataSource.register(InPushingSource)
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        df = spark.read.format(InPushingSource.name()).load()
        assert df.count() == ROWS  # no plan pushed yet: the whole relation
        assert df.filter("id IN (5, 9)").count() == 2
        assert df.count() == 2  # the right answer is ROWS: the filtered plan ran again
        both = df.filter("id IN (1, 2, 3)").union(df)
        assert both.count() == 6  # the right answer is 3 + ROWS
    finally:
        spark.conf.unset(PUSHDOWN_CONF)
