"""``KuduContext``: kudu-spark's helper for table management and row writes, for kudusql.

Mirrors ``org.apache.kudu.spark.kudu.KuduContext`` in Python names: ``table_exists``,
``delete_table``, ``create_table`` from a DataFrame schema with key columns and
partitioning, ``insert_rows``, ``insert_ignore_rows``, ``upsert_rows``, ``update_rows``,
``delete_rows``, ``delete_ignore_rows`` and ``read``. Writes go through the data source
(so each is one all-or-nothing job) and return the job's summary; the timestamp of the
last write is kept (``last_timestamp_micros``: the highest timestamp of the writes
made through this context that applied something) for reads that must see it, as
kudu-spark's timestamp accumulator does. DDL opens the database as its writer for the
duration of the call only. A write with ``repartition=True`` (``kudu.repartition``)
first repartitions the DataFrame by the table's partitioning (``repartition.py``). The
constructor checks that Spark's Python workers can import kudusql
(``session.check_worker_python``). ``master`` may name a cluster (``HOST:PORT`` or
``kudusql://HOST:PORT``): DDL then goes to its master, and writes are the data source's
cluster writes (not all-or-nothing, see ``writer.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from kudusql.client.partitioning import Partitioning
from kudusql.cluster.client.target import SCHEME, ClusterTarget
from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.spark import cluster
from kudusql.spark.options import (
    cluster_target,
    database_path,
    names_cluster,
    parse_options,
    storage_table_name,
)
from kudusql.spark.publish import JobSummary
from kudusql.spark.repartition import repartition_by_tablet
from kudusql.spark.session import check_worker_python
from kudusql.spark.source import missing_table
from kudusql.spark.spark_schema import kudusql_type, pruned_schema
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.handles import DatabaseHandle


class KuduContext:
    def __init__(
        self,
        master: str,
        spark: SparkSession,
        *,
        secret_file: str | None = None,
        tls_ca: str | None = None,
    ) -> None:
        """``master``: a directory, or a cluster's ``HOST:PORT`` / ``kudusql://HOST:PORT``
        (``secret_file`` and ``tls_ca`` as the ``kudusql.secretFile`` and
        ``kudusql.tlsCa`` options)."""
        check_worker_python(spark)
        self.master = master
        self.cluster: ClusterTarget | None = None
        self._cluster_options: dict[str, str] = {}
        if names_cluster(master):
            self.cluster = cluster_target(master, secret_file=secret_file, tls_ca=tls_ca)
            self.database = f"{SCHEME}{self.cluster.address}"
            self._cluster_options = {
                k: v
                for k, v in (("kudusql.secretFile", secret_file), ("kudusql.tlsCa", tls_ca))
                if v
            }
            with cluster.open_database(self.cluster):
                pass  # reachable, credentials accepted: fail here, not in the first job
        else:
            self.database = database_path(master)
        self.spark = spark
        self.last_timestamp_micros: int | None = None

    def _reader(self) -> contextlib.AbstractContextManager[DatabaseHandle]:
        """The database for a look at its catalog (read-only when it is a directory)."""
        if self.cluster is not None:
            return cluster.open_database(self.cluster)
        return Database(self.database, read_only=True)

    def _writer(self) -> contextlib.AbstractContextManager[DatabaseHandle]:
        """The database for DDL (as its writer when it is a directory)."""
        if self.cluster is not None:
            return cluster.open_database(self.cluster)
        return Database(self.database, maintenance=False)

    def _exists(self) -> bool:
        return self.cluster is not None or os.path.isdir(self.database)

    # -- tables ---------------------------------------------------------------------------
    def table_exists(self, table: str) -> bool:
        if not self._exists():
            return False
        with self._reader() as db:
            return db.has_table(storage_table_name(table))

    def delete_table(self, table: str) -> None:
        with self._writer() as db:
            db.drop_table(storage_table_name(table))

    def create_table(
        self,
        table: str,
        schema: StructType,
        keys: Sequence[str],
        *,
        hash_partitions: Sequence[tuple[Sequence[str], int]] = (),
        partitioning: Partitioning | None = None,
        properties: dict[str, str] | None = None,
    ) -> None:
        """Create ``table`` with the columns of ``schema`` (keys first, in ``keys``
        order, NOT NULL) hash-partitioned by ``hash_partitions`` ((columns, buckets)
        pairs) or by a full ``Partitioning``."""
        core = table_schema(schema, keys)
        if partitioning is None:
            partitioning = Partitioning()
            for cols, buckets in hash_partitions:
                partitioning.add_hash_partitions(list(cols), buckets)
        elif hash_partitions:
            raise ProgrammingError("give hash_partitions or partitioning, not both")
        with self._writer() as db:
            db.create_table(
                storage_table_name(table),
                core,
                partitioning.to_partition_schema(core),
                properties=properties,
            )

    # -- reads ----------------------------------------------------------------------------
    def read(
        self,
        table: str,
        snapshot_micros: int | None = None,
        columns: Sequence[str] | None = None,
    ) -> DataFrame:
        """``table`` as a DataFrame; with ``columns``, only those (Spark prunes no
        columns of a Python data source, so this is the way to read fewer), with the
        table's types and nullability."""
        reader = self.spark.read.format("kudusql").options(**self._options(table))
        if snapshot_micros is not None:
            reader = reader.option("kudu.snapshotTimestampMicros", str(snapshot_micros))
        if columns is not None:
            name = storage_table_name(table)
            with self._reader() as db:
                if not db.has_table(name):
                    raise ProgrammingError(f"table {table!r} does not exist in {self.database}")
                schema = db.table(name).schema
            reader = reader.schema(pruned_schema(schema, table, list(columns)))
        return reader.load()

    # -- writes ---------------------------------------------------------------------------
    def insert_rows(self, df: DataFrame, table: str, **options: Any) -> JobSummary:
        return self.write_rows(df, table, "insert", **options)

    def insert_ignore_rows(self, df: DataFrame, table: str, **options: Any) -> JobSummary:
        return self.write_rows(df, table, "insert_ignore", **options)

    def upsert_rows(self, df: DataFrame, table: str, **options: Any) -> JobSummary:
        return self.write_rows(df, table, "upsert", **options)

    def update_rows(self, df: DataFrame, table: str, **options: Any) -> JobSummary:
        return self.write_rows(df, table, "update", **options)

    def delete_rows(self, df: DataFrame, table: str, **options: Any) -> JobSummary:
        return self.write_rows(df, table, "delete", **options)

    def delete_ignore_rows(self, df: DataFrame, table: str, **options: Any) -> JobSummary:
        return self.write_rows(df, table, "delete_ignore", **options)

    def write_rows(
        self, df: DataFrame, table: str, operation: str, *, overwrite: bool = False, **options: Any
    ) -> JobSummary:
        """Write ``df`` to ``table`` with ``operation`` in one job; options are data
        source options (``ignore_row_errors=True`` is ``kudu.ignoreRowErrors``, ...)."""
        keys = self._write_target(table)
        with tempfile.TemporaryDirectory(prefix="kudusql-job-") as tmp:
            report = os.path.join(tmp, "report.json")
            opts = self._options(table)
            opts["kudu.operation"] = operation
            opts["kudusql.reportFile"] = report
            for k, v in options.items():
                opts[_option_name(k)] = str(v).lower() if isinstance(v, bool) else str(v)
            if operation in ("delete", "delete_ignore"):
                df = df.select(*[_df_column(df, k) for k in keys])
            parsed = parse_options(opts)
            if parsed.repartition:
                df = self._repartition(df, parsed.table, sort=parsed.repartition_sort)
            writer = df.write.format("kudusql").options(**opts)
            writer.mode("overwrite" if overwrite else "append").save()
            with open(report) as f:
                summary = JobSummary(**json.load(f))
        if summary.timestamp_micros is not None:
            self.last_timestamp_micros = max(
                self.last_timestamp_micros or 0, summary.timestamp_micros
            )
        return summary

    def _repartition(self, df: DataFrame, name: str, *, sort: bool) -> DataFrame:
        with self._reader() as db:
            meta = db.table(name).meta
        return repartition_by_tablet(
            df, meta.schema, meta.partition_schema, len(meta.tablets), sort=sort
        )

    def _write_target(self, table: str) -> list[str]:
        """The key columns of ``table``, checked here on the driver: a missing table is
        a plain ProgrammingError saying what to do, not a failed Spark job."""
        name = storage_table_name(table)
        if self._exists():
            with self._reader() as db:
                if db.has_table(name):
                    return list(db.table(name).schema.key_names)
                names = db.table_names()
        else:
            names = []
        raise missing_table(table, self.database, names, write=True)

    def _options(self, table: str) -> dict[str, str]:
        master = self.master if self.cluster is not None else self.database
        return {"kudu.master": master, "kudu.table": table, **self._cluster_options}


#: Keyword names whose option is not the camel-cased ``kudu.`` name.
_OPTION_NAMES = {"repartition_sort": "kudu.repartition.sort"}


def _option_name(key: str) -> str:
    """``ignore_row_errors`` -> ``kudu.ignoreRowErrors``; dotted names pass through."""
    if "." in key:
        return key
    if key in _OPTION_NAMES:
        return _OPTION_NAMES[key]
    head, *rest = key.split("_")
    return "kudu." + head + "".join(p.capitalize() for p in rest)


def _df_column(df: DataFrame, name: str) -> str:
    for c in df.columns:
        if c.lower() == name.lower():
            return c
    raise ProgrammingError(f"the DataFrame lacks primary key column {name!r}")


def table_schema(schema: StructType, keys: Sequence[str]) -> Schema:
    """A kudusql schema from a Spark schema: ``keys`` first (NOT NULL), then the rest."""
    by_name = {f.name: f for f in schema.fields}
    missing = [k for k in keys if k not in by_name]
    if not keys:
        raise ProgrammingError("a table needs at least one primary key column")
    if missing:
        raise ProgrammingError(f"key column(s) {', '.join(missing)} are not in the schema")
    cols = [ColumnSchema(k, kudusql_type(by_name[k].dataType, k), nullable=False) for k in keys]
    cols += [
        ColumnSchema(f.name, kudusql_type(f.dataType, f.name), nullable=f.nullable)
        for f in schema.fields
        if f.name not in keys
    ]
    return Schema(tuple(cols), len(keys))
