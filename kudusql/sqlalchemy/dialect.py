"""The SQLAlchemy dialect ``kudusql`` (``create_engine("kudusql:///path/to/db")``).

This module owns ``KuduSQLDialect``: what the URL means, how connections are pooled and
opened, what the dialect says about transactions, and reflection. Statements, DDL and
types are written by ``compiler.py``; reflection reads SHOW TABLES, SHOW DATABASES and
SHOW CREATE TABLE (``reflection.py``), the SQL any kudusql connection answers.

URLs: ``kudusql:///relative/path``, ``kudusql:////absolute/path``, ``kudusql://`` or
``kudusql:///:memory:`` (a temporary database removed when the engine is disposed). The
query string gives ``kudusql.connect`` options (``?flush_threshold_bytes=1048576``);
numbers and ``true``/``false`` are converted. ``kudusql://host:port`` (a cluster) is
refused until kudusql has a cluster mode.

Transactions: kudusql commits every statement when it returns (autocommit, as Impala on
Kudu); the dialect's one isolation level is ``AUTOCOMMIT``. COMMIT and ROLLBACK reach the
DB-API connection, where they do nothing: a rollback does not undo the writes before it.
SAVEPOINTs are refused. So that a failing row fails its statement, as SQLAlchemy and
the ORM expect, the dialect's connections set ``abort_on_error`` (a statement applies
entirely or raises IntegrityError / DataError), unless the URL or ``connect_args`` say
otherwise.

Dialect keywords: ``Table(..., kudusql_partition_by="HASH (id) PARTITIONS 4",
kudusql_tblproperties={...})`` and ``Column(..., kudusql_encoding=...,
kudusql_compression=..., kudusql_block_size=...)``. See docs/SQLALCHEMY.md.
"""

from __future__ import annotations

import re
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc, pool
from sqlalchemy.engine import default, reflection
from sqlalchemy.engine.url import URL
from sqlalchemy.sql.schema import Column, Table

from kudusql.parser.names import fold
from kudusql.sqlalchemy.compiler import (
    KuduSQLCompiler,
    KuduSQLDDLCompiler,
    KuduSQLIdentifierPreparer,
    KuduSQLTypeCompiler,
)
from kudusql.sqlalchemy.reflection import TableDefinition
from kudusql.sqlalchemy.types import sqlalchemy_type

if TYPE_CHECKING:
    from sqlalchemy.engine.base import Connection
    from sqlalchemy.engine.interfaces import (
        ConnectArgsType,
        DBAPIConnection,
        DBAPICursor,
        IsolationLevel,
        ReflectedCheckConstraint,
        ReflectedColumn,
        ReflectedForeignKeyConstraint,
        ReflectedIndex,
        ReflectedPrimaryKeyConstraint,
        ReflectedTableComment,
        ReflectedUniqueConstraint,
    )

#: The database a name without one belongs to.
DEFAULT_SCHEMA = "default"

_MEMORY = ":memory:"
_NUMBER = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def _option_value(value: str | tuple[str, ...]) -> Any:
    """A URL query value as the ``kudusql.connect`` option it stands for."""
    if isinstance(value, tuple):
        value = value[-1]
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    if _NUMBER.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    return value


class KuduSQLDialect(default.DefaultDialect):
    name = "kudusql"
    driver = "kudusql"
    supports_statement_cache = True

    statement_compiler = KuduSQLCompiler
    ddl_compiler = KuduSQLDDLCompiler
    type_compiler_cls = KuduSQLTypeCompiler
    preparer = KuduSQLIdentifierPreparer

    default_paramstyle = "qmark"
    # Kudu's limit on a table or column name.
    max_identifier_length = 256

    supports_native_boolean = True
    supports_native_decimal = True
    supports_native_enum = False
    supports_native_uuid = False
    supports_sequences = False
    supports_default_values = False
    supports_default_metavalue = False
    supports_empty_insert = False
    supports_multivalues_insert = True
    supports_alter = False
    supports_comments = True
    inline_comments = True
    supports_server_side_cursors = False
    insert_returning = False
    update_returning = False
    delete_returning = False
    postfetch_lastrowid = False
    # rowcount is the number of rows a statement applied, summed over executemany.
    supports_sane_rowcount = True
    supports_sane_multi_rowcount = True
    # "/" divides exactly (Impala and DuckDB), also between integers.
    div_is_floordiv = False
    requires_name_normalize = False

    construct_arguments = [  # noqa: RUF012 (SQLAlchemy reads this class attribute)
        (Table, {"partition_by": None, "tblproperties": None}),
        (Column, {"encoding": None, "compression": None, "block_size": None}),
    ]

    # -- the DB-API, URLs and connections -----------------------------------------------
    @classmethod
    def import_dbapi(cls) -> ModuleType:
        import kudusql.dbapi

        return kudusql.dbapi

    def create_connect_args(self, url: URL) -> ConnectArgsType:
        if url.host or url.port or url.username or url.password:
            raise exc.ArgumentError(
                f"kudusql URL {url.render_as_string(hide_password=True)!r} names a server; "
                "cluster connections arrive with the cluster mode. A database directory is "
                "kudusql:///relative/path or kudusql:////absolute/path (note the slashes), "
                "an in-memory database kudusql:// or kudusql:///:memory:"
            )
        options = {k: _option_value(v) for k, v in url.query.items()}
        options.setdefault("abort_on_error", True)
        return [url.database or _MEMORY], options

    @classmethod
    def get_pool_class(cls, url: URL) -> type[pool.Pool]:
        if (url.database or _MEMORY) == _MEMORY:
            # Each connect(":memory:") is a new database: the engine keeps one connection.
            return pool.StaticPool
        return pool.QueuePool

    def _get_server_version_info(self, connection: Connection) -> tuple[int, ...]:
        import kudusql

        return tuple(int(p) for p in re.findall(r"\d+", kudusql.__version__))

    def _get_default_schema_name(self, connection: Connection) -> str:
        return DEFAULT_SCHEMA

    def do_execute(
        self,
        cursor: DBAPICursor,
        statement: str,
        parameters: Any,
        context: Any = None,
    ) -> None:
        # DDL for which Kudu has nothing to do (an index) compiles to no statement.
        if statement.strip():
            cursor.execute(statement, parameters)

    def do_execute_no_params(
        self, cursor: DBAPICursor, statement: str, context: Any = None
    ) -> None:
        if statement.strip():
            cursor.execute(statement)

    # -- transactions -------------------------------------------------------------------
    def get_isolation_level_values(self, dbapi_conn: DBAPIConnection) -> list[IsolationLevel]:
        return ["AUTOCOMMIT"]

    def get_isolation_level(self, dbapi_connection: DBAPIConnection) -> IsolationLevel:
        return "AUTOCOMMIT"

    def set_isolation_level(self, dbapi_connection: DBAPIConnection, level: IsolationLevel) -> None:
        # AUTOCOMMIT is the only level (SQLAlchemy refuses the others before this).
        return None

    def _no_savepoints(self) -> exc.InvalidRequestError:
        return exc.InvalidRequestError(
            "kudusql has no transactions and no savepoints: every statement commits when it "
            "returns, so Session.begin_nested() and Connection.begin_nested() cannot work"
        )

    def do_savepoint(self, connection: Connection, name: str) -> None:
        raise self._no_savepoints()

    def do_rollback_to_savepoint(self, connection: Connection, name: str) -> None:
        raise self._no_savepoints()

    def do_release_savepoint(self, connection: Connection, name: str) -> None:
        raise self._no_savepoints()

    # -- reflection ---------------------------------------------------------------------
    def _in(self, schema: str | None) -> str:
        return "" if schema is None else " IN " + self.identifier_preparer.quote_schema(schema)

    def _qualified(self, table_name: str, schema: str | None) -> str:
        name = self.identifier_preparer.quote(table_name)
        if schema is None:
            return name
        return self.identifier_preparer.quote_schema(schema) + "." + name

    @reflection.cache
    def get_schema_names(self, connection: Connection, **kw: Any) -> list[str]:
        return [str(r[0]) for r in connection.exec_driver_sql("SHOW DATABASES")]

    @reflection.cache
    def get_table_names(
        self, connection: Connection, schema: str | None = None, **kw: Any
    ) -> list[str]:
        return [str(r[0]) for r in connection.exec_driver_sql("SHOW TABLES" + self._in(schema))]

    def get_view_names(
        self, connection: Connection, schema: str | None = None, **kw: Any
    ) -> list[str]:
        return []  # kudusql has no views

    def has_table(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> bool:
        self._ensure_has_table_connection(connection)
        if schema is not None:
            schemas = connection.exec_driver_sql("SHOW DATABASES")
            if fold(schema) not in {fold(str(r[0])) for r in schemas}:
                return False
        tables = connection.exec_driver_sql("SHOW TABLES" + self._in(schema))
        return fold(table_name) in {fold(str(r[0])) for r in tables}

    @reflection.cache
    def _definition(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> TableDefinition:
        if schema is not None and fold(schema) not in {
            fold(s) for s in self.get_schema_names(connection, **kw)
        }:
            raise exc.NoSuchTableError(f"{schema}.{table_name}")
        if fold(table_name) not in {
            fold(t) for t in self.get_table_names(connection, schema, **kw)
        }:
            raise exc.NoSuchTableError(table_name if schema is None else f"{schema}.{table_name}")
        sql = "SHOW CREATE TABLE " + self._qualified(table_name, schema)
        text = connection.exec_driver_sql(sql).scalar_one()
        return TableDefinition.parse(str(text))

    def get_columns(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[ReflectedColumn]:
        out: list[ReflectedColumn] = []
        for c in self._definition(connection, table_name, schema, **kw).columns:
            col: ReflectedColumn = {
                "name": c.name,
                "type": sqlalchemy_type(c.type),
                "nullable": c.nullable,
                "default": c.default,
                "autoincrement": c.autoincrement,
                "comment": c.comment,
            }
            if c.storage:
                col["dialect_options"] = {f"kudusql_{k}": v for k, v in c.storage.items()}
            out.append(col)
        return out

    def get_pk_constraint(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> ReflectedPrimaryKeyConstraint:
        key = self._definition(connection, table_name, schema, **kw).key
        return {"constrained_columns": list(key), "name": None}

    def get_table_options(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> dict[str, Any]:
        d = self._definition(connection, table_name, schema, **kw)
        out: dict[str, Any] = {}
        if d.partition_by is not None:
            out["kudusql_partition_by"] = d.partition_by
        if d.properties:
            out["kudusql_tblproperties"] = dict(d.properties)
        return out

    def get_table_comment(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> ReflectedTableComment:
        return {"text": self._definition(connection, table_name, schema, **kw).comment}

    def get_foreign_keys(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[ReflectedForeignKeyConstraint]:
        self._definition(connection, table_name, schema, **kw)
        return []  # Kudu has no foreign keys

    def get_indexes(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[ReflectedIndex]:
        self._definition(connection, table_name, schema, **kw)
        return []  # Kudu's one index is the primary key

    def get_unique_constraints(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[ReflectedUniqueConstraint]:
        self._definition(connection, table_name, schema, **kw)
        return []

    def get_check_constraints(
        self, connection: Connection, table_name: str, schema: str | None = None, **kw: Any
    ) -> list[ReflectedCheckConstraint]:
        self._definition(connection, table_name, schema, **kw)
        return []


dialect = KuduSQLDialect
