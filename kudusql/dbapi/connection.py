"""The PEP 249 connection and cursor.

This module owns ``connect``, ``Connection`` and ``Cursor``. A connection holds one
engine ``Session`` (the open database, the current database namespace, the settings).

Transactions: every statement commits when it returns (autocommit), as in Impala on
Kudu. A read-only connection (``read_only=True``) sees what the writer process has
committed when each statement starts (``refresh`` does it on demand). ``commit()``
has nothing to do and returns; ``rollback()`` cannot undo
a statement that has already committed, so it also does nothing (it exists so tools
that call it keep working). Closing a connection closes its database, and with
``":memory:"`` removes the temporary directory.

A cursor runs one statement at a time; its result is an Arrow table it hands out as
tuples (``fetchone``/``fetchmany``/``fetchall``, iteration), as Arrow
(``fetch_arrow_table``, ``fetch_record_batch``, the PyCapsule stream interface), as
pandas (``fetchdf``), polars (``pl``) or numpy (``fetchnumpy``). In Jupyter a cursor
shows the next rows of its result as an HTML table (``_repr_html_``) without taking
them. ``Connection.register`` lets SQL read a Python-side Arrow table or DataFrame by
name (``engine.relations``). ``rowcount`` is the number of rows
a DML statement applied (rows that failed are not counted; see ``warnings``), the number
of rows of a query result, or -1. ``timestamp`` is the HybridTime the statement read at
(queries) or its last write's (DML): ``SELECT ... FROM t FOR SYSTEM_TIME AS OF <it + 1>``
sees that write.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.cluster.client.database import RemoteDatabase
from kudusql.cluster.client.target import CLUSTER_OPTIONS, is_cluster_url
from kudusql.common.errors import InterfaceError, NotSupportedError, ProgrammingError, Warning
from kudusql.common.options import TabletOptions
from kudusql.dbapi.arrow_input import to_arrow_table
from kudusql.dbapi.types import describe
from kudusql.engine.params import Params
from kudusql.engine.result import Result
from kudusql.engine.session import Session
from kudusql.engine.settings import Settings
from kudusql.storage.tables.open_databases import open_database

_DB_KWARGS = {"read_only", "maintenance"}

#: Rows a cursor shows in Jupyter (``Cursor._repr_html_``).
HTML_ROWS = 10

#: How polars' ``read_database`` fetches a kudusql result as Arrow: whole
#: (``fetch_arrow_table``) or in batches of exactly ``batch_size`` rows
#: (``fetch_record_batch``, one call that returns a stream).
_POLARS_ARROW_PATH = {
    "fetch_all": "fetch_arrow_table",
    "fetch_batches": "fetch_record_batch",
    "exact_batch_size": True,
    "repeat_batch_calls": False,
    "minimum_version": None,
}
_polars_knows_kudusql = False


def _tell_polars() -> None:
    """Add kudusql to polars' registry of drivers whose results it reads as Arrow, once
    polars is imported (it is never imported here). ``polars.read_database`` chooses
    its Arrow path by the top-level module of the connection's class, looked up in that
    registry (``polars/io/database/_arrow_registry.py``), and reads tuples otherwise; it
    consults the registry only after calling ``execute``, which calls this."""
    global _polars_knows_kudusql
    if _polars_knows_kudusql:
        return
    reg = sys.modules.get("polars.io.database._arrow_registry")
    if reg is None:
        return
    registry = getattr(reg, "ARROW_DRIVER_REGISTRY", None)
    if isinstance(registry, dict):
        # polars 1 keeps one entry per driver, polars 2 a list of them (by version).
        listed = isinstance(registry.get("duckdb"), list)
        entry = dict(_POLARS_ARROW_PATH)
        registry.setdefault("kudusql", [entry] if listed else entry)
    _polars_knows_kudusql = True


def connect(path: str, **options: Any) -> Connection:
    """Open (creating if needed) the database directory ``path``; ``":memory:"`` is a
    temporary directory removed on close. Options: any ``TabletOptions`` field
    (``flush_threshold_bytes``, ``history_max_age_s``, ``threads``, ...), ``read_only``,
    ``maintenance`` (background flushes and compactions, default True) and the session
    settings (``abort_on_error``, ``dml_batch_rows``)."""
    if is_cluster_url(path):
        return _connect_cluster(path, options)
    fields = {f.name for f in dataclasses.fields(TabletOptions)}
    tablet = {k: v for k, v in options.items() if k in fields}
    db_kw = {k: v for k, v in options.items() if k in _DB_KWARGS}
    settings = {k: v for k, v in options.items() if Settings.is_setting(k)}
    unknown = set(options) - set(tablet) - set(db_kw) - set(settings)
    if unknown:
        known = sorted(fields | _DB_KWARGS | {"abort_on_error", "dml_batch_rows"})
        raise ProgrammingError(
            f"unknown option(s) {', '.join(sorted(unknown))}; known: {', '.join(known)}"
        )
    for k, v in db_kw.items():
        if not isinstance(v, bool):
            raise ProgrammingError(f"option {k!r} must be True or False, got {v!r}")
    # Every option is checked before anything is opened or created.
    tablet_options = TabletOptions().with_(**tablet)
    Settings(tablet_options, **settings)
    temp = None
    if isinstance(path, str) and path == ":memory:":
        temp = tempfile.mkdtemp(prefix="kudusql-")
        path = temp
    try:
        db, release = open_database(path, tablet, db_kw)
    except BaseException:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    try:
        session = Session(db, owns_db=False, **settings)
    except BaseException:
        release()
        raise
    return Connection(session, temp_dir=temp, release=release)


def _connect_cluster(url: str, options: dict[str, Any]) -> Connection:
    """A connection to the cluster whose master ``url`` names (``kudusql://HOST:PORT``):
    the SQL runs here, the rows live on the tablet servers. Options: the cluster's
    credentials (``secret``, ``secret_file``, ``tls_ca``, ``timeout``), ``threads``, and
    the session settings."""
    cluster = {k: v for k, v in options.items() if k in CLUSTER_OPTIONS}
    settings = {k: v for k, v in options.items() if Settings.is_setting(k)}
    local = {k: v for k, v in options.items() if k in _CLUSTER_CLIENT_OPTIONS}
    external_access = local.pop("external_access", False)
    if not isinstance(external_access, bool):
        raise ProgrammingError(
            f"option 'external_access' must be True or False, got {external_access!r}"
        )
    unknown = set(options) - set(cluster) - set(settings) - set(local)
    if unknown:
        known = sorted(
            CLUSTER_OPTIONS | _CLUSTER_CLIENT_OPTIONS | {"abort_on_error", "dml_batch_rows"}
        )
        raise ProgrammingError(
            f"unknown option(s) {', '.join(sorted(unknown))} for a cluster connection; "
            f"known: {', '.join(known)}"
        )
    tablet_options = TabletOptions().with_(**local)
    Settings(tablet_options, **settings)
    db = RemoteDatabase.open(url, options=tablet_options, **cluster)
    try:
        session = Session(db, owns_db=True, external_access=external_access, **settings)
    except BaseException:
        db.close()
        raise
    return Connection(session)


#: The client-side options of a cluster connection: its DuckDB's threads, and whether
#: statements may reach files and the network through DuckDB (off by default).
_CLUSTER_CLIENT_OPTIONS = frozenset({"threads", "external_access"})


class Connection:
    """A session on an open database. Threads may share a connection: its statements
    run one at a time (each thread can also have its own connection to the same
    database, which runs in parallel)."""

    def __init__(
        self,
        session: Session,
        *,
        temp_dir: str | None = None,
        release: Callable[[], None] | None = None,
    ) -> None:
        self._session: Session | None = session
        self._temp_dir = temp_dir
        self._release = release
        self._cursors: list[Cursor] = []
        #: Held while a statement of this connection runs or its result is fetched.
        self._lock = threading.RLock()

    @property
    def session(self) -> Session:
        if self._session is None:
            raise InterfaceError("the connection is closed")
        return self._session

    @property
    def read_only(self) -> bool:
        """Whether this connection reads a database another process writes."""
        return self.session.db.read_only

    @property
    def closed(self) -> bool:
        return self._session is None

    def cursor(self) -> Cursor:
        self.session  # noqa: B018 (InterfaceError once closed)
        c = Cursor(self)
        self._cursors.append(c)
        return c

    def commit(self) -> None:
        """Nothing to do: every statement committed when it returned (autocommit)."""
        self.session  # noqa: B018 (raises if closed)

    def rollback(self) -> None:
        """Nothing to undo: every statement committed when it returned (autocommit)."""
        self.session  # noqa: B018

    def close(self) -> None:
        if self._session is None:
            return
        for c in self._cursors:
            c._result = None
            c._closed = True
        with self._lock:
            session, self._session = self._session, None
            try:
                session.close()
            finally:
                if self._release is not None:
                    self._release()
                if self._temp_dir is not None:
                    shutil.rmtree(self._temp_dir, ignore_errors=True)

    def refresh(self) -> bool:
        """A read-only connection: take up what the writer process published now (every
        statement does so first anyway); whether anything changed. A writable
        connection always sees its own process's writes: False."""
        with self._lock:
            return self.session.db.refresh()

    def execute(self, sql: str, params: Params = None) -> Cursor:
        """A new cursor that ran ``sql`` (a shortcut, as in sqlite3 and DuckDB)."""
        return self.cursor().execute(sql, params)

    def register(self, name: str, obj: object) -> Connection:
        """Let this connection's SQL read ``obj`` as the table ``name`` (DuckDB's
        method): an Arrow table, record batch or stream, a pandas or polars DataFrame,
        or anything with ``__arrow_c_stream__`` (a stream is read once, here). Queries
        read it before any table of that name; it cannot be written. Registering a name
        again replaces the object."""
        data = to_arrow_table(obj)
        with self._lock:
            self.session.register(name, data)
        return self

    def unregister(self, name: str) -> Connection:
        """Forget a registered name (nothing happens for a name not registered, as in
        DuckDB)."""
        with self._lock:
            self.session.unregister(name)
        return self

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_session", None) is not None:
            with contextlib.suppress(Exception):  # at interpreter shutdown
                self.close()

    # PEP 249 optional extension: the exception classes as attributes.
    from kudusql.common.errors import (
        DatabaseError,
        DataError,
        Error,
        IntegrityError,
        InterfaceError,
        InternalError,
        NotSupportedError,
        OperationalError,
        ProgrammingError,
        Warning,
    )


class Cursor:
    arraysize: int = 1

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.arraysize = 1
        self._result: Result | None = None
        #: rowcount of the last statement, kept past close (as sqlite3 keeps it).
        self._rowcount_at_close = -1
        self._pos = 0
        self._closed = False
        self.warnings: list[str] = []
        self.messages: list[tuple[type[Warning], str]] = []

    def _session(self) -> Session:
        if self._closed:
            raise InterfaceError("the cursor is closed")
        return self.connection.session

    # -- running --------------------------------------------------------------------------
    def execute(self, operation: str, parameters: Params = None) -> Cursor:
        _tell_polars()
        with self.connection._lock:
            session = self._session()
            self._result = None
            self._pos = 0
            res = session.execute(operation, parameters)
            self._set(res)
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Params]) -> Cursor:
        with self.connection._lock:
            session = self._session()
            self._result = None
            self._pos = 0
            self._set(session.execute_many(operation, seq_of_parameters))
        return self

    def _set(self, res: Result) -> None:
        self._result = res
        self.warnings = list(res.warnings)
        self.messages = [(Warning, w) for w in res.warnings]

    @property
    def description(self) -> list[tuple[Any, ...]] | None:
        r = self._result
        if r is None or not r.has_rows:
            return None
        schema = r.table.schema if r.table is not None else r.row_schema
        assert schema is not None
        return describe(schema, r.null_ok)

    @property
    def rowcount(self) -> int:
        r = self._result
        if r is None:
            return self._rowcount_at_close if self._closed else -1
        if r.table is None and r.rows is not None:
            return len(r.rows)
        if r.table is not None:
            return int(r.table.num_rows)
        return r.rowcount

    @property
    def timestamp(self) -> int | None:
        return None if self._result is None else self._result.timestamp

    @property
    def lastrowid(self) -> None:
        return None

    # -- fetching -------------------------------------------------------------------------
    def _table(self) -> pa.Table:
        self._session()
        t = None if self._result is None else self._result.arrow()
        if t is None:
            raise ProgrammingError("no result set: the last statement returned no rows")
        return t

    def _take(self, n: int) -> list[tuple[Any, ...]]:
        r = self._result
        if r is not None and r.table is None and r.rows is not None:
            self._session()
            out = r.rows[self._pos : self._pos + max(0, n)]
            self._pos += len(out)
            return out
        t = self._table()
        part = t.slice(self._pos, max(0, n))
        self._pos += part.num_rows
        cols = [c.to_pylist() for c in part.columns]
        return list(zip(*cols, strict=True)) if cols else [() for _ in range(part.num_rows)]

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self._take(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        return self._take(self.arraysize if size is None else size)

    def fetchall(self) -> list[tuple[Any, ...]]:
        r = self._result
        if r is not None and r.table is None and r.rows is not None:
            return self._take(len(r.rows) - self._pos)
        t = self._table()
        return self._take(t.num_rows - self._pos)

    def fetch_arrow_table(self) -> pa.Table:
        """The rest of the result as an Arrow table."""
        t = self._table()
        out = t.slice(self._pos)
        self._pos = t.num_rows
        return out

    def fetch_record_batch(self, rows_per_batch: int = 1_000_000) -> pa.RecordBatchReader:
        """The rest of the result as a stream of Arrow record batches of at most
        ``rows_per_batch`` rows (DuckDB's name)."""
        if rows_per_batch < 1:
            raise ProgrammingError(f"rows_per_batch must be at least 1, not {rows_per_batch}")
        t = self.fetch_arrow_table()

        def batches() -> Iterator[pa.RecordBatch]:
            for off in range(0, t.num_rows, rows_per_batch):
                # A slice that spans chunks is joined; one within a chunk is not copied.
                yield from t.slice(off, rows_per_batch).combine_chunks().to_batches()

        return pa.RecordBatchReader.from_batches(t.schema, batches())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream interface over the rest of the result, so that
        ``pa.table(cursor)``, polars and DuckDB read it as Arrow, building no tuples.
        Each call exports the rest of the result again and takes none of it, as a
        table's does: DuckDB calls it once to bind a query and again to scan."""
        t = self._table()
        table: Any = t.slice(self._pos)  # pyarrow's stubs leave the method untyped
        return table.__arrow_c_stream__(requested_schema)

    def fetchnumpy(self) -> dict[str, Any]:
        """The rest of the result as numpy arrays by column name (DuckDB's name); a column
        holding NULLs is a masked array, masked where NULL."""
        out: dict[str, Any] = {}
        t = self.fetch_arrow_table()
        for name, col in zip(t.column_names, t.columns, strict=True):
            values = col.to_numpy(zero_copy_only=False)
            if col.null_count:
                mask = col.is_null().to_numpy(zero_copy_only=False)
                values = np.ma.masked_array(values, mask=mask)
            out[name] = values
        return out

    def arrow(self) -> pa.Table:
        """DuckDB's name for ``fetch_arrow_table``."""
        return self.fetch_arrow_table()

    def to_arrow_table(self) -> pa.Table:
        """DuckDB 2's name for ``fetch_arrow_table``."""
        return self.fetch_arrow_table()

    def df(self) -> Any:
        """DuckDB's name for ``fetchdf``."""
        return self.fetchdf()

    def fetch_df(self) -> Any:
        """DuckDB's name for ``fetchdf``."""
        return self.fetchdf()

    def pl(self, *, lazy: bool = False) -> Any:
        """The rest of the result as a polars DataFrame (DuckDB's name; needs polars),
        or a LazyFrame over it with ``lazy=True``."""
        try:
            import polars
        except ImportError:
            raise NotSupportedError(
                "pl() needs polars, which is not installed: pip install polars "
                "(or use fetch_arrow_table)"
            ) from None
        df = polars.DataFrame(self.fetch_arrow_table())
        return df.lazy() if lazy else df

    def fetchdf(self) -> Any:
        """The rest of the result as a pandas DataFrame (needs pandas)."""
        try:
            import pandas  # type: ignore[import-untyped]  # noqa: F401
        except ImportError:
            raise NotSupportedError(
                "fetchdf needs pandas, which is not installed: pip install pandas "
                "(or use fetch_arrow_table)"
            ) from None
        return self.fetch_arrow_table().to_pandas()

    def _repr_html_(self) -> str | None:
        """Jupyter's view of a cursor with a result: its next ``HTML_ROWS`` rows (those
        a fetch would return next) as an HTML table, and how many rows are left. It
        takes no rows: fetching afterwards returns the same rows."""
        r = self._result
        if self._closed or r is None or not r.has_rows:
            return None
        t = r.arrow()
        assert t is not None
        left = t.num_rows - self._pos
        head = t.slice(self._pos, HTML_ROWS)
        cols = [c.to_pylist() for c in head.columns]
        out = ["<table>", "<thead><tr>"]
        out += [f"<th>{html.escape(str(n))}</th>" for n in t.column_names]
        out.append("</tr></thead><tbody>")
        for i in range(head.num_rows):
            cells = ("NULL" if c[i] is None else html.escape(str(c[i])) for c in cols)
            out.append("<tr>" + "".join(f"<td>{v}</td>" for v in cells) + "</tr>")
        out.append("</tbody></table>")
        shown = f", the first {head.num_rows} shown" if left > head.num_rows else ""
        out.append(
            f"<p>{left} row{'' if left == 1 else 's'} x {t.num_columns} "
            f"column{'' if t.num_columns == 1 else 's'}{shown}</p>"
        )
        return "".join(out)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while True:
            row = self.fetchone()
            if row is None:
                return
            yield row

    # -- PEP 249 no-ops and lifecycle --------------------------------------------------------
    def setinputsizes(self, sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def close(self) -> None:
        if not self._closed:
            self._rowcount_at_close = self.rowcount
        self._closed = True
        self._result = None

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
