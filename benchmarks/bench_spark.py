"""Spark over kudusql against Spark over Parquet: TPC-H Q1 and Q6, and loading lineitem
through the Spark pipeline against the direct Arrow load.

Data: TPC-H at ``--sf`` from ``tpchgen-cli`` (cached by the tpch package).

1. Load: an empty ``lineitem`` table (TPC-H key, hash buckets by the tpch runner's rule)
   filled (a) through Spark, ``kudusql.spark.pipeline.load_tables`` (Spark reads the
   Parquet file, casts to the table's types, tasks stage Arrow files, the commit
   applies them at one timestamp), timed from the call until it returns with a warm
   Spark session (session start untimed); (b) directly, ``Table.insert`` of the Parquet
   rows in 1M-row batches (``kudusql_tpch.load`` does the same for all tables). Each into a
   fresh database; best of --reps (default 1).
2. Queries: Spark SQL Q1 and Q6 (the spec's validation parameters) over a temporary
   view of kudusql's lineitem (Spark applies the filters, the source takes none:
   docs/SPARK.md; a user-given schema of the query's columns, with the table's types
   and nullability, stands in for column pruning, which Python data sources lack)
   against the same query over a view of the Parquet file (Spark's own reader, with its
   column pruning and row-group filters). Both answers must agree. One warm-up, then the
   median of --reps (default 3).
   ``local[2]``, ``spark.sql.shuffle.partitions=2``.

Goal (issue 8): each query at most 1.5x Spark over Parquet. The load has no goal; the
ratio is reported.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import kudusql
from benchmarks.common import Config, Goal, Result, fresh_dir, log, workdir
from benchmarks.data import sf_label
from kudusql_tpch.check import compare_results
from kudusql_tpch.generate import data_path, default_data_dir, generate_tpch, parquet_files
from kudusql_tpch.load import buckets, create_table_sql

NAME = "spark"
QUERY_GOAL = Goal(max_ratio=1.5)
BATCH_ROWS = 1_000_000
QUERIES = {
    "Q1": (
        "l_returnflag, l_linestatus, l_quantity, l_extendedprice, l_discount, l_tax, l_shipdate",
        """select l_returnflag, l_linestatus, sum(l_quantity) as sum_qty,
  sum(l_extendedprice) as sum_base_price,
  sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
  sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) as sum_charge,
  avg(l_quantity) as avg_qty, avg(l_extendedprice) as avg_price,
  avg(l_discount) as avg_disc, count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '90' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus""",
    ),
    "Q6": (
        "l_extendedprice, l_discount, l_quantity, l_shipdate",
        """select sum(l_extendedprice * l_discount) as revenue
from lineitem
where l_shipdate >= date '1994-01-01'
  and l_shipdate < date '1994-01-01' + interval '1' year
  and l_discount between 0.06 - 0.01 and 0.06 + 0.01
  and l_quantity < 24""",
    ),
}


def _create_lineitem(db: Path, src: Path, sf: float) -> None:
    path = parquet_files(src)["lineitem"]
    conn = kudusql.connect(str(db))
    try:
        sql = create_table_sql(
            "lineitem", pq.ParquetFile(path).schema_arrow, buckets("lineitem", sf)
        )
        conn.cursor().execute(sql)
    finally:
        conn.close()


def _direct_load(db: Path, src: Path) -> int:
    path = parquet_files(src)["lineitem"]
    conn = kudusql.connect(str(db))
    try:
        table = conn.session.db.table("lineitem")
        target = table.schema.arrow_schema()
        f = pq.ParquetFile(path)
        n = 0
        for batch in f.iter_batches(batch_size=BATCH_ROWS):
            n += table.insert(batch.select(target.names).cast(target)).applied
        table.flush()
        return n
    finally:
        conn.close()


def _kudusql_view(spark: Any, db: Path, columns: str) -> None:
    (
        spark.read.format("kudusql")
        .schema(_schema(db, [c.strip() for c in columns.split(",")]))
        .option("kudu.master", str(db))
        .option("kudu.table", "lineitem")
        .load()
        .createOrReplaceTempView("lineitem")
    )


def _schema(db: Path, columns: list[str]) -> Any:
    """The query's columns with the table's types and nullability (what ``load()``
    without a schema would give, pruned)."""
    from kudusql.spark.spark_schema import pruned_schema
    from kudusql.storage.tables.database import Database

    with Database(str(db), read_only=True) as d:
        return pruned_schema(d.table("lineitem").schema, "lineitem", columns)


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.collect()]


def run(cfg: Config) -> Result:
    from kudusql.spark.pipeline import load_tables
    from kudusql.spark.session import spark_session

    src = generate_tpch(cfg.sf, data_path(default_data_dir(), cfg.sf))
    parquet = str(parquet_files(src)["lineitem"])
    rows = pq.ParquetFile(parquet).metadata.num_rows
    res = Result(
        NAME,
        f"Spark local[2] over kudusql: TPC-H SF {sf_label(cfg.sf)} lineitem ({rows:,} rows) "
        "load through Spark vs direct Arrow load; Q1, Q6",
        "Spark over the same Parquet file; the direct Arrow load (Table.insert)",
    )
    spark = spark_session("local[2]", app_name="kudusql-bench")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with workdir(cfg, NAME) as d:
            via_spark, direct = [], []
            db = d / "spark"
            for _ in range(cfg.repetitions(1)):
                arrow_db = fresh_dir(d, "arrow")
                _create_lineitem(arrow_db, src, cfg.sf)
                t0 = time.perf_counter()
                n = _direct_load(arrow_db, src)
                direct.append(time.perf_counter() - t0)
                assert n == rows, f"direct load: {n} of {rows} rows"
                db = fresh_dir(d, "spark")
                _create_lineitem(db, src, cfg.sf)
                t0 = time.perf_counter()
                summary = load_tables(str(db), {"lineitem": [parquet]}, spark=spark)
                via_spark.append(time.perf_counter() - t0)
                loaded = summary.tables["lineitem"].rows_loaded
                assert loaded == rows, f"Spark load: {loaded} of {rows} rows"
                log(f"load: Spark {via_spark[-1]:.1f} s, direct {direct[-1]:.1f} s")
            res.add("load lineitem: Spark pipeline vs direct Arrow", via_spark, direct)

            spark.read.parquet(parquet).createOrReplaceTempView("lineitem_parquet")
            for name, (columns, sql) in QUERIES.items():
                ours_runs, rival_runs = [], []
                ours_rows: list[tuple[Any, ...]] = []
                rival_rows: list[tuple[Any, ...]] = []
                for i in range(1 + cfg.repetitions(3)):
                    _kudusql_view(spark, db, columns)
                    t0 = time.perf_counter()
                    ours_rows = _rows(spark.sql(sql))
                    t1 = time.perf_counter()
                    spark.read.parquet(parquet).createOrReplaceTempView("lineitem")
                    t2 = time.perf_counter()
                    rival_rows = _rows(spark.sql(sql))
                    t3 = time.perf_counter()
                    if i:  # the first run warms up
                        ours_runs.append(t1 - t0)
                        rival_runs.append(t3 - t2)
                problem = compare_results(ours_rows, rival_rows, ordered=True)
                if problem:
                    raise AssertionError(f"{name}: Spark over kudusql differs: {problem}")
                log(
                    f"{name}: kudusql {statistics.median(ours_runs):.2f} s, "
                    f"parquet {statistics.median(rival_runs):.2f} s"
                )
                res.add(f"Spark {name}", ours_runs, rival_runs, goal=QUERY_GOAL, stat="median")
    finally:
        spark.stop()
    return res
