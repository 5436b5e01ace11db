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
from kudusql.engine.params import literal_sql
from kudusql.parser import statements as st
from kudusql.parser.names import quote
from kudusql.planner.dml import delete_query, target_columns, update_query, values_query
from kudusql.planner.names import DEFAULT_DATABASE, quoted_sql_name, sql_name, storage_name
from kudusql.storage.client.partition import HashDimension, RangeBounds
from kudusql.storage.client.pruning import prune_partitions
from kudusql.storage.client.table import Table

if TYPE_CHECKING:
    from kudusql.engine.session import Result, Session


def _rows(names: Sequence[str], rows: Sequence[Sequence[Any]], **kw: Any) -> Result:
    from kudusql.engine.session import Result

    cols: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in names]
    arrays = [pa.array(list(c), type=pa.string()) for c in cols]
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


def describe(session: Session, s: st.Describe) -> Result:
    t = session.table(s.table)
    schema = t.schema
    rows = [
        (
            c.name,
            _type_sql(c),
            c.comment,
            str(schema.is_key(c.name)).lower(),
            str(c.nullable).lower(),
            "" if c.default is None else literal_sql(c.default),
            c.encoding or "AUTO_ENCODING",
            c.compression or "DEFAULT_COMPRESSION",
            "" if c.block_size is None else str(c.block_size),
        )
        for c in schema.columns
    ]
    names = [
        "name",
        "type",
        "comment",
        "primary_key",
        "nullable",
        "default_value",
        "encoding",
        "compression",
        "block_size",
    ]
    return _rows(names, rows)


def _row_sql(values: tuple[Any, ...]) -> str:
    if len(values) == 1:
        return literal_sql(values[0])
    return "(" + ", ".join(literal_sql(v) for v in values) + ")"


def range_sql(b: RangeBounds) -> str:
    """A range partition as Impala writes it (``10 <= VALUES < 20``, ``VALUE = 5``)."""
    return "VALUES" if b.lower is None and b.upper is None else b.describe(_row_sql)


def _hash_sql(dims: Sequence[HashDimension]) -> str:
    """A range's own hash schema in CREATE TABLE's words: ``HASH (a) PARTITIONS 2
    HASH (b) PARTITIONS 3`` (Impala separates a range's levels with spaces)."""
    return " ".join(
        f"HASH ({', '.join(quote(c) for c in d.columns)}) PARTITIONS {d.num_buckets}"
        + (f" SEED {d.seed}" if d.seed else "")
        for d in dims
    )


def _range_partition_sql(b: RangeBounds) -> str:
    """``PARTITION bound`` and the range's own hash schema, if any (Kudu 1.17)."""
    own = f" {_hash_sql(b.hash_schema)}" if b.hash_schema else ""
    return f"PARTITION {range_sql(b)}{own}"


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
    rows = []
    for b in ps.range_bounds:
        dims = "".join(
            f" HASH({','.join(d.columns)}) PARTITIONS {d.num_buckets}"
            for d in ps.hash_schema_for(b)
        )
        rows.append((range_sql(b) + dims,))
    return _rows([f"RANGE ({','.join(ps.range_columns)}) HASH SCHEMA"], rows)


def create_table_sql(t: Table) -> str:
    schema = t.schema
    lines = []
    for c in schema.columns:
        if c.auto_incrementing:
            continue  # the tablets add it again for a NON UNIQUE PRIMARY KEY
        parts = [quote(c.name), _type_sql(c)]
        if not schema.is_key(c.name):
            parts.append("NULL" if c.nullable else "NOT NULL")
        if c.default is not None:
            parts.append(f"DEFAULT {literal_sql(c.default)}")
        if c.encoding:
            parts.append(f"ENCODING {c.encoding}")
        if c.compression:
            parts.append(f"COMPRESSION {c.compression}")
        if c.block_size is not None:
            parts.append(f"BLOCK_SIZE {c.block_size}")
        if c.comment:
            parts.append(f"COMMENT {literal_sql(c.comment)}")
        lines.append("  " + " ".join(parts))
    key = ", ".join(quote(k) for k in schema.declared_key_names)
    lines.append(f"  {'' if schema.key_unique else 'NON UNIQUE '}PRIMARY KEY ({key})")
    out = f"CREATE TABLE {quoted_sql_name(t.name)} (\n" + ",\n".join(lines) + "\n)"
    ps = t.partition_schema
    levels = [
        f"HASH ({', '.join(quote(c) for c in d.columns)}) PARTITIONS {d.num_buckets}"
        + (f" SEED {d.seed}" if d.seed else "")
        for d in ps.hash_dimensions
    ]
    if ps.range_columns:
        bounds = ",\n  ".join(_range_partition_sql(b) for b in ps.range_bounds)
        cols = ", ".join(quote(c) for c in ps.range_columns)
        levels.append(f"RANGE ({cols}) (\n  {bounds}\n)")
    if levels:
        out += "\nPARTITION BY " + ", ".join(levels)
    props = dict(t.meta.properties)
    comment = props.pop("comment", "")
    if comment:
        out += f"\nCOMMENT {literal_sql(comment)}"
    out += "\nSTORED AS KUDU"
    if props:
        kv = ", ".join(f"{literal_sql(k)} = {literal_sql(v)}" for k, v in sorted(props.items()))
        out += f"\nTBLPROPERTIES ({kv})"
    return out


def show_create_table(session: Session, s: st.ShowCreateTable) -> Result:
    return _rows(["result"], [(create_table_sql(session.table(s.table)),)])


def show_partitions(session: Session, s: st.ShowPartitions) -> Result:
    t = session.table(s.table)
    ps = t.partition_schema
    if s.range_only:
        if not ps.range_columns:
            raise ProgrammingError(f"table {s.table} has no range partitioning")
        return _rows(["range_partition"], [(range_sql(b),) for b in ps.range_bounds])
    rows = []
    for entry, p in zip(t.meta.tablets, t.partitions, strict=True):
        buckets = ", ".join(str(b) for b in p.hash_buckets)
        rng = range_sql(p.range_bounds) if ps.range_columns else ""
        rows.append((str(entry.id), buckets, rng, p.describe(ps)))
    return _rows(["tablet_id", "hash_buckets", "range", "partition"], rows)


def show_table_stats(session: Session, s: st.ShowTableStats) -> Result:
    t = session.table(s.table)
    stats = t.statistics()
    computed = stats.get("computed") or {}
    rows_by_tablet = {x["tablet_id"]: x["rows"] for x in computed.get("tablets", [])}
    rows = [
        (
            str(x["tablet_id"]),
            x["partition"],
            str(rows_by_tablet.get(x["tablet_id"], -1)),
            str(x["memrowset_rows"]),
            str(x["diskrowsets"]),
            str(x["disk_bytes"]),
            str(x["memory_bytes"]),
            str(x["wal_bytes"]),
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
    return _rows(names, rows)


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
                str(st_.get("null_count", -1)),
            )
        )
    return _rows(["column", "type", "min", "max", "null_count"], rows)


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
    st.ShowHashSchema: show_hash_schema,
    st.ShowTableStats: show_table_stats,
    st.ShowColumnStats: show_column_stats,
    st.ComputeStats: compute_stats,
    st.ShowSettings: show_settings,
    st.Explain: explain,
}

__all__ = ["DEFAULT_DATABASE", "HANDLERS", "create_table_sql", "storage_name"]
