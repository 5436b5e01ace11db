"""Introspection statements: SHOW, DESCRIBE, COMPUTE STATS and EXPLAIN.

This module owns the result sets of SHOW DATABASES, SHOW TABLES, DESCRIBE, SHOW CREATE
TABLE (canonical kudusql DDL that recreates the table), SHOW [RANGE] PARTITIONS, SHOW
TABLE STATS, SHOW COLUMN STATS, COMPUTE STATS, SHOW SETTINGS and EXPLAIN (per scan: the
columns, the pushed predicates and the tablets left after partition pruning; then
DuckDB's plan).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from sqlglot import exp

from kudusql.common.errors import NotSupportedError, ProgrammingError
from kudusql.common.schema import ColumnSchema
from kudusql.common.types import DataType
from kudusql.engine.params import literal_sql
from kudusql.engine.result import Result
from kudusql.parser import statements as st
from kudusql.parser.column_storage import shown_compression, shown_encoding
from kudusql.parser.names import quote
from kudusql.planner.dml import delete_query, target_columns, update_query, values_query
from kudusql.planner.names import DEFAULT_DATABASE, split_storage_name, sql_name, storage_name
from kudusql.storage.tables.handles import TableHandle
from kudusql.storage.tables.partition import HashDimension, RangeBounds
from kudusql.storage.tables.pruning import prune_partitions
from kudusql.storage.tables.range_format import format_range, sql_value

if TYPE_CHECKING:
    from kudusql.engine.session import Session


def _rows(
    names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    types: Sequence[pa.DataType] = (),
    **kw: Any,
) -> Result:
    """A result set; each column is ``types[i]`` (numbers and booleans typed as they are,
    Impala's result types), STRING when not given."""
    cols: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
    kinds = list(types) + [pa.string()] * (len(names) - len(types))
    arrays = [pa.array(list(c), type=k) for c, k in zip(cols, kinds, strict=True)]
    return Result(table=pa.table(arrays, names=list(names)), **kw)


def _like(pattern: str | None) -> Callable[[str], bool]:
    """Impala's SHOW ... LIKE: ``*`` any characters, ``|`` alternatives, no case."""
    if pattern is None:
        return lambda _: True
    alts = [re.escape(p.strip()).replace(r"\*", ".*") for p in pattern.split("|")]
    rx = re.compile("^(?:" + "|".join(alts) + ")$", re.IGNORECASE)
    return lambda name: rx.match(name) is not None


def show_databases(session: Session, s: st.ShowDatabases) -> Result:
    ok = _like(s.like)
    rows = [(n, session.registry.comment(n)) for n in session.registry.names() if ok(n)]
    return _rows(["name", "comment"], rows)


def show_tables(session: Session, s: st.ShowTables) -> Result:
    db = s.database or session.database
    stored = session.registry.find(db)
    if stored is None:
        raise ProgrammingError(f"database {db!r} does not exist")
    ok = _like(s.like)
    names = [sql_name(t).rpartition(".")[2] for t in session.registry.tables(stored)]
    return _rows(["name"], [(n,) for n in sorted(names) if ok(n)])


def _type_sql(c: ColumnSchema) -> str:
    """The column type as Impala writes it (``INT``, ``BIGINT``, ``DECIMAL(9,2)``)."""
    from kudusql.common.types import TypeKind

    names = {
        TypeKind.BOOL: "BOOLEAN",
        TypeKind.INT8: "TINYINT",
        TypeKind.INT16: "SMALLINT",
        TypeKind.INT32: "INT",
        TypeKind.INT64: "BIGINT",
        TypeKind.STRING: "STRING",
    }
    return names.get(c.type.kind) or str(c.type)


def default_text(v: Any) -> str:
    """A default value as Impala's DESCRIBE prints it: the value itself, unquoted
    (``abc``, ``100.00``, ``true``, ``2009-01-01 00:00:00``)."""
    import datetime

    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    return str(v)


DESCRIBE_COLUMNS = (
    ("name", pa.string()),
    ("type", pa.string()),
    ("comment", pa.string()),
    ("primary_key", pa.bool_()),
    ("key_unique", pa.bool_()),
    ("nullable", pa.bool_()),
    ("default_value", pa.string()),
    ("encoding", pa.string()),
    ("compression", pa.string()),
    ("block_size", pa.int32()),
)


def describe(session: Session, s: st.Describe) -> Result:
    """Impala's DESCRIBE of a Kudu table: one row per column; types in lower case;
    ``key_unique`` says for a key column whether the key is unique (false for a NON
    UNIQUE PRIMARY KEY, whose hidden ``auto_incrementing_id`` is listed), NULL for other columns
    (Impala prints an empty cell); ``block_size`` 0 when unset. A name registered on the
    session describes the registered object: its columns, their DuckDB types in lower
    case, nullable, and no key or storage attributes."""
    rel = session.relations.get(s.table)
    if rel is not None:
        names, types = zip(*DESCRIBE_COLUMNS, strict=True)
        shown: list[tuple[Any, ...]] = [
            (n, t.lower(), "", False, None, True, "", "", "", 0) for n, t in rel.columns
        ]
        return _rows(names, shown, types)
    t = session.table(s.table)
    schema = t.schema
    rows = []
    for c in schema.columns:
        key = schema.is_key(c.name)
        rows.append(
            (
                c.name,
                _type_sql(c).lower(),
                c.comment,
                key,
                schema.key_unique if key else None,
                c.nullable,
                "" if c.default is None else default_text(c.default),
                shown_encoding(c.encoding),
                shown_compression(c.compression),
                c.block_size or 0,
            )
        )
    names, types = zip(*DESCRIBE_COLUMNS, strict=True)
    return _rows(names, rows, types)


def _ranges(t: TableHandle) -> list[tuple[bytes, bytes, RangeBounds]]:
    """Each range partition of ``t`` once, in key order: its encoded range keys and its
    bounds as stored (which carry its own hash schema, if any)."""
    seen: dict[tuple[bytes, bytes], RangeBounds] = {}
    for p in t.partitions:
        seen.setdefault((p.range_key_start, p.range_key_end), p.range_bounds)
    keys = sorted(seen, key=lambda r: (r[0] != b"", r[0]))
    return [(lo, hi, seen[(lo, hi)]) for lo, hi in keys]


def range_texts(t: TableHandle, sql: bool = False) -> list[str]:
    """Each range partition of ``t`` once, in key order, as Kudu's client prints it
    (``range_format``), or with ``sql`` as SQL that creates it (literals, and a bound
    ending at the range columns' minimums written as the shorter prefix it means)."""
    types = [t.schema.column(c).type for c in t.partition_schema.range_columns]
    value = _sql_cell if sql else None
    return [format_range(lo, hi, types, value, trim_minimums=sql) for lo, hi, _ in _ranges(t)]


def _declared_range_sql(b: RangeBounds) -> str:
    def row(values: tuple[Any, ...]) -> str:
        cells = [literal_sql(v) for v in values]
        return cells[0] if len(cells) == 1 else f"({', '.join(cells)})"

    return "VALUES" if b.lower is None and b.upper is None else b.describe(row)


def _sql_cell(t: DataType, v: Any) -> str:
    return literal_sql(sql_value(t, v))


def _hash_sql(dims: Sequence[HashDimension]) -> str:
    """A range's own hash schema in CREATE TABLE's words: ``HASH (a) PARTITIONS 2
    HASH (b) PARTITIONS 3`` (Impala separates a range's levels with spaces)."""
    return " ".join(
        f"HASH ({', '.join(quote(c) for c in d.columns)}) PARTITIONS {d.num_buckets}"
        + (f" SEED {d.seed}" if d.seed else "")
        for d in dims
    )


def _range_partition_sql(text: str, b: RangeBounds) -> str:
    """``PARTITION <text>`` and the range's own hash schema, if any (Kudu 1.17)."""
    own = f" {_hash_sql(b.hash_schema)}" if b.hash_schema else ""
    return f"PARTITION {text}{own}"


def show_hash_schema(session: Session, s: st.ShowHashSchema) -> Result:
    """Impala 4.3's SHOW HASH SCHEMA: one column, ``RANGE (cols) HASH SCHEMA``; one row
    per range partition, the range as SHOW RANGE PARTITIONS writes it followed by its
    hash schema (its own or the table-wide one) as Kudu's client formats it."""
    t = session.table(s.table)
    ps = t.partition_schema
    if not ps.range_columns:
        raise ProgrammingError(
            f"SHOW HASH SCHEMA requested but table does not have range partitions: {s.table}"
        )
    types = [t.schema.column(c).type for c in ps.range_columns]
    rows = []
    for lo, hi, b in _ranges(t):
        dims = "".join(
            f" HASH({','.join(d.columns)}) PARTITIONS {d.num_buckets}"
            for d in ps.hash_schema_for(b)
        )
        rows.append((format_range(lo, hi, types) + dims,))
    return _rows([f"RANGE ({','.join(ps.range_columns)}) HASH SCHEMA"], rows)


def create_table_sql(t: TableHandle) -> str:
    """SHOW CREATE TABLE in Impala's shape (every column with NULL / NOT NULL, ENCODING
    and COMPRESSION; the key; PARTITION BY; COMMENT; STORED AS KUDU; TBLPROPERTIES one a
    line), with the range partitions written out in their canonical form rather than
    Impala's ``(...)``, so that the output recreates the table."""
    schema = t.schema
    lines = []
    for c in schema.columns:
        if c.auto_incrementing:
            continue  # the tablets add it again for a NON UNIQUE PRIMARY KEY
        parts = [quote(c.name), _type_sql(c), "NULL" if c.nullable else "NOT NULL"]
        parts.append(f"ENCODING {shown_encoding(c.encoding)}")
        parts.append(f"COMPRESSION {shown_compression(c.compression)}")
        if c.default is not None:
            parts.append(f"DEFAULT {literal_sql(c.default)}")
        if c.block_size:
            parts.append(f"BLOCK_SIZE {c.block_size}")
        if c.comment:
            parts.append(f"COMMENT {literal_sql(c.comment)}")
        lines.append("  " + " ".join(parts))
    key = ", ".join(quote(k) for k in schema.declared_key_names)
    lines.append(f"  {'' if schema.key_unique else 'NON UNIQUE '}PRIMARY KEY ({key})")
    db, name = split_storage_name(t.name)
    db_sql = db if db == DEFAULT_DATABASE else quote(db)  # Impala always names the database
    out = f"CREATE TABLE {db_sql}.{quote(name)} (\n" + ",\n".join(lines) + "\n)"
    ps = t.partition_schema
    levels = [
        f"HASH ({', '.join(quote(c) for c in d.columns)}) PARTITIONS {d.num_buckets}"
        + (f" SEED {d.seed}" if d.seed else "")
        for d in ps.hash_dimensions
    ]
    if ps.range_columns:
        ranges = [b for _, _, b in _ranges(t)]
        try:
            texts = range_texts(t, sql=True)
        except (OverflowError, ValueError):
            # A bound at a date or timestamp no literal can write (kudusql's DATE keys
            # span all int32 days): the bounds as they were declared.
            ranges = list(ps.range_bounds)
            texts = [_declared_range_sql(b) for b in ranges]
        bounds = ",\n  ".join(
            _range_partition_sql(r, b) for r, b in zip(texts, ranges, strict=True)
        )
        cols = ", ".join(quote(c) for c in ps.range_columns)
        levels.append(f"RANGE ({cols}) (\n  {bounds}\n)" if bounds else f"RANGE ({cols}) ()")
    if levels:
        out += "\nPARTITION BY " + ", ".join(levels)
    props = dict(t.meta.properties)
    comment = t.meta.comment
    if comment:
        out += f"\nCOMMENT {literal_sql(comment)}"
    out += "\nSTORED AS KUDU"
    if props:
        kv = ",\n  ".join(f"{literal_sql(k)}={literal_sql(v)}" for k, v in sorted(props.items()))
        out += f"\nTBLPROPERTIES (\n  {kv}\n)"
    return out


def show_create_table(session: Session, s: st.ShowCreateTable) -> Result:
    return _rows(["result"], [(create_table_sql(session.table(s.table)),)])


def show_partitions(session: Session, s: st.ShowPartitions) -> Result:
    """SHOW RANGE PARTITIONS: a column headed ``RANGE (a,b)`` with a row per range (one
    empty row when every range was dropped). SHOW PARTITIONS: Impala's columns for a
    Kudu table, a row per tablet: its partition key range in hexadecimal (empty for
    an open end), the leader replica (``local``: one process serves every tablet) and
    the replica count (1)."""
    t = session.table(s.table)
    ps = t.partition_schema
    if s.range_only:
        if not ps.range_columns:
            raise ProgrammingError(
                "SHOW RANGE PARTITIONS requested but table does not have range partitions: "
                f"{s.table}"
            )
        header = f"RANGE ({','.join(ps.range_columns)})"
        return _rows([header], [(r,) for r in range_texts(t) or [""]])
    names = ["Start Key", "Stop Key", "Leader Replica", "#Replicas"]
    types: list[pa.DataType] = [pa.string(), pa.string(), pa.string(), pa.int32()]
    if session.db.master_address is not None:
        return _cluster_partitions(session, t, names, types)
    rows: list[tuple[Any, ...]] = [
        (p.partition_key_start.hex().upper(), p.partition_key_end.hex().upper(), where, 1)
        for p, where in zip(t.partitions, t.replica_addresses(), strict=True)
    ]
    return _rows(names, rows or [("N/A", "N/A", "N/A", -1)], types)


def _cluster_partitions(
    session: Session, t: Any, names: list[str], types: list[pa.DataType]
) -> Result:
    """SHOW PARTITIONS of a cluster table: the leader's address, the replica count and
    a last column ``Replicas``: each replica as ``address ROLE HEALTH``, the leader
    first (``sys.tablet_replicas``)."""
    replicas: dict[str, list[dict[str, Any]]] = {}
    for r in session.db.system_table("tablet_replicas").to_pylist():
        if r["table_name"] == t.name:
            replicas.setdefault(r["start_key"], []).append(r)
    rows: list[tuple[Any, ...]] = []
    for p in t.partitions:
        start = p.partition_key_start.hex().upper()
        mine = sorted(replicas.get(start, []), key=lambda r: r["role"] != "LEADER")
        leader = next((r["address"] for r in mine if r["role"] == "LEADER"), "-")
        shown = ", ".join(f"{r['address']} {r['role']} {r['health']}" for r in mine)
        rows.append((start, p.partition_key_end.hex().upper(), leader, len(mine), shown))
    empty = ("N/A", "N/A", "N/A", -1, "")
    return _rows([*names, "Replicas"], rows or [empty], [*types, pa.string()])


def show_tablet_servers(session: Session, s: st.ShowTabletServers) -> Result:
    """SHOW TABLET SERVERS: ``sys.tablet_servers`` (a cluster's servers, as its master
    knows them); an embedded database has none, and says so."""
    if session.db.master_address is None:
        raise ProgrammingError(
            f"SHOW TABLET SERVERS needs a cluster: this connection is to the embedded "
            f"database at {session.db.path} (connect to kudusql://HOST:PORT)"
        )
    servers = session.db.system_table("tablet_servers")
    names = ["UUID", "Address", "State", "Last Heartbeat", "Tablets"]
    cols = ["uuid", "address", "state", "last_heartbeat", "tablets"]
    return Result(table=servers.select(cols).rename_columns(names))


def show_table_stats(session: Session, s: st.ShowTableStats) -> Result:
    t = session.table(s.table)
    stats = t.statistics()
    computed = stats.get("computed") or {}
    rows_by_tablet = {x["tablet_id"]: x["rows"] for x in computed.get("tablets", [])}
    rows = [
        (
            str(x["tablet_id"]),
            x["partition"],
            rows_by_tablet.get(x["tablet_id"], -1),
            x["memrowset_rows"],
            x["diskrowsets"],
            x["disk_bytes"],
            x["memory_bytes"],
            x["wal_bytes"],
        )
        for x in stats["tablets"]
    ]
    names = [
        "tablet_id",
        "partition",
        "rows",
        "memrowset_rows",
        "diskrowsets",
        "disk_bytes",
        "memory_bytes",
        "wal_bytes",
    ]
    types: list[pa.DataType] = [pa.string(), pa.string(), *([pa.int64()] * 6)]
    return _rows(names, rows, types)


def show_column_stats(session: Session, s: st.ShowColumnStats) -> Result:
    t = session.table(s.table)
    computed = (t.statistics().get("computed") or {}).get("columns", {})
    rows = []
    for c in t.schema.columns:
        st_ = computed.get(c.name, {})
        rows.append(
            (
                c.name,
                _type_sql(c),
                "" if st_.get("min") is None else str(st_["min"]),
                "" if st_.get("max") is None else str(st_["max"]),
                int(st_.get("null_count", -1)),
            )
        )
    names = ["column", "type", "min", "max", "null_count"]
    types: list[pa.DataType] = [*([pa.string()] * 4), pa.int64()]
    return _rows(names, rows, types)


def compute_stats(session: Session, s: st.ComputeStats) -> Result:
    stats = session.table(s.table).compute_statistics()
    return _rows(["summary"], [(f"{stats['rows']} row(s) in {len(stats['tablets'])} tablet(s)",)])


def show_settings(session: Session, s: st.ShowSettings) -> Result:
    if s.name is not None:
        v = session.settings.get(s.name)
        return _rows([s.name], [(str(v).lower() if isinstance(v, bool) else str(v),)])
    return _rows(["name", "value", "scope", "description"], session.settings.rows())


def explain(session: Session, s: st.Explain) -> Result:
    inner = s.statement
    tree: exp.Expr
    if isinstance(inner, st.Query):
        tree = inner.ast
    elif isinstance(inner, st.Insert | st.Upsert):
        src = inner.source
        if isinstance(src, exp.Values):
            t = session.table(inner.table)
            tree = values_query(src, target_columns(t.schema, inner.columns, t.name))
        else:
            tree = src
    elif isinstance(inner, st.Update):
        t = session.table(inner.table)
        tree = update_query(inner, t.schema, t.name)
    elif isinstance(inner, st.Delete):
        tree = delete_query(inner, session.table(inner.table).schema)
    else:
        raise NotSupportedError("EXPLAIN explains queries, INSERT, UPSERT, UPDATE and DELETE")
    snap = session.db.snapshot()
    plan = session.plan(tree)
    lines: list[str] = []
    for scan in plan.scans:
        t = session.db.table(scan.table)
        preds = [p.bind(t.schema) for p in scan.predicates]
        kept = prune_partitions(t.partition_schema, t.schema, t.partitions, preds)
        lines.append(f"SCAN {sql_name(scan.table)} AS {scan.alias}")
        lines.append(f"  columns: {', '.join(scan.columns) or 'none (rows counted)'}")
        lines.append(
            "  pushed predicates: " + (" AND ".join(str(p) for p in preds) if preds else "none")
        )
        lines.append(
            f"  tablets: {len(kept)} of {t.num_tablets} ({t.num_tablets - len(kept)} pruned)"
        )
        if scan.as_of is not None:
            lines.append(f"  as of: {scan.as_of.sql(dialect='duckdb')}")
    lines += [f"DIFF SCAN {sql_name(ch.table)}" for ch in plan.changes]
    lines += [
        f"REGISTERED {r.relation.name} AS {r.alias} (an object registered on this connection)"
        for r in plan.relations
    ]
    if not plan.analysed:
        lines.append("(the query could not be analysed: every scan reads all columns)")
    lines.append("DUCKDB PLAN")
    lines += session.runner.explain(plan, snap).splitlines()
    return _rows(["plan"], [(line,) for line in lines])


HANDLERS: dict[type[st.Statement], Callable[[Session, Any], Result]] = {
    st.ShowDatabases: show_databases,
    st.ShowTables: show_tables,
    st.Describe: describe,
    st.ShowCreateTable: show_create_table,
    st.ShowPartitions: show_partitions,
    st.ShowTabletServers: show_tablet_servers,
    st.ShowHashSchema: show_hash_schema,
    st.ShowTableStats: show_table_stats,
    st.ShowColumnStats: show_column_stats,
    st.ComputeStats: compute_stats,
    st.ShowSettings: show_settings,
    st.Explain: explain,
}

__all__ = ["DEFAULT_DATABASE", "HANDLERS", "create_table_sql", "storage_name"]
