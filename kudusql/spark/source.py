"""``DefaultSource``: the kudusql data source as Spark sees it (``format("kudusql")``).

Spark imports the top-level modules ``pyspark_*`` in its Python workers and registers
the ``DefaultSource`` of each under its ``name()``, so no registration call is needed:
``pyspark_kudusql`` registers ``kudusql``, and ``pyspark_kudusql_kudu`` and
``pyspark_kudusql_kudu_spark`` register the same source as kudu-spark's names,
``kudu`` and ``org.apache.kudu.spark.kudu`` (``KuduAlias``, ``KuduSparkAlias``; Spark
resolves a JVM source of the same name first, so with kudu-spark's jar on the
classpath those names are kudu-spark's). ``register(spark)`` in
``kudusql.spark.session`` registers all three explicitly. The source reads the table's
schema from the database (opened read-only), and hands out a reader (``reader``), a
writer (``writer``) or a streaming writer (``streamWriter``) for one table. Planning a
write with ``kudu.handleSchemaDrift`` first adds the DataFrame's new columns to the
table (``add_new_columns``). When ``kudu.master`` names a cluster, the driver plans
through the cluster's master (``cluster.open_database``) and the writers are the
cluster's (``ClusterWriter``, ``ClusterStreamWriter``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import ColumnSchema
from kudusql.spark import cluster
from kudusql.spark.options import SourceOptions, parse_options
from kudusql.spark.publish import JobPlan, open_writer
from kudusql.spark.reader import KudusqlReader
from kudusql.spark.spark_schema import (
    check_write_schema,
    find_column,
    kudusql_type,
    read_columns,
    spark_schema,
)
from kudusql.spark.staging import new_job_dir
from kudusql.spark.streaming import ClusterStreamWriter, KudusqlStreamWriter
from kudusql.spark.writer import ClusterWriter, KudusqlWriter
from kudusql.storage.tables.alter import AddColumn
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.handles import DatabaseHandle, TableHandle
from kudusql.storage.tables.staging import StagingTarget, can_stage, staging_target

log = logging.getLogger("kudusql.spark")

#: pyspark's worker prints an error's message without its Python traceback when this
#: variable is set in the worker process (``pyspark.util.handle_worker_exception``).
_HIDE_TRACEBACK = "SPARK_HIDE_TRACEBACK"
_hid_traceback = False


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Around the source's driver-side entry points: a ``ProgrammingError`` (a missing
    table, a DataFrame that does not fit it) reaches the user as Spark's wrapper and its
    message, with no Python traceback. The variable is set only on that error's way out
    (Spark formats it after this returns) and taken back at the next entry, so errors
    of other code keep their tracebacks."""
    global _hid_traceback
    if _hid_traceback:
        os.environ.pop(_HIDE_TRACEBACK, None)
        _hid_traceback = False
    try:
        yield
    except ProgrammingError:
        if _HIDE_TRACEBACK not in os.environ:
            os.environ[_HIDE_TRACEBACK] = "1"
            _hid_traceback = True
        raise


def missing_table(table: str, database: str, names: list[str], *, write: bool) -> ProgrammingError:
    listed = ", ".join(names) or "none"
    text = f"table {table!r} does not exist in {database} (tables: {listed})"
    if write:
        text += ": create the table first (KuduContext.create_table or CREATE TABLE)"
    return ProgrammingError(text)


def open_table(db: DatabaseHandle, opts: SourceOptions, *, write: bool = False) -> TableHandle:
    if not db.has_table(opts.table):
        raise missing_table(opts.table, opts.database, db.table_names(), write=write)
    return db.table(opts.table)


def open_database(opts: SourceOptions) -> contextlib.AbstractContextManager[DatabaseHandle]:
    """The job's database for the driver's planning: the directory opened read-only, or
    a connection to the cluster; closed after the block."""
    if opts.cluster is not None:
        return cluster.open_database(opts.cluster)
    return Database(opts.database, read_only=True)


def add_new_columns(opts: SourceOptions, schema: StructType) -> None:
    """``kudu.handleSchemaDrift``: add each DataFrame column the table lacks (matched
    ignoring case) as a nullable column of the Spark type's kudusql type, as kudu-spark
    does; a column another writer added meanwhile is kept as it is."""
    with open_database(opts) as db:
        have = open_table(db, opts, write=True).schema
    new = [f for f in schema.fields if find_column(have, f.name) is None]
    if not new:
        return
    steps = [
        AddColumn(ColumnSchema(f.name, kudusql_type(f.dataType, f.name)), if_not_exists=True)
        for f in new
    ]
    if opts.cluster is not None:
        with cluster.open_database(opts.cluster) as db:
            open_table(db, opts, write=True)
            db.alter_table(opts.table, steps)
    else:
        with open_writer(opts.database, opts.lock_timeout_s) as wdb:
            open_table(wdb, opts, write=True)
            wdb.alter_table(opts.table, steps)
    log.info(
        "kudusql: added %d column(s) to table %r for schema drift: %s",
        len(new),
        opts.table,
        ", ".join(f.name for f in new),
    )


class DefaultSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kudusql"

    def _opts(self) -> SourceOptions:
        return parse_options(self.options)

    def schema(self) -> StructType:
        with user_errors():
            opts = self._opts()
            with open_database(opts) as db:
                return spark_schema(open_table(db, opts).schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        with user_errors():
            opts = self._opts()
            with open_database(opts) as db:
                table = open_table(db, opts).schema
            columns = read_columns(table, opts.table, schema)
            return KudusqlReader(opts, columns, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        with user_errors():
            opts = self._opts()
            if opts.cluster is not None:
                return ClusterWriter(self._cluster_plan(opts, schema, overwrite, stream=False))
            plan, table = self._plan(opts, schema, overwrite, stream=False)
            return KudusqlWriter(plan, table)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming sink (Spark calls this when the query starts, and again for
        every batch's commit); see ``kudusql.spark.streaming``."""
        with user_errors():
            opts = self._opts()
            if opts.cluster is not None:
                return ClusterStreamWriter(self._cluster_plan(opts, schema, overwrite, stream=True))
            plan, table = self._plan(opts, schema, overwrite, stream=True)
            return KudusqlStreamWriter(plan, table, self.options.get("checkpointLocation"))

    def _cluster_plan(
        self, opts: SourceOptions, schema: StructType, overwrite: bool, *, stream: bool
    ) -> JobPlan:
        """A write to a cluster: overwrite, which would need the embedded commit's
        atomicity, is refused (a stream's complete mode by ``ClusterStreamWriter``)."""
        assert opts.cluster is not None
        if overwrite and not stream:
            raise ProgrammingError(
                "overwrite mode is not supported on a cluster (nor by kudu-spark): it would "
                "delete and insert in many tablet transactions, not one; write with mode "
                "append, or delete the rows first"
            )
        if opts.handle_schema_drift:
            add_new_columns(opts, schema)
        with cluster.open_database(opts.cluster) as db:
            table = open_table(db, opts, write=True)
            meta = table.meta
            columns = check_write_schema(meta.schema, opts.table, schema, opts.operation)
            return JobPlan(
                database=opts.database,
                table=opts.table,
                table_id=0,
                schema_version=meta.schema_version,
                columns=tuple(columns),
                operation=opts.operation,
                overwrite=overwrite,
                ignore_null=opts.ignore_null,
                ignore_row_errors=opts.ignore_row_errors,
                job_dir="",
                report_file=opts.report_file,
                cluster=opts.cluster,
                table_id_text=str(table.id),
            )

    def _plan(
        self, opts: SourceOptions, schema: StructType, overwrite: bool, *, stream: bool
    ) -> tuple[JobPlan, StagingTarget]:
        if opts.handle_schema_drift:
            add_new_columns(opts, schema)
        with Database(opts.database, read_only=True) as db:
            open_table(db, opts, write=True)
            table = db.table(opts.table)
            meta = table.meta
            op = "insert" if overwrite else opts.operation
            if overwrite and opts.operation not in ("upsert", "insert"):
                raise ProgrammingError(
                    f"overwrite mode truncates the table and inserts; it cannot be combined "
                    f"with kudu.operation={opts.operation}"
                )
            if overwrite and not meta.schema.key_unique:
                raise ProgrammingError(
                    f"overwrite mode is not supported for table {opts.table!r}: it has a "
                    "non-unique primary key (write with kudu.operation=insert)"
                )
            columns = check_write_schema(meta.schema, opts.table, schema, op)
            # An INSERT into an empty table: tasks write DiskRowSets the commit adopts.
            rowsets = (
                not stream
                and op == "insert"
                and not overwrite
                and not opts.ignore_row_errors
                and can_stage(table)
            )
            plan = JobPlan(
                database=opts.database,
                table=opts.table,
                table_id=meta.id,
                schema_version=meta.schema_version,
                columns=tuple(columns),
                operation=op,
                overwrite=overwrite,
                ignore_null=opts.ignore_null,
                ignore_row_errors=opts.ignore_row_errors,
                # a streaming query stages each batch in its own directory (streaming.py)
                job_dir="" if stream else new_job_dir(opts.database),
                report_file=opts.report_file,
                stage_rowsets=rowsets,
                lock_timeout_s=opts.lock_timeout_s,
            )
            return plan, staging_target(table)


class KuduAlias(DefaultSource):
    """The source under kudu-spark's short name, ``format("kudu")``."""

    @classmethod
    def name(cls) -> str:
        return "kudu"


class KuduSparkAlias(DefaultSource):
    """The source under kudu-spark's package name, ``format("org.apache.kudu.spark.kudu")``."""

    @classmethod
    def name(cls) -> str:
        return "org.apache.kudu.spark.kudu"


#: Every name the source answers to.
SOURCES: tuple[type[DefaultSource], ...] = (DefaultSource, KuduAlias, KuduSparkAlias)
