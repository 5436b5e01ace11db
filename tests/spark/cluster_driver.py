"""A Spark driver program for ``test_cluster_processes.py``, run as an unprivileged user.

It starts a ``local-cluster[2,1,1024]`` session (two executors, each a JVM process of
its own with its own Python workers), then against the cluster whose master is
``--master``: checks that neither it nor the executors can read the cluster's data
directory ``--data``; reads table ``kv``; upserts rows 100-199 and deletes row 0;
reads again. It prints one JSON object with what it saw.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from pyspark.sql import SparkSession


def can_read(path: str) -> str:
    """``"denied"`` when listing ``path`` is refused, else what happened."""
    try:
        os.listdir(path)
    except PermissionError:
        return "denied"
    except OSError as e:
        return f"error: {e}"
    return "readable"


def java_ancestor() -> int:
    """The pid of the nearest ``java`` process above this one (an executor's JVM, for a
    Python worker), or 0."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name == "java":
            return pid
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return 0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--master", required=True)
    p.add_argument("--secret-file", required=True)
    p.add_argument("--data", required=True)
    args = p.parse_args()

    from kudusql.spark.session import BUILD_SETTINGS, SETTINGS

    builder = SparkSession.builder.master("local-cluster[2,1,1024]").appName("kudusql-cluster")
    confs = {
        **SETTINGS,
        **BUILD_SETTINGS,
        "spark.sql.shuffle.partitions": "2",
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "spark.executorEnv.HOME": os.environ.get("HOME", "/tmp"),
        "spark.ui.enabled": "false",
    }
    for k, v in confs.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    out: dict[str, object] = {"driver_uid": os.getuid()}
    try:
        import kudusql

        out["driver_data"] = can_read(args.data)
        try:
            kudusql.connect(os.path.join(args.data, "ts-0")).close()
            out["driver_connect"] = "opened"
        except Exception as e:  # what a direct open of the files says
            out["driver_connect"] = f"{type(e).__name__}: {e}"

        data = args.data

        def probe(_: object) -> list[tuple[int, int, str]]:
            return [(java_ancestor(), os.getuid(), can_read(data))]

        jvm = spark.sparkContext._jvm
        assert jvm is not None
        out["driver_jvm"] = int(jvm.java.lang.ProcessHandle.current().pid())

        out["executors"] = sorted(
            set(spark.sparkContext.parallelize(range(8), 8).mapPartitions(probe).collect())
        )

        def source(table: str = "kv") -> object:
            return (
                spark.read.format("kudu")
                .option("kudu.master", args.master)
                .option("kudusql.secretFile", args.secret_file)
                .option("kudu.table", table)
                .load()
            )

        df = source()
        out["read_partitions"] = df.rdd.getNumPartitions()  # type: ignore[attr-defined]
        out["read"] = sorted(tuple(r) for r in df.collect())  # type: ignore[attr-defined]
        new = spark.createDataFrame(
            [(i, f"spark-{i}", i) for i in range(100, 200)], "id bigint, s string, x int"
        ).repartition(4)
        (
            new.write.format("kudu")
            .option("kudu.master", args.master)
            .option("kudusql.secretFile", args.secret_file)
            .option("kudu.table", "kv")
            .option("kudu.operation", "upsert")
            .mode("append")
            .save()
        )
        gone = spark.createDataFrame([(0,)], "id bigint")
        (
            gone.write.format("kudu")
            .option("kudu.master", args.master)
            .option("kudusql.secretFile", args.secret_file)
            .option("kudu.table", "kv")
            .option("kudu.operation", "delete")
            .mode("append")
            .save()
        )
        out["count_after"] = source().count()  # type: ignore[attr-defined]
    finally:
        spark.stop()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
