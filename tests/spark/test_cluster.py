"""The Spark data source against a cluster (``kudu.master`` = a master's address):
reads through scan tokens, every write operation, row errors, KuduContext, the
streaming sink's rules, and the clear refusals. The session's cluster
(``sql_cluster_url``) and Spark session (local[2]) are shared with the other tests;
``test_cluster_processes.py`` proves the data goes through the servers."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

import kudusql
from kudusql.common.errors import ProgrammingError
from kudusql.spark.cluster import ignore_null_parts
from kudusql.spark.context import KuduContext
from kudusql.spark.options import parse_options
from tests.spark.conftest import ALL_TYPES_DDL, all_types_rows, kudusql_rows

pytestmark = pytest.mark.spark

KV = "id bigint, s string, x int"


@pytest.fixture(scope="module")
def cluster(sql_cluster_url: str) -> Iterator[tuple[str, str, str]]:
    """(the cluster's URL, its master's HOST:PORT, its secret file), with tables ``kv``
    and ``types`` dropped at the end."""
    parts = urllib.parse.urlsplit(sql_cluster_url)
    secret = urllib.parse.parse_qs(parts.query)["secret_file"][0]
    yield sql_cluster_url, parts.netloc, secret
    with kudusql.connect(sql_cluster_url) as conn:
        for name in ("kv", "types", "ctx"):
            conn.session.db.drop_table(name, if_exists=True)


def reset_kv(url: str, n: int = 10) -> None:
    with kudusql.connect(url) as conn:
        conn.session.db.drop_table("kv", if_exists=True)
        cur = conn.cursor()
        cur.execute(
            "CREATE TABLE kv (id BIGINT PRIMARY KEY, s STRING, x INT NOT NULL DEFAULT 0) "
            "PARTITION BY HASH (id) PARTITIONS 3"
        )
        if n:
            cur.executemany(
                "INSERT INTO kv VALUES (?, ?, ?)", [(i, f"s{i}", i * 10) for i in range(n)]
            )


def kv(url: str) -> list[tuple[Any, ...]]:
    return kudusql_rows(url, "SELECT id, s, x FROM kv ORDER BY id")


def frame(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, StructType.fromDDL(KV))


def write(df: DataFrame, master: str, secret: str, op: str, **opts: str) -> None:
    w = (
        df.write.format("kudu")
        .option("kudu.master", master)
        .option("kudusql.secretFile", secret)
        .option("kudu.table", "kv")
        .option("kudu.operation", op)
    )
    for k, v in opts.items():
        w = w.option(k, v)
    w.mode("append").save()


def test_master_option_names_a_cluster_or_a_directory(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    opts = parse_options(
        {"kudu.master": "127.0.0.1:7051", "kudu.table": "t", "kudusql.secretFile": str(secret)}
    )
    assert opts.cluster is not None and opts.database == "kudusql://127.0.0.1:7051"
    assert opts.cluster.secret == "s3cret" and "s3cret" not in repr(opts)
    url = parse_options({"kudu.master": f"kudusql://h:1?secret_file={secret}", "kudu.table": "t"})
    assert url.cluster is not None and url.cluster.address == "h:1"
    for directory in ("/data/db", "file:///data/db", "./h:1", "db"):
        assert parse_options({"kudu.master": directory, "kudu.table": "t"}).cluster is None
    several = parse_options(
        {"kudu.master": "m1:7051, m2:7051", "kudu.table": "t", "kudusql.secretFile": str(secret)}
    )
    assert several.cluster is not None and several.cluster.address == "m1:7051,m2:7051"
    with pytest.raises(ProgrammingError, match="listed twice"):
        parse_options({"kudu.master": "m1:7051,m1:7051", "kudu.table": "t"})


def test_ignore_null_writes_each_row_without_its_null_columns() -> None:
    conn = kudusql.connect(":memory:")
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, s STRING, x INT)")
    cur.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, f"s{i}", i) for i in range(4)])
    batch = pa.table(
        {
            "id": pa.array([0, 1, 2, 1, 9], pa.int64()),
            "s": pa.array([None, "b", None, None, "new"]),
            "x": pa.array([50, None, None, 70, None], pa.int32()),
        }
    )
    parts = ignore_null_parts(batch, ["id"])
    assert len(parts) == 5  # key 1 repeats: runs in order, not groups
    assert parts[0].column_names == ["id", "x"] and parts[2].column_names == ["id"]
    for p in parts:
        conn.session.db.table("t").write(p, "upsert")
    cur.execute("SELECT id, s, x FROM t ORDER BY id")
    assert cur.fetchall() == [
        (0, "s0", 50),
        (1, "b", 70),
        (2, "s2", 2),
        (3, "s3", 3),
        (9, "new", None),
    ]
    grouped = ignore_null_parts(batch.slice(0, 3), ["id"])  # unique keys: one part per pattern
    assert sorted(p.num_rows for p in grouped) == [1, 1, 1]
    conn.close()


@pytest.mark.slow  # seconds of Spark jobs; make test-spark and make test-slow run it
def test_read_every_type_through_the_tablet_servers(
    spark: SparkSession, cluster: tuple[str, str, str]
) -> None:
    url, master, secret = cluster
    with kudusql.connect(url) as conn:
        conn.session.db.drop_table("types", if_exists=True)
        conn.cursor().execute(ALL_TYPES_DDL.format(name="types"))
        conn.session.db.table("types").insert(all_types_rows(50))
    df = (
        spark.read.format("kudu")
        .option("kudu.master", master)
        .option("kudusql.secretFile", secret)
        .option("kudu.table", "types")
        .load()
    )
    got = {r["id"]: r for r in df.collect()}
    want = all_types_rows(50).to_pylist()
    assert sorted(got) == list(range(50))
    for w in want:
        g = got[w["id"]].asDict()
        assert g["s"] == w["s"] and g["dec"] == w["dec"] and g["dt"] == w["dt"]
        assert g["bin"] == (None if w["bin"] is None else bytearray(w["bin"]))
    # the projection goes into the scan tokens (Spark prunes no columns of a Python
    # source: KuduContext.read(columns=) is the way); Spark applies the filter
    ctx = KuduContext(url, spark)
    cols = ctx.read("types", columns=["id", "s"]).filter("id < 3").orderBy("id").collect()
    assert [tuple(r) for r in cols] == [(0, "name-00000"), (1, "name-00001"), (2, "name-00002")]


def test_every_write_operation(spark: SparkSession, cluster: tuple[str, str, str]) -> None:
    url, master, secret = cluster
    reset_kv(url, n=4)
    write(frame(spark, [(10, "a", 1), (11, "b", 2)]), master, secret, "insert")
    write(frame(spark, [(11, "dup", 0), (12, "c", 3)]), master, secret, "insert-ignore")
    write(frame(spark, [(0, "up", 5), (13, "d", 4)]), master, secret, "upsert")
    write(frame(spark, [(1, "new", 6)]), master, secret, "update")
    write(frame(spark, [(2, None, 0), (99, "x", 0)]), master, secret, "update-ignore")
    write(frame(spark, [(3, None, 0)]), master, secret, "delete")
    write(frame(spark, [(10, None, 0), (98, None, 0)]), master, secret, "delete-ignore")
    write(frame(spark, [(12, "nope", 9), (14, "e", 5)]), master, secret, "upsert-ignore")
    write(frame(spark, [(13, None, 44)]), master, secret, "upsert", **{"kudu.ignoreNull": "true"})
    assert kv(url) == [
        (0, "up", 5),
        (1, "new", 6),
        (2, None, 0),
        (11, "b", 2),
        (12, "nope", 9),  # upsert-ignore upserts (it ignores immutable-column errors)
        (13, "d", 44),  # ignoreNull: the NULL left s as stored
        (14, "e", 5),
    ]


@pytest.mark.slow  # seconds of Spark jobs; make test-spark and make test-slow run it
def test_row_errors_fail_the_task_or_are_counted(
    spark: SparkSession, cluster: tuple[str, str, str], tmp_path: Path
) -> None:
    url, master, secret = cluster
    reset_kv(url, n=2)
    one_task = frame(spark, [(1, "dup", 0), (5, "new", 0)]).coalesce(1)
    with pytest.raises(PySparkException, match=r"Failed to write 1 rows.*other rows were written"):
        write(one_task, master, secret, "insert")
    assert [r[0] for r in kv(url)] == [0, 1, 5]  # not all-or-nothing on a cluster
    report = tmp_path / "report.json"
    write(
        frame(spark, [(0, "dup", 0), (6, "new", 0)]),
        master,
        secret,
        "insert",
        **{"kudu.ignoreRowErrors": "true", "kudusql.reportFile": str(report)},
    )
    summary = json.loads(report.read_text())
    assert (summary["rows_applied"], summary["rows_rejected"]) == (1, 1)
    assert "already" in summary["sample_errors"][0].lower() and summary["timestamp_micros"]
    write(
        frame(spark, [(0, "dup", 0)]),
        master,
        secret,
        "insert",
        **{"kudu.ignoreDuplicateRowErrors": "true"},
    )
    assert [r[0] for r in kv(url)] == [0, 1, 5, 6]


@pytest.mark.slow  # seconds of Spark jobs; make test-spark and make test-slow run it
def test_refusals_are_clear(
    spark: SparkSession, cluster: tuple[str, str, str], tmp_path: Path
) -> None:
    url, master, _ = cluster
    wrong = tmp_path / "wrong-secret"
    wrong.write_text("not-the-secret\n")
    reset_kv(url, n=1)
    df = frame(spark, [(1, "a", 1)])
    with pytest.raises(PySparkException, match="overwrite mode is not supported on a cluster"):
        df.write.format("kudu").option("kudu.master", url).option("kudu.table", "kv").mode(
            "overwrite"
        ).save()
    with pytest.raises(PySparkException, match="listed twice"):
        spark.read.format("kudu").option("kudu.master", f"{master},{master}").option(
            "kudu.table", "kv"
        ).load()
    with pytest.raises(PySparkException, match="'nope' does not exist in kudusql://"):
        spark.read.format("kudu").option("kudu.master", url).option("kudu.table", "nope").load()
    with pytest.raises(PySparkException, match=r"(?i)unauthenticated"):
        spark.read.format("kudu").option("kudu.master", master).option(
            "kudusql.secretFile", str(wrong)
        ).option("kudu.table", "kv").load()
    source = tmp_path / "in"
    source.mkdir()
    (source / "part-0.json").write_text('{"id": 1, "s": "a", "x": 1}\n')
    with pytest.raises(PySparkException, match="streaming sink on a cluster"):
        query = (
            spark.readStream.schema(KV)
            .json(str(source))
            .writeStream.format("kudu")
            .option("kudu.master", url)
            .option("kudu.table", "kv")
            .option("kudu.operation", "insert")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()


def test_kudu_context_on_a_cluster(spark: SparkSession, cluster: tuple[str, str, str]) -> None:
    _, master, secret = cluster
    ctx = KuduContext(master, spark, secret_file=secret)
    if ctx.table_exists("ctx"):
        ctx.delete_table("ctx")
    ctx.create_table("ctx", StructType.fromDDL(KV), ["id"], hash_partitions=[(["id"], 2)])
    assert ctx.table_exists("ctx")
    s = ctx.insert_rows(frame(spark, [(1, "a", 1), (2, "b", 2)]), "ctx", repartition=True)
    assert s.rows_applied == 2 and ctx.last_timestamp_micros is not None
    ctx.upsert_rows(frame(spark, [(2, "B", 20)]), "ctx")
    ctx.delete_rows(frame(spark, [(1, None, 0)]), "ctx")
    read = ctx.read("ctx", snapshot_micros=ctx.last_timestamp_micros).collect()
    assert [tuple(r) for r in read] == [(2, "B", 20)]
    ctx.delete_table("ctx")
    assert not ctx.table_exists("ctx")


@pytest.mark.slow  # seconds of Spark jobs; make test-spark and make test-slow run it
def test_streaming_upserts_on_a_cluster(
    spark: SparkSession, cluster: tuple[str, str, str], tmp_path: Path
) -> None:
    url, master, secret = cluster
    reset_kv(url, n=0)
    source = tmp_path / "in"
    source.mkdir()
    (source / "part-0.json").write_text(
        "".join(json.dumps({"id": k, "s": "f", "x": k}) + "\n" for k in (1, 2, 3))
    )
    query = (
        spark.readStream.schema(KV)
        .json(str(source))
        .writeStream.format("kudu")
        .option("kudu.master", master)
        .option("kudusql.secretFile", secret)
        .option("kudu.table", "kv")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    assert kv(url) == [(1, "f", 1), (2, "f", 2), (3, "f", 3)]
