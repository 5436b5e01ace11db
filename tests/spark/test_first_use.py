"""What a new Spark user meets first: a write to a table that does not exist says to
create it (without a Python traceback), and ``KuduContext.last_timestamp_micros``
follows the context's writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from kudusql.common.errors import ProgrammingError
from kudusql.spark.context import KuduContext
from kudusql.spark.pipeline import load_tables
from tests.spark.test_write import frame, kv_db

pytestmark = pytest.mark.spark

CREATE_FIRST = r"create the table first \(KuduContext.create_table or CREATE TABLE\)"


def test_a_write_to_a_missing_table_says_to_create_it(spark: SparkSession, tmp_path: Path) -> None:
    db = kv_db(tmp_path / "db")
    kc = KuduContext(db, spark)
    for write in (kc.insert_rows, kc.upsert_rows, kc.delete_rows):
        with pytest.raises(
            ProgrammingError, match=r"table 'nope' does not exist .*" + CREATE_FIRST
        ):
            write(frame(spark, [(1, "a", 1)]), "nope")
    with pytest.raises(ProgrammingError, match=CREATE_FIRST):
        KuduContext(str(tmp_path / "none"), spark).insert_rows(frame(spark, [(1, "a", 1)]), "t")
    csv = tmp_path / "in.csv"
    csv.write_text("id,s,x\n1,a,1\n")
    with pytest.raises(ProgrammingError, match=CREATE_FIRST):
        load_tables(db, {"nope": [str(csv)]}, fmt="csv", spark=spark)
    # Through the data source itself: Spark's wrapper and the message, no traceback.
    with pytest.raises(Exception, match=CREATE_FIRST) as err:
        frame(spark, [(1, "a", 1)]).write.format("kudusql").option("kudu.master", db).option(
            "kudu.table", "nope"
        ).mode("append").save()
    assert "Traceback" not in str(err.value) and 'File "' not in str(err.value)
    # a read of a missing table too
    with pytest.raises(Exception, match="does not exist") as err:
        spark.read.format("kudusql").option("kudu.master", db).option("kudu.table", "nope").load()
    assert "Traceback" not in str(err.value)


def test_last_timestamp_follows_the_writes_of_the_context(
    spark: SparkSession, tmp_path: Path
) -> None:
    db = kv_db(tmp_path / "db", n=0)
    kc = KuduContext(db, spark)
    assert kc.last_timestamp_micros is None
    first = kc.insert_rows(frame(spark, [(1, "a", 1)]), "kv")
    assert kc.last_timestamp_micros == first.timestamp_micros
    empty = spark.createDataFrame([], StructType.fromDDL("id bigint, s string, x int"))
    assert kc.upsert_rows(empty, "kv").timestamp_micros is None
    assert kc.last_timestamp_micros == first.timestamp_micros  # nothing applied: kept
    second = kc.update_rows(frame(spark, [(1, "b", 2)]), "kv")
    assert second.timestamp_micros is not None and kc.last_timestamp_micros is not None
    assert kc.last_timestamp_micros == second.timestamp_micros > first.timestamp_micros
    rows = kc.read("kv", snapshot_micros=kc.last_timestamp_micros).collect()
    assert [tuple(r) for r in rows] == [(1, "b", 2)]
