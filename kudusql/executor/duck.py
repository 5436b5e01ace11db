"""DuckDB in process: running planned queries over Arrow scans of storage tables.

This module owns the DuckDB connection of a session and every call into DuckDB. For a
``QueryPlan`` it reads each scan (``Table.scan`` with the plan's columns and pushed
predicates, at the statement snapshot or the reference's AS OF snapshot), registers the
Arrow table under the scan's unique name, runs the rewritten query
(``parser.to_duckdb_sql``) and unregisters the scans. Relations registered on the session
(``register_relation``) stay registered until unregistered, and DuckDB scans them
itself, as it does every Arrow table. Scans are materialized Arrow
tables, not one-shot readers, because DuckDB may read a source more than once (CTEs,
correlated subqueries). DuckDB errors become kudusql errors in the user's terms
(``parser.errors.duckdb_message``): scan names replaced by the table names the user
wrote, no internal names or rewritten SQL, and what the error is about kept for the
session to point at in the statement.
"""

from __future__ import annotations

import contextlib
import datetime
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from kudusql.common.errors import (
    DataError,
    Error,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)
from kudusql.common.hybrid_time import from_micros
from kudusql.executor import impala_functions
from kudusql.parser import to_duckdb_sql
from kudusql.parser.errors import duckdb_message, with_offender
from kudusql.parser.limits import check_cancelled
from kudusql.parser.names import fold
from kudusql.planner.plan import ChangesScan, QueryPlan, TableScan
from kudusql.storage.tables import system_tables
from kudusql.storage.tables.handles import DatabaseHandle

#: The one column of a scan that reads no column (the query only counts its rows).
ROWS_ONLY = "__kudusql_rows"

_SCAN_NAME = re.compile(r"__kudusql_(?:scan|changes|registered)_\d+")


def to_error(e: duckdb.Error, plan: QueryPlan | None = None) -> Error:
    """A DuckDB exception as the kudusql (PEP 249) error a user expects."""
    if isinstance(e, duckdb.InterruptException):  # ``DuckRunner.interrupt``
        return OperationalError("statement cancelled")
    msg = str(e)
    if plan is not None:
        msg = _SCAN_NAME.sub(lambda m: plan.display_name(m.group(0)), msg)
    msg, offender = duckdb_message(msg)
    if isinstance(e, duckdb.PermissionException):
        # ``DuckRunner(external_access=False)``: a cluster connection by default.
        return ProgrammingError(
            f"{msg}: this connection's statements do not reach files or the network "
            "(connect with external_access=True to allow it)"
        )
    return with_offender(_error_class(e)(msg), offender)


def _error_class(e: duckdb.Error) -> type[Error]:
    if isinstance(e, duckdb.ParserException | duckdb.BinderException | duckdb.CatalogException):
        return ProgrammingError
    if isinstance(e, duckdb.NotImplementedException):
        return NotSupportedError
    if isinstance(
        e,
        duckdb.ConversionException
        | duckdb.OutOfRangeException
        | duckdb.InvalidInputException
        | duckdb.TypeMismatchException,
    ):
        return DataError
    if isinstance(e, duckdb.ProgrammingError):
        return ProgrammingError
    return OperationalError


def _hybrid_time(value: Any, what: str) -> int:
    """A HybridTime from an AS OF value: an integer is one; a TIMESTAMP (naive values
    are UTC) or DATE is wall-clock time."""
    if isinstance(value, bool) or value is None:
        raise ProgrammingError(f"{what} must be a TIMESTAMP or an integer HybridTime")
    if isinstance(value, int):
        if value < 0:
            raise ProgrammingError(f"{what}: a HybridTime is not negative")
        return value
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
        return from_micros((value - epoch) // datetime.timedelta(microseconds=1))
    if isinstance(value, datetime.date):
        return _hybrid_time(datetime.datetime.combine(value, datetime.time()), what)
    raise ProgrammingError(f"{what} must be a TIMESTAMP or an integer HybridTime, not {value!r}")


@dataclass
class Snapshotter:
    """Evaluates AS OF expressions and validates snapshots against the database."""

    db: DatabaseHandle
    con: duckdb.DuckDBPyConnection
    #: The macros of Impala's functions defined on ``con`` (``impala_functions``).
    functions: set[str]

    def hybrid_time(self, expr: Any, what: str) -> int:
        from sqlglot import exp

        if isinstance(expr, exp.Literal) and not expr.is_string and expr.name.isdigit():
            return int(expr.name)
        try:
            sql = f"SELECT {duck_sql(expr)}"
            impala_functions.install(self.con, sql, self.functions)
            rel: Any = self.con.sql(sql)
            rows = rel.fetchall()
            row = rows[0] if rows else None
        except duckdb.Error as e:
            raise to_error(e) from None
        return _hybrid_time(row[0] if row else None, what)


class DuckRunner:
    """One DuckDB connection per session (not shared between threads).

    ``external_access=False`` switches off DuckDB's own reach beyond the rows kudusql
    hands it: files (``read_csv``, ``glob``, ``COPY``, ``ATTACH``), the network and
    extension installs fail with a permission error."""

    def __init__(self, db: DatabaseHandle, *, external_access: bool = True) -> None:
        self.db = db
        config: dict[str, Any] = {"threads": max(1, db.options.threads)}
        if not external_access:
            config["enable_external_access"] = False
        self.con = duckdb.connect(config=config)
        # kudusql's timestamps are UTC (Kudu's UNIXTIME_MICROS): so is every conversion
        # DuckDB makes between a TIMESTAMP and an instant (``now()``, time zones).
        self.con.execute("SET TimeZone = 'UTC'")
        #: The macros of Impala's functions defined on ``con`` (``impala_functions``).
        self.functions: set[str] = set()
        self.snapshots = Snapshotter(db, self.con, self.functions)
        #: Set by ``interrupt``: scans stop between batches, DML between writes.
        self.cancelled = threading.Event()
        #: (rows read, rows stored) of the statement's storage scans while they run.
        self.scan_rows: tuple[int, int] | None = None

    def interrupt(self) -> None:
        """Cancel the running statement (from another thread): DuckDB stops at once,
        storage scans at their next batch, DML before its next write."""
        self.cancelled.set()
        with contextlib.suppress(duckdb.Error):
            self.con.interrupt()

    def close(self) -> None:
        with contextlib.suppress(duckdb.Error):
            self.con.close()

    # -- registered relations ----------------------------------------------------------------
    def register_relation(self, ref: str, data: pa.Table) -> tuple[tuple[str, str], ...]:
        """Hold ``data`` as the DuckDB view ``ref`` (replacing one of that name) until
        ``unregister_relation``; its (column name, DuckDB type) pairs."""
        try:
            self.con.register(ref, data)
            rel: Any = self.con.table(ref)
            return tuple((str(n), str(t)) for n, t in zip(rel.columns, rel.types, strict=True))
        except duckdb.Error as e:
            with contextlib.suppress(duckdb.Error):
                self.con.unregister(ref)
            raise to_error(e) from None

    def unregister_relation(self, ref: str) -> None:
        with contextlib.suppress(duckdb.Error):
            self.con.unregister(ref)

    # -- scans -------------------------------------------------------------------------------
    def read_scan(self, scan: TableScan, snapshot: int) -> pa.Table:
        """The scan's rows, columns named by their folded names as the planned query
        knows them (DuckDB folds only ASCII letters itself)."""
        data = self._read_scan(scan, snapshot)
        if data.num_columns:
            return data.rename_columns([fold(n) for n in data.column_names])
        # A scan of no column (COUNT(*)): storage counts rows without reading pages;
        # DuckDB needs one column, and a NULL-typed one costs no memory.
        return pa.table({ROWS_ONLY: pa.nulls(data.num_rows)})

    def _read_scan(self, scan: TableScan, snapshot: int) -> pa.Table:
        sysdb, dot, sysname = scan.table.partition(".")
        if dot and sysdb == system_tables.SYSTEM_DATABASE:  # DuckDB applies the WHERE
            return self.db.system_table(sysname).select(scan.columns)
        table = self.db.table(scan.table)
        snap = snapshot
        if scan.as_of is not None:
            snap = self.snapshots.hybrid_time(scan.as_of, f"AS OF of {scan.alias or scan.table}")
        # DuckDB applies the whole WHERE clause: pushed predicates only need to prune.
        hints = [p.advisory() for p in scan.predicates]
        reader = table.scan(scan.columns, hints, snapshot=snap)
        batches = []
        for b in reader:
            check_cancelled(self.cancelled)
            batches.append(b)
            if self.scan_rows is not None:
                done, total = self.scan_rows
                self.scan_rows = (done + b.num_rows, max(total, done + b.num_rows))
        return pa.Table.from_batches(batches, schema=reader.schema)

    def read_changes(self, ch: ChangesScan, snapshot: int) -> pa.Table:
        """The rows changed in [start, end), their values at end, ``change_type``
        (insert, update or delete relative to start) and ``is_deleted``."""
        table = self.db.table(ch.table)
        start = self.snapshots.hybrid_time(ch.start, "table_changes start")
        end = (
            snapshot if ch.end is None else self.snapshots.hybrid_time(ch.end, "table_changes end")
        )
        if end < start:
            raise ProgrammingError("table_changes: the end is before the start")
        diff = table.diff_scan(start, end).read_all()
        keys = table.schema.key_names
        before = table.scan(keys, snapshot=start).read_all() if diff.num_rows else None
        if before is None:
            before = table.schema.arrow_schema(keys).empty_table()
        diff = diff.rename_columns([fold(n) for n in diff.column_names])
        before = before.rename_columns([fold(n) for n in before.column_names])
        self.con.register("__kudusql_diff", diff)
        self.con.register("__kudusql_before", before)
        try:
            on = " AND ".join(f"d.{_duck_name(fold(k))} = b.{_duck_name(fold(k))}" for k in keys)
            cols = ", ".join(f"d.{_duck_name(fold(c))}" for c in table.schema.names)
            sql = (
                f"SELECT {cols}, CASE WHEN d.is_deleted THEN 'delete' "
                f"WHEN b.{_duck_name(fold(keys[0]))} IS NOT NULL THEN 'update' ELSE 'insert' END "
                "AS change_type, d.is_deleted FROM __kudusql_diff d "
                f"LEFT JOIN __kudusql_before b ON {on}"
            )
            out: pa.Table = self.con.sql(sql).to_arrow_table()
            return out
        finally:
            self.con.unregister("__kudusql_diff")
            self.con.unregister("__kudusql_before")

    @contextlib.contextmanager
    def registered(self, plan: QueryPlan, snapshot: int) -> Iterator[None]:
        """Every scan of ``plan`` read and registered for the duration of the block."""
        names: list[str] = []
        try:
            self.scan_rows = (0, sum(self._stored_rows(s) for s in plan.scans))
            for s in plan.scans:
                data = self.read_scan(s, snapshot)
                self.con.register(s.ref, data)
                names.append(s.ref)
            for c in plan.changes:
                self.con.register(c.ref, self.read_changes(c, snapshot))
                names.append(c.ref)
            self.scan_rows = None
            yield
        finally:
            self.scan_rows = None
            for n in names:
                with contextlib.suppress(duckdb.Error):
                    self.con.unregister(n)

    def _stored_rows(self, scan: TableScan) -> int:
        sysdb, dot, _ = scan.table.partition(".")
        if dot and sysdb == system_tables.SYSTEM_DATABASE:
            return 0
        return self.db.table(scan.table).estimated_rows()

    # -- queries -----------------------------------------------------------------------------
    def query(self, plan: QueryPlan, snapshot: int, sql: str | None = None) -> pa.Table:
        """Run ``plan`` (``sql``: its DuckDB text, if already generated) with every
        table read at ``snapshot`` (or its AS OF)."""
        with self.registered(plan, snapshot):
            return self.run_sql(sql if sql is not None else duck_sql(plan.tree), plan)

    def run_sql(self, sql: str, plan: QueryPlan | None = None) -> pa.Table:
        try:
            impala_functions.install(self.con, sql, self.functions)
            rel = self.con.sql(sql)
            if rel is None:
                return pa.table({})
            huge = [i for i, t in enumerate(rel.types) if str(t) == "HUGEINT"]
            return _small_ints(_plain_strings(rel.to_arrow_table()), huge)
        except duckdb.Error as e:
            raise to_error(e, plan) from None

    def explain(self, plan: QueryPlan, snapshot: int) -> str:
        with self.registered(plan, snapshot):
            try:
                sql = f"EXPLAIN {duck_sql(plan.tree)}"
                impala_functions.install(self.con, sql, self.functions)
                rows = self.con.sql(sql).fetchall()
            except duckdb.Error as e:
                raise to_error(e, plan) from None
        return "\n".join(str(r[1]) for r in rows)


def duck_sql(tree: Any) -> str:
    """The DuckDB SQL of a planned query (``parser.to_duckdb_sql``), its columns labelled
    as DuckDB labels what the user wrote."""
    return to_duckdb_sql(tree, label=_label)


def _label(sql: str) -> str:
    """DuckDB's label of an expression (its parser's name for it, as in a result)."""
    try:
        return str(duckdb.SQLExpression(sql).get_name())
    except duckdb.Error:
        return sql


def _duck_name(name: str) -> str:
    """``name`` quoted for DuckDB's SQL."""
    return '"' + name.replace('"', '""') + '"'


def _small_ints(t: pa.Table, huge: list[int]) -> pa.Table:
    """HUGEINT columns (``sum`` of BIGINT, ...) as BIGINT when every value fits, as
    DuckDB's own Python API returns them (Arrow would make them DECIMAL(38,0))."""
    for i in huge:
        col = t.column(i)
        try:
            t = t.set_column(i, t.field(i).name, col.cast(pa.int64(), safe=True))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return t


def _plain_strings(t: pa.Table) -> pa.Table:
    """string_view columns as string (pyarrow lacks kernels for string_view)."""
    if not any(
        pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type) for f in t.schema
    ):
        return t
    fields = [
        pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else pa.binary())
        if pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type)
        else f
        for f in t.schema
    ]
    return t.cast(pa.schema(fields))
