"""The data pipeline: raw files (Parquet or CSV) through Spark into kudusql tables.

For each target table the job reads its files with Spark, shapes the DataFrame to the
table (columns matched by name ignoring case, cast to the table's Spark types, so CSV
text becomes numbers, dates and timestamps; a value that does not cast fails the job
with Spark's message; columns the table lacks fail the job unless
``extra_columns="drop"``) and writes it through the ``kudusql`` data source, one
all-or-nothing job per table. Progress shows in Spark's UI and log (each job is
described as "kudusql load <table>") and in this module's log; the result is a summary
of rows loaded and rejected per table. The TPC-H runner loads through it by default.

Command line: ``python -m kudusql.spark.pipeline --db PATH [--format csv]
table=file[,file...] ...``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from kudusql.common.errors import Error, ProgrammingError
from kudusql.common.schema import Schema
from kudusql.spark.options import database_path, storage_table_name
from kudusql.spark.session import spark_session
from kudusql.spark.source import missing_table
from kudusql.spark.spark_schema import find_column, spark_type
from kudusql.storage.tables.database import Database

log = logging.getLogger("kudusql.spark.pipeline")

FORMATS = ("parquet", "csv")


@dataclass
class TableLoad:
    table: str
    files: int
    rows_loaded: int = 0
    rows_rejected: int = 0
    seconds: float = 0.0
    sample_errors: list[str] = field(default_factory=list)


@dataclass
class LoadSummary:
    database: str
    tables: dict[str, TableLoad] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def rows_loaded(self) -> int:
        return sum(t.rows_loaded for t in self.tables.values())

    @property
    def rows_rejected(self) -> int:
        return sum(t.rows_rejected for t in self.tables.values())

    def describe(self) -> str:
        lines = [f"{'table':<20} {'rows loaded':>12} {'rejected':>9} {'seconds':>8}"]
        lines += [
            f"{t.table:<20} {t.rows_loaded:>12,} {t.rows_rejected:>9,} {t.seconds:>8.2f}"
            for t in self.tables.values()
        ]
        lines.append(
            f"{'total':<20} {self.rows_loaded:>12,} {self.rows_rejected:>9,} {self.seconds:>8.2f}"
        )
        return "\n".join(lines)


def shape(df: DataFrame, table: Schema, name: str, extra_columns: str = "error") -> DataFrame:
    """``df`` with the table's column names and Spark types (see the module docstring)."""
    picked = []
    extra = []
    for c in df.columns:
        target = find_column(table, c)
        if target is None:
            extra.append(c)
            continue
        t = spark_type(table.column(target).type)
        picked.append(F.col(f"`{c}`").cast(t).alias(target))
    if extra and extra_columns != "drop":
        raise ProgrammingError(
            f"column(s) {', '.join(extra)} of the input are not in table {name!r} "
            "(pass extra_columns='drop' to leave them out)"
        )
    return df.select(*picked)


def read_files(spark: SparkSession, files: Sequence[str], fmt: str) -> DataFrame:
    if fmt not in FORMATS:
        raise ProgrammingError(f"unknown input format {fmt!r}; expected parquet or csv")
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise ProgrammingError(f"input file(s) not found: {', '.join(missing)}")
    if fmt == "parquet":
        return spark.read.parquet(*files)
    return spark.read.option("header", "true").csv(list(files))


def load_tables(
    database: str,
    sources: Mapping[str, Sequence[str]],
    *,
    fmt: str = "parquet",
    master: str = "local[2]",
    operation: str = "insert",
    spark: SparkSession | None = None,
    ignore_row_errors: bool = False,
    extra_columns: str = "error",
) -> LoadSummary:
    """Load each table of ``sources`` (table -> files) from its files; the tables must
    exist. Returns what each load did; a table whose job fails raises (earlier tables
    stay loaded, that table gets nothing)."""
    db_path = database_path(database)
    spark = spark or spark_session(master, app_name="kudusql load")
    summary = LoadSummary(db_path)
    t_all = time.perf_counter()
    with Database(db_path, read_only=True) as db:
        schemas = {}
        for table in sources:
            name = storage_table_name(table)
            if not db.has_table(name):
                raise missing_table(table, db_path, db.table_names(), write=True)
            schemas[table] = db.table(name).schema
    for i, (table, files) in enumerate(sources.items(), 1):
        t0 = time.perf_counter()
        log.info("loading %s from %d %s file(s) (%d/%d)", table, len(files), fmt, i, len(sources))
        spark.sparkContext.setJobDescription(f"kudusql load {table}")
        df = shape(read_files(spark, files, fmt), schemas[table], table, extra_columns)
        with tempfile.TemporaryDirectory(prefix="kudusql-load-") as tmp:
            report = os.path.join(tmp, "report.json")
            (
                df.write.format("kudusql")
                .option("kudu.master", db_path)
                .option("kudu.table", table)
                .option("kudu.operation", operation)
                .option("kudu.ignoreRowErrors", str(ignore_row_errors).lower())
                .option("kudusql.reportFile", report)
                .mode("append")
                .save()
            )
            with open(report) as f:
                job = json.load(f)
        load = TableLoad(
            table,
            len(files),
            rows_loaded=int(job["rows_applied"]),
            rows_rejected=int(job["rows_rejected"]),
            seconds=time.perf_counter() - t0,
            sample_errors=list(job["sample_errors"]),
        )
        summary.tables[table] = load
        log.info(
            "loaded %s: %d rows, %d rejected, %.2f s",
            table,
            load.rows_loaded,
            load.rows_rejected,
            load.seconds,
        )
    spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    summary.seconds = time.perf_counter() - t_all
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m kudusql.spark.pipeline",
        description="Load Parquet or CSV files into kudusql tables through Spark.",
    )
    ap.add_argument("--db", required=True, help="the database directory")
    ap.add_argument("--format", default="parquet", choices=FORMATS)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--operation", default="insert")
    ap.add_argument("--ignore-row-errors", action="store_true")
    ap.add_argument("--drop-extra-columns", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("loads", nargs="+", metavar="TABLE=FILE[,FILE...]")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    sources: dict[str, list[str]] = {}
    for item in args.loads:
        table, eq, files = item.partition("=")
        if not eq or not files:
            ap.error(f"expected TABLE=FILE[,FILE...], got {item!r}")
        sources.setdefault(table, []).extend(files.split(","))
    try:
        summary = load_tables(
            args.db,
            sources,
            fmt=args.format,
            master=args.master,
            operation=args.operation,
            ignore_row_errors=args.ignore_row_errors,
            extra_columns="drop" if args.drop_extra_columns else "error",
        )
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(asdict(summary), indent=2))
    else:
        print(summary.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
