"""The SQL entry point: a session parses, plans and executes statements.

This module owns ``Session``: the open ``Database``, the current database namespace
(``USE``), the settings (``SET``), the DuckDB runner, and the dispatch of every typed
statement. Semantics:

- **One snapshot per statement.** A statement reads every table it names at one
  snapshot taken when it starts (a reference with ``AS OF`` reads at its own).
- **DML** reads at that snapshot, then writes by key at a new timestamp; a statement
  whose rows fit one write batch (``dml_batch_rows``) becomes visible at once across
  all tablets. UPDATE and DELETE hold off the table's other writers from their read to
  their write (``Table.exclusive``), so no write lands in between (no lost updates).
  Failed rows are skipped and reported as warnings unless ``abort_on_error`` is set
  (then the statement applies all rows or raises).
- **Autocommit**: each statement commits when it returns; there are no transactions.
- **DDL** goes straight to the storage catalog (``Database.create_table`` ...).
- **Registered relations** (``relations``, ``engine.relations``): Arrow data the
  connection registered under a name, which queries read before any table of that name.
- **A read-only session follows the writer process**: before each statement its view
  takes up what the writer published (``Database.refresh``), so each statement reads
  the latest state the commit log allows.

Every error is a ``kudusql.common.errors`` class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from sqlglot import exp

from kudusql.common.errors import Error, ProgrammingError
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType, TypeKind
from kudusql.engine import ddl, introspect
from kudusql.engine.databases import DatabaseRegistry
from kudusql.engine.fastpath import StatementCache
from kudusql.engine.params import Params, bind, plain_param_sets, plain_params
from kudusql.engine.plan_cache import CachedQuery, PlanCache, RecordingResolver
from kudusql.engine.relations import RegisteredRelations
from kudusql.engine.result import Result
from kudusql.engine.settings import Settings
from kudusql.executor.dml import (
    MAX_ERROR_SAMPLES,
    DmlResult,
    timestamp_out_of_range,
    write_batches,
)
from kudusql.executor.duck import DuckRunner, duck_sql
from kudusql.parser import statements as st
from kudusql.parser.convert import parse
from kudusql.parser.limits import check_cancelled, headroom, nesting_bound, too_deep
from kudusql.parser.locate import located
from kudusql.parser.names import TableName, fold
from kudusql.planner.dml import (
    Param,
    assigned_columns,
    delete_query,
    target_columns,
    update_query,
    values_query,
)
from kudusql.planner.names import DEFAULT_DATABASE, find_table, storage_name
from kudusql.planner.plan import QueryPlan, plan_query
from kudusql.storage.tables import system_tables
from kudusql.storage.tables.database import ConcurrentDdlError
from kudusql.storage.tables.handles import DatabaseHandle, TableHandle
from kudusql.storage.tables.table import ROW_PATH_ROWS


class Session:
    """A connection's state; runs one statement at a time (the DB-API connection holds
    its lock around each)."""

    def __init__(
        self,
        db: DatabaseHandle,
        *,
        owns_db: bool = True,
        external_access: bool | None = None,
        **settings: Any,
    ) -> None:
        """``external_access``: whether statements may read and write files and the
        network through DuckDB (``read_csv``, ``COPY``...); by default yes on an
        embedded database (the user's own process and files), no on a cluster."""
        self.db = db
        self.owns_db = owns_db
        self.settings = Settings(db.options, **settings)
        self.database = DEFAULT_DATABASE
        self.registry = DatabaseRegistry(db)
        if external_access is None:
            external_access = db.master_address is None
        self.runner = DuckRunner(db, external_access=external_access)
        self.relations = RegisteredRelations(self.runner)
        self.statements = StatementCache()
        self.plans = PlanCache()
        self.closed = False

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.runner.close()
        if self.owns_db:
            self.db.close()

    # -- names -------------------------------------------------------------------------------
    def storage_name(self, name: TableName) -> str:
        return storage_name(name, self.database)

    def register(self, name: object, data: pa.Table) -> None:
        """Let queries read ``data`` as the table ``name`` (``engine.relations``)."""
        self.relations.register(name, data)
        self.plans.clear()  # a cached plan may have bound the name to a table

    def unregister(self, name: str) -> bool:
        """Forget a registered name; whether it was registered."""
        self.plans.clear()
        return self.relations.unregister(name)

    def has_table(self, name: TableName) -> bool:
        """Whether ``name`` denotes a Kudu table (ignoring registered relations)."""
        sname = self.storage_name(name)
        return self.db.has_table(sname) or find_table(self.db.table_names(), sname) is not None

    def table(self, name: TableName) -> TableHandle:
        """The table ``name`` denotes: its storage name, else the one equal to it ignoring
        case (SQL names are case-insensitive; see ``parser.names``). A name registered on
        the session is refused (``RegisteredRelations.refuse``)."""
        if len(self.relations):
            self.relations.refuse(name, self.database)
        sname = self.storage_name(name)
        if not self.db.has_table(sname):
            found = find_table(self.db.table_names(), sname)
            if found is not None:
                return self.db.table(found)
            db = name.database or self.database
            if not self.registry.exists(db):
                raise ProgrammingError(f"database {db!r} does not exist")
            raise ProgrammingError(f"table {_display(name, self.database)!r} does not exist")
        return self.db.table(sname)

    def resolve(self, name: TableName) -> tuple[str, Schema]:
        if (name.database or self.database) == system_tables.SYSTEM_DATABASE:
            return f"{system_tables.SYSTEM_DATABASE}.{name.name}", system_tables.schema_of(
                name.name
            )
        t = self.table(name)
        return t.name, t.schema

    # -- entry points -------------------------------------------------------------------------
    def scan_progress(self) -> tuple[int, int] | None:
        """(rows read, rows stored) while the running statement reads its tables (an
        estimate: deleted and filtered rows count in the total), else None."""
        return self.runner.scan_rows

    def interrupt(self) -> None:
        """Cancel the statement running in this session (call from another thread); it
        raises OperationalError("statement cancelled"). DuckDB work stops at once, scans
        at their next batch, DML before its next write batch (batches written stay)."""
        self.runner.interrupt()

    def execute(self, sql: str, params: Params = None) -> Result:
        """Run every statement of ``sql``; the last one's result (warnings of all). A
        statement nests at most ``limits.MAX_NESTING`` levels (ProgrammingError past it,
        from any caller's stack depth)."""
        params = plain_params(params)
        try:
            if self.db.read_only:
                return self._following_the_writer(lambda: self._execute_text(sql, params))
            return self._execute_text(sql, params)
        except Error as e:
            if getattr(e, "offender", None) is None:
                raise
            raise located(e, sql) from None

    def _following_the_writer(self, run: Callable[[], Result]) -> Result:
        """``run()`` on a read-only view that first takes up what the writer process
        published (``Database.statement``). A statement that met a table the writer
        dropped or altered after that runs once more, on the writer's new catalog."""
        for attempt in (1, 2):
            with self.db.statement():
                try:
                    return run()
                except ConcurrentDdlError:
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    def _execute_text(self, sql: str, params: Params) -> Result:
        self.runner.cancelled.clear()
        fast_paths = self.db.options.fast_paths
        if fast_paths and self.statements.analysed(sql):
            # A statement analysed before parses nothing and recurses little: the fast
            # paths' common case skips the stack bookkeeping below.
            try:
                res = self._fast(sql, params)
            except RecursionError:  # the caller left almost no stack
                raise too_deep() from None
            if res is not None:
                return res
        with headroom(nesting_bound(sql)):
            return self._execute(sql, params)

    def _fast(self, sql: str, params: Params) -> Result | None:
        """The fast paths' answer for ``sql``, or None for the general path."""
        fast = self.statements.get(sql, self.runner.cancelled)
        if fast is None:
            return None
        stmt, lookup = fast
        if lookup is not None:
            return lookup.run(self, params)
        if not isinstance(stmt, st.Insert | st.Upsert):
            return None
        if params is not None:
            return self._insert_many(stmt, [params])
        return self._insert(stmt)

    def _execute(self, sql: str, params: Params) -> Result:
        fast_paths = self.db.options.fast_paths
        if fast_paths:
            res = self._fast(sql, params)
            if res is not None:
                return res
        if params is not None:
            sql = bind(sql, params)
        cached = self.plans.get(sql, self.database, self.resolve) if fast_paths else None
        if cached is not None:
            return self._run_planned(cached)
        stmts = self.statements.parsed(sql) or parse(sql, cancelled=self.runner.cancelled)
        if not stmts:
            raise ProgrammingError("no SQL statement to execute")
        warnings: list[str] = []
        res = Result()
        for s in stmts:
            if len(stmts) == 1 and isinstance(s, st.Query) and fast_paths:
                res = self.query(s.ast, text=sql)
            else:
                res = self.execute_statement(s)
            warnings += res.warnings
        res.warnings = warnings
        return res

    def execute_many(self, sql: str, seq_of_params: Sequence[Params]) -> Result:
        """Run ``sql`` once per parameter set; an INSERT or UPSERT of constant VALUES
        becomes one batched write of every row."""
        seq_of_params = plain_param_sets(seq_of_params)
        if self.db.read_only:
            return self._following_the_writer(lambda: self._execute_many(sql, seq_of_params))
        return self._execute_many(sql, seq_of_params)

    def _execute_many(self, sql: str, seq_of_params: Sequence[Params]) -> Result:
        self.runner.cancelled.clear()
        seq = list(seq_of_params)
        with headroom(nesting_bound(sql)):
            stmts = parse(sql, cancelled=self.runner.cancelled)
            if len(stmts) == 1 and isinstance(stmts[0], st.Insert | st.Upsert) and seq:
                res = self._insert_many(stmts[0], seq)
                if res is not None:
                    return res
        total = Result(rowcount=0)
        for p in seq:
            r = self.execute(sql, p)
            total.warnings += r.warnings
            total.rowcount += max(0, r.rowcount)
            total.timestamp = r.timestamp
        if not seq:
            total.rowcount = 0
        return total

    def execute_statement(self, s: st.Statement) -> Result:
        if isinstance(s, st.Query):
            return self.query(s.ast)
        if isinstance(s, st.Insert | st.Upsert):
            return self._insert(s)
        if isinstance(s, st.Update):
            return self._update(s)
        if isinstance(s, st.Delete):
            return self._delete(s)
        handler = ddl.HANDLERS.get(type(s)) or introspect.HANDLERS.get(type(s))
        if handler is None:
            raise ProgrammingError(f"{type(s).__name__} statements are not supported yet")
        return handler(self, s)

    # -- queries ------------------------------------------------------------------------------
    def plan(self, tree: exp.Expr) -> QueryPlan:
        return plan_query(
            tree,
            self.resolve,
            relations=self.relations.get,
            cancelled=self.runner.cancelled,
            current_database=self.database,
        )

    def shadow_warnings(self, plan: QueryPlan) -> list[str]:
        """Warnings for registered names ``plan`` read that also name a table."""
        if not plan.relations:
            return []
        return self.relations.shadow_warnings(
            plan, lambda n: self.has_table(TableName(fold(n))), self.database
        )

    def query(self, tree: exp.Expr, text: str | None = None) -> Result:
        """Run a query; with its statement ``text``, the plan is cached for the next
        execution of the same text (``PlanCache``)."""
        if text is None:
            snap = self.db.snapshot()
            plan = self.plan(tree)
            return _query_result(self.runner.query(plan, snap), plan, snap, self)
        resolver = RecordingResolver(self.resolve)
        database = self.database
        plan = plan_query(
            tree,
            resolver,
            relations=self.relations.get,
            cancelled=self.runner.cancelled,
            current_database=database,
        )
        cached = CachedQuery(plan, duck_sql(plan.tree), tuple(resolver.seen))
        check_cancelled(self.runner.cancelled)
        self.plans.put(text, database, cached)
        return self._run_planned(cached)

    def _run_planned(self, cached: CachedQuery) -> Result:
        snap = self.db.snapshot()
        data = self.runner.query(cached.plan, snap, cached.sql)
        return _query_result(data, cached.plan, snap, self)

    # -- DML --------------------------------------------------------------------------------
    def _op(self, s: st.Insert | st.Upsert) -> WriteOp:
        if isinstance(s, st.Upsert):
            return WriteOp.UPSERT
        return WriteOp.INSERT_IGNORE if s.ignore else WriteOp.INSERT

    def _finish(
        self, verb: str, res: DmlResult, snap: int | None = None, plan: QueryPlan | None = None
    ) -> Result:
        """The result of a write; ``plan``: the query that gave its rows."""
        return Result(
            rowcount=res.applied,
            warnings=(self.shadow_warnings(plan) if plan else []) + res.warnings(verb),
            timestamp=res.timestamp if res.timestamp is not None else snap,
        )

    def _write(
        self,
        table: TableHandle,
        data: Any,
        columns: Sequence[str],
        op: WriteOp,
        atomic: bool | None = None,
    ) -> DmlResult:
        """Writes the batches; ``atomic``: the ``abort_on_error`` setting unless given."""
        batches = data if isinstance(data, list) else [data]
        return write_batches(
            table,
            batches,
            columns,
            op,
            atomic=self.settings.abort_on_error if atomic is None else atomic,
            batch_rows=self.settings.dml_batch_rows,
            cancelled=self.runner.cancelled,
        )

    def _write_rows(
        self,
        table: TableHandle,
        rows: list[list[Any]],
        columns: Sequence[str],
        op: WriteOp,
        atomic: bool | None = None,
    ) -> DmlResult:
        """``_write`` for the rows of an INSERT/UPSERT VALUES: a few rows go to
        ``Table.write_rows`` as Python values (the row path), more as Arrow batches."""
        if atomic is None:
            atomic = self.settings.abort_on_error
        if (
            len(rows) > ROW_PATH_ROWS
            or not self.db.options.fast_paths
            or _timestamps_out_of_range(table, rows, columns)
        ):
            return self._write(table, table.rows_to_arrow(columns, rows), columns, op, atomic)
        check_cancelled(self.runner.cancelled)
        wr = table.write_rows(columns, rows, op, atomic=atomic)
        return DmlResult(
            applied=wr.applied,
            ignored=wr.ignored,
            error_count=len(wr.errors),
            errors=wr.errors[:MAX_ERROR_SAMPLES],
            timestamp=wr.timestamp,
        )

    def _insert(self, s: st.Insert | st.Upsert) -> Result:
        table = self.table(s.table)
        _check_upsert(s, table)
        verb = "UPSERT" if isinstance(s, st.Upsert) else "INSERT"
        cols = target_columns(table.schema, s.columns, table.name, verb)
        src = s.source
        if isinstance(src, exp.Values):
            _check_values_width(src, cols, table.name)
            rows = self.statements.values_rows(s)
            if rows is not None:
                if any(isinstance(v, Param) for r in rows for v in r):
                    raise ProgrammingError("the statement has parameters but none were given")
                return self._finish(verb, self._write_rows(table, rows, cols, self._op(s)))
            tree: exp.Expr = values_query(src, cols)
        else:
            tree = src
        plan = self.plan(tree)
        # A read-modify-write (``UPSERT INTO t SELECT ... FROM t``) like UPDATE: nothing
        # else writes the table between the read and the write.
        with table.exclusive() as snap:
            data = self.runner.query(plan, snap)
            res = self._write(table, data, cols, self._op(s))
        return self._finish(verb, res, snap, plan)

    def _insert_many(self, s: st.Insert | st.Upsert, seq: Sequence[Params]) -> Result | None:
        src = s.source
        if not isinstance(src, exp.Values):
            return None
        rows = self.statements.values_rows(s)
        if rows is None:
            return None
        table = self.table(s.table)
        _check_upsert(s, table)
        verb = "UPSERT" if isinstance(s, st.Upsert) else "INSERT"
        cols = target_columns(table.schema, s.columns, table.name, verb)
        _check_values_width(src, cols, table.name)
        nparams = sum(isinstance(v, Param) for r in rows for v in r)
        out: list[list[Any]] = []
        for p in seq:
            get: Any
            if isinstance(p, Mapping):
                get = p.__getitem__
            else:
                if p is None or len(p) != nparams:
                    n = 0 if p is None else len(p)
                    raise ProgrammingError(
                        f"the statement has {nparams} parameter(s) but {n} were given"
                    )
                get = p.__getitem__
            for r in rows:
                try:
                    out.append([get(v.key) if isinstance(v, Param) else v for v in r])
                except (KeyError, IndexError):
                    raise ProgrammingError(f"no value for a parameter of {s.text!r}") from None
        verb = "UPSERT" if isinstance(s, st.Upsert) else "INSERT"
        return self._finish(verb, self._write_rows(table, out, cols, self._op(s)))

    def _update(self, s: st.Update) -> Result:
        table = self.table(s.table)
        tree = update_query(s, table.schema, table.name)
        cols = [*table.schema.key_names, *assigned_columns(s, table.schema, table.name)]
        plan = self.plan(tree)
        with table.exclusive() as snap:  # nothing else writes between the read and the write
            data = self.runner.query(plan, snap)
            res = self._write(table, data, cols, WriteOp.UPDATE)
        return self._finish("UPDATE", res, snap, plan)

    def _delete(self, s: st.Delete) -> Result:
        table = self.table(s.table)
        tree = delete_query(s, table.schema)
        cols = table.schema.key_names
        plan = self.plan(tree)
        with table.exclusive() as snap:
            data = self.runner.query(plan, snap)
            res = self._write(table, data, cols, WriteOp.DELETE)
        return self._finish("DELETE", res, snap, plan)

    # -- CREATE TABLE ... AS SELECT -------------------------------------------------------------
    def schema_from_arrow(
        self, data: pa.Schema, key: Sequence[str], table: str, *, key_unique: bool = True
    ) -> tuple[Schema, list[str]]:
        """A table schema for query results (key columns first, NOT NULL; then the hidden
        ``auto_incrementing_id`` if the key is not unique); the result's column order for
        writing."""
        names = list(data.names)
        for k in key:
            if k not in names:
                raise ProgrammingError(
                    f"primary key column {k!r} of {table!r} is not a column of the query"
                )
        if len(set(names)) != len(names):
            raise ProgrammingError(f"the query for {table!r} has duplicate column names")
        order = [*key, *(n for n in names if n not in key)]
        cols = []
        for n in order:
            f = data.field(n)
            dtype = DataType.from_arrow(f.type, f.metadata)
            cols.append(ColumnSchema(n, dtype, nullable=n not in key))
        return Schema.build(cols, list(key), key_unique=key_unique), order


def _query_result(table: pa.Table, plan: QueryPlan, snap: int, session: Session) -> Result:
    null_ok = plan.null_ok
    if null_ok is None or len(null_ok) != table.num_columns:
        null_ok = (None,) * table.num_columns  # DuckDB marks every column nullable
    return Result(
        table=table, timestamp=snap, null_ok=null_ok, warnings=session.shadow_warnings(plan)
    )


def _display(name: TableName, current: str) -> str:
    db = name.database or current
    return name.name if db == DEFAULT_DATABASE else f"{db}.{name.name}"


def _check_upsert(s: st.Insert | st.Upsert, table: TableHandle) -> None:
    """Impala refuses UPSERT into a table with a non-unique primary key (Kudu would need
    the hidden auto_incrementing_id of every row)."""
    if isinstance(s, st.Upsert) and not table.schema.key_unique:
        raise ProgrammingError(
            f"UPSERT is not supported for Kudu tables with auto-incrementing column "
            f"({table.name!r} has a non-unique primary key)"
        )


def _timestamps_out_of_range(
    table: TableHandle, rows: list[list[Any]], columns: Sequence[str]
) -> bool:
    """Some row holds a TIMESTAMP outside Impala's range: the batch path reports it
    (``executor.dml.timestamp_range_errors``); the row path would store it."""
    schema = table.schema
    stamps = [
        i
        for i, c in enumerate(columns)
        if schema.has_column(c) and schema.column(c).type.kind is TypeKind.TIMESTAMP
    ]
    return any(timestamp_out_of_range(row[i]) for i in stamps for row in rows)


def _check_values_width(values: exp.Values, cols: Sequence[str], table: str) -> None:
    for tup in values.expressions:
        n = len(tup.expressions) if isinstance(tup, exp.Tuple) else 1
        if n != len(cols):
            raise ProgrammingError(
                f"INSERT into {table!r}: {len(cols)} column(s) ({', '.join(cols)}) but a "
                f"VALUES row has {n} value(s)"
            )
