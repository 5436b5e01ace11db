"""``DefaultSource``: the kudusql data source as Spark sees it (``format("kudusql")``).

Spark imports the top-level module ``pyspark_kudusql`` in its Python workers and
registers this class under its ``name()``, so no registration call is needed;
``register(spark)`` in ``kudusql.spark.session`` does it explicitly. The source reads
the table's schema from the database (opened read-only), and hands out a reader
(``reader``) or a writer (``writer``) for one table.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from kudusql.common.errors import ProgrammingError
from kudusql.spark.options import SourceOptions, parse_options
from kudusql.spark.publish import JobPlan
from kudusql.spark.reader import KudusqlReader
from kudusql.spark.spark_schema import check_write_schema, read_columns, spark_schema
from kudusql.spark.staging import new_job_dir
from kudusql.spark.writer import KudusqlWriter
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.staging import can_stage, staging_target
from kudusql.storage.tables.table import Table

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


def open_table(db: Database, opts: SourceOptions, *, write: bool = False) -> Table:
    if not db.has_table(opts.table):
        raise missing_table(opts.table, opts.database, db.table_names(), write=write)
    return db.table(opts.table)


class DefaultSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kudusql"

    def _opts(self) -> SourceOptions:
        return parse_options(self.options)

    def schema(self) -> StructType:
        with user_errors():
            opts = self._opts()
            with Database(opts.database, read_only=True) as db:
                return spark_schema(open_table(db, opts).schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        with user_errors():
            opts = self._opts()
            with Database(opts.database, read_only=True) as db:
                table = open_table(db, opts).schema
            columns = read_columns(table, opts.table, schema)
            return KudusqlReader(opts, columns, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        with user_errors():
            return self._writer(schema, overwrite)

    def _writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = self._opts()
        with Database(opts.database, read_only=True) as db:
            table = open_table(db, opts, write=True)
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
                op == "insert" and not overwrite and not opts.ignore_row_errors and can_stage(table)
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
                job_dir=new_job_dir(opts.database),
                report_file=opts.report_file,
                stage_rowsets=rowsets,
            )
            return KudusqlWriter(plan, staging_target(table))
