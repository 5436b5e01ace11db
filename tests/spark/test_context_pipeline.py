"""``KuduContext`` (kudu-spark's helper) and the Spark data pipeline (files into tables)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from kudusql.spark.pipeline import load_tables
from pyspark_kudusql import KuduContext
from tests.spark.conftest import kudusql_rows
from tests.support.timing import scaled

SCHEMA = "id bigint, name string, price decimal(10,2), day date"
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


AUTO_REGISTRATION = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[1]").getOrCreate()  # Spark's defaults, no register
reader = spark.read.format("kudusql").option("kudu.master", sys.argv[1])
df = reader.option("kudu.table", "a").load()
print("rows", df.count(), df.filter("id > 1").count())
spark.stop()
"""


@pytest.mark.slow  # a subprocess driver (~25 s); make test-spark and make test-slow run it
def test_spark_finds_the_source_without_registration(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    _create(db, "a")
    import kudusql

    conn = kudusql.connect(db)
    try:
        conn.cursor().execute(
            "INSERT INTO a VALUES (1, 'x', 1.5, DATE '2024-01-01'), (2, 'y', NULL, NULL)"
        )
    finally:
        conn.close()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run(
        [sys.executable, "-c", AUTO_REGISTRATION, db],
        capture_output=True,
        text=True,
        timeout=scaled(300),
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rows 2 1" in out.stdout


def test_register_is_idempotent(spark: SparkSession, tmp_path: Path) -> None:
    from pyspark_kudusql import register, spark_session

    register(spark)
    register(spark)
    # Spark's filter pushdown for Python sources stays the user's: on, Spark 4.3 reuses a
    # relation's pushed read plan (docs/SPARK.md); spark_session returns this session
    spark.conf.set(PUSHDOWN, "false")
    try:
        assert spark_session() is spark
        register(spark)
        assert spark.conf.get(PUSHDOWN) == "false"
    finally:
        spark.conf.unset(PUSHDOWN)
    kc = KuduContext(str(tmp_path / "db"), spark)
    kc.create_table("x", StructType.fromDDL("id int"), ["id"])
    assert kc.read("x").count() == 0


def test_kudu_context_manages_tables_and_writes(spark: SparkSession, tmp_path: Path) -> None:
    kc = KuduContext(str(tmp_path / "db"), spark)
    assert not kc.table_exists("items")
    kc.create_table("items", StructType.fromDDL(SCHEMA), ["id"], hash_partitions=[(["id"], 3)])
    assert kc.table_exists("items")
    with pytest.raises(Exception, match="already exists"):
        kc.create_table("items", StructType.fromDDL(SCHEMA), ["id"])

    df = spark.createDataFrame(
        [(i, f"item{i}", None, None) for i in range(20)], StructType.fromDDL(SCHEMA)
    )
    summary = kc.insert_rows(df, "items")
    assert summary.rows_applied == 20 and summary.rows_rejected == 0
    assert kc.last_timestamp_micros is not None
    assert kc.read("items").count() == 20

    assert kc.insert_ignore_rows(df.limit(3), "items").rows_ignored == 3
    kc.upsert_rows(
        spark.createDataFrame([(1, "uno", None, None)], StructType.fromDDL(SCHEMA)), "items"
    )
    kc.update_rows(
        spark.createDataFrame([(2, "dos", None, None)], StructType.fromDDL(SCHEMA)), "items"
    )
    assert kc.delete_rows(df.filter("id >= 10"), "items").rows_applied == 10
    kc.delete_ignore_rows(df.filter("id >= 18"), "items")
    path = kc.database
    assert kudusql_rows(path, "SELECT id, name FROM items WHERE id < 3 ORDER BY id") == [
        (0, "item0"),
        (1, "uno"),
        (2, "dos"),
    ]
    assert kudusql_rows(path, "SELECT COUNT(*) FROM items") == [(10,)]
    assert kc.read("items", snapshot_micros=summary.timestamp_micros).count() == 20
    pruned = kc.read("items", columns=["NAME", "id"])
    assert pruned.columns == ["name", "id"]
    assert not pruned.schema["id"].nullable
    assert sorted(tuple(r) for r in pruned.filter("id < 2").collect()) == [
        ("item0", 0),
        ("uno", 1),
    ]
    with pytest.raises(Exception, match="does not exist"):
        kc.read("nope", columns=["id"])
    kc.delete_table("items")
    assert not kc.table_exists("items")


def _raw_files(tmp: Path, n: int) -> tuple[Path, Path]:
    data = pa.table(
        {
            "ID": pa.array(range(n), pa.int64()),
            "Name": pa.array([f"n{i}" for i in range(n)]),
            "price": pa.array([f"{i}.25" for i in range(n)]),
            "day": pa.array([f"2024-01-{1 + i % 28:02d}" for i in range(n)]),
        }
    )
    pq.write_table(data, tmp / "raw.parquet")
    pacsv.write_csv(data, tmp / "raw.csv")
    return tmp / "raw.parquet", tmp / "raw.csv"


def _create(db: str, *tables: str) -> None:
    import kudusql

    conn = kudusql.connect(db)
    try:
        for t in tables:
            conn.cursor().execute(
                f"CREATE TABLE {t} (id BIGINT PRIMARY KEY, name STRING, price DECIMAL(10,2), "
                "day DATE) PARTITION BY HASH (id) PARTITIONS 2"
            )
    finally:
        conn.close()


def test_pipeline_loads_parquet_and_csv_shaping_types(spark: SparkSession, tmp_path: Path) -> None:
    parquet, csv = _raw_files(tmp_path, 500)
    db = str(tmp_path / "db")
    _create(db, "a", "b")
    summary = load_tables(db, {"a": [str(parquet)]}, spark=spark)
    summary2 = load_tables(db, {"b": [str(csv)]}, fmt="csv", spark=spark)
    assert summary.tables["a"].rows_loaded == 500 and summary.rows_rejected == 0
    assert summary2.tables["b"].rows_loaded == 500
    q = "SELECT id, name, price, day FROM {} WHERE id IN (0, 499) ORDER BY id"
    assert kudusql_rows(db, q.format("a")) == kudusql_rows(db, q.format("b"))
    assert "rows loaded" in summary.describe()

    # loading again: every row is a duplicate, so the job fails and loads nothing
    with pytest.raises(Exception, match="Failed to write 500 rows"):
        load_tables(db, {"a": [str(parquet)]}, spark=spark)
    again = load_tables(db, {"a": [str(parquet)]}, spark=spark, ignore_row_errors=True)
    assert again.tables["a"].rows_rejected == 500 and again.tables["a"].rows_loaded == 0


def test_pipeline_rejects_bad_input_clearly(spark: SparkSession, tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    _create(db, "a")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,name,price,day\n1,x,1.5,2024-01-01\n2,y,not-a-number,2024-01-02\n")
    with pytest.raises(Exception, match="not-a-number"):
        load_tables(db, {"a": [str(bad)]}, fmt="csv", spark=spark)
    extra = tmp_path / "extra.csv"
    extra.write_text("id,name,color\n1,x,red\n")
    with pytest.raises(Exception, match=r"column\(s\) color of the input are not in table 'a'"):
        load_tables(db, {"a": [str(extra)]}, fmt="csv", spark=spark)
    load_tables(db, {"a": [str(extra)]}, fmt="csv", spark=spark, extra_columns="drop")
    assert kudusql_rows(db, "SELECT id, name, price FROM a") == [(1, "x", None)]
    with pytest.raises(Exception, match="does not exist"):
        load_tables(db, {"zz": [str(extra)]}, fmt="csv", spark=spark)
    with pytest.raises(Exception, match="not found"):
        load_tables(db, {"a": [str(tmp_path / "nope.parquet")]}, spark=spark)


@pytest.mark.slow
def test_pipeline_command_line(tmp_path: Path) -> None:
    parquet, _ = _raw_files(tmp_path, 50)
    db = str(tmp_path / "db")
    _create(db, "a")
    out = subprocess.run(
        [sys.executable, "-m", "kudusql.spark.pipeline", "--db", db, f"a={parquet}"],
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert out.returncode == 0, out.stderr
    assert "total" in out.stdout and "50" in out.stdout
    assert kudusql_rows(db, "SELECT COUNT(*) FROM a") == [(50,)]
