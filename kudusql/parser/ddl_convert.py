"""CREATE TABLE and ALTER TABLE trees to typed statements.

This module owns the checks Kudu makes on a table definition without a catalog: one
primary key (inline or as a table element, never both), key columns NOT NULL, column
types Kudu has, DEFAULT values of the column type, range bounds and split rows typed by
the range columns, only ``STORED AS KUDU``, and, for a plain CREATE TABLE, the whole
``Schema`` and ``PartitionSchema`` built once so mistakes surface at parse time. A table
without partitioning gets a warning: it is one tablet.

Kudu 1.17's forms (``key_unique`` and ``range_hash``): ``NON UNIQUE PRIMARY KEY``
inline or as an element, a table declared without a key whose partition columns are
its leading columns getting them as a non-unique key (Impala's rule, with its
warning), and a range partition's own ``HASH ... PARTITIONS n`` levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from kudusql.common.errors import ProgrammingError
from kudusql.parser import nodes
from kudusql.parser import statements as st
from kudusql.parser.literals import StatementError, coerce, constant, data_type
from kudusql.parser.names import ident, table_name
from kudusql.storage.client.alter import (
    AddColumn,
    AddRangePartition,
    AlterColumn,
    DropColumn,
    DropRangePartition,
    SetProperties,
)
from kudusql.storage.client.partition import HashDimension, RangeBounds

ONE_TABLET_WARNING = (
    "table {table} has no PARTITION BY clause, so it is stored in a single tablet; "
    "add PARTITION BY HASH (key) PARTITIONS n to spread it over n tablets"
)


def column_spec(node: exp.Expr) -> st.ColumnSpec:
    """The ``ColumnSpec`` of a ``KuduColumnDef``."""
    name = ident(node.this)
    dtype = data_type(node.args["kind"])
    primary_key = bool(node.args.get("primary_key"))
    nullable = node.args.get("nullable")
    if primary_key and nullable is True:
        raise StatementError(f"primary key column {name!r} cannot be NULL", node)
    default = None
    if node.args.get("default") is not None:
        default_node = node.args["default"]
        value = constant(default_node, f"DEFAULT of column {name!r}")
        default = coerce(value, dtype, f"DEFAULT of column {name!r}", default_node)
    block_size = node.args.get("block_size")
    return st.ColumnSpec(
        name=name,
        type=dtype,
        primary_key=primary_key,
        key_unique=not node.args.get("non_unique"),
        nullable=nullable,
        default=default,
        encoding=_word(node.args.get("encoding")),
        compression=_word(node.args.get("compression")),
        block_size=int(block_size.name) if block_size is not None else None,
        comment=node.args["comment"].name if node.args.get("comment") is not None else "",
    )


def _word(node: exp.Expr | None) -> str | None:
    return None if node is None else node.name.upper()


def _properties(props: Sequence[exp.Expr] | None) -> dict[str, str | None]:
    return {
        p.this.name: (p.args["expression"].name if p.args.get("expression") else None)
        for p in props or ()
    }


# -- partitioning -----------------------------------------------------------------------------
def _row(node: exp.Expr | None, what: str) -> tuple[Any, ...] | None:
    if node is None:
        return None
    value = constant(node, what)
    return value if isinstance(value, tuple) else (value,)


def range_bounds(node: exp.Expr) -> RangeBounds:
    """The ``RangeBounds`` (natural values) of a ``RangeBound`` node, with the range's own
    hash schema if it has one (``range_hash``)."""
    return RangeBounds(
        _row(node.args.get("lower"), "range bound"),
        _row(node.args.get("upper"), "range bound"),
        bool(node.args.get("lower_inclusive")),
        bool(node.args.get("upper_inclusive")),
        range_hash(node),
    )


def _hash_dimension(h: exp.Expr) -> HashDimension:
    seed = h.args.get("seed")
    return HashDimension(
        tuple(ident(c) for c in h.expressions),
        int(h.args["buckets"].name),
        int(seed.name) if seed is not None else 0,
    )


def range_hash(node: exp.Expr) -> tuple[HashDimension, ...] | None:
    """A range partition's own hash schema (Kudu 1.17), or None; a level without columns
    (``HASH PARTITIONS n``) has none here and hashes every key column once the schema
    is known (``statements._range_hash_schema``)."""
    levels = node.args.get("hash")
    return tuple(_hash_dimension(h) for h in levels) if levels else None


def _typed(
    row: tuple[Any, ...] | None,
    columns: Sequence[str],
    types: dict[str, Any],
    what: str,
    node: exp.Expr,
) -> tuple[Any, ...] | None:
    if row is None or not types:
        return row
    if len(row) > len(columns):
        raise StatementError(
            f"{what} has {len(row)} values but RANGE has {len(columns)} columns", node
        )
    return tuple(
        coerce(v, types[c], f"{what} for column {c!r}", node)
        for v, c in zip(row, columns, strict=False)
    )


def partition_spec(node: nodes.Partitioning, types: dict[str, Any]) -> st.PartitionSpec:
    """The ``PartitionSpec``; values are typed when ``types`` (column -> DataType) is known."""
    hashes = []
    for h in node.args.get("hash") or ():
        seed = h.args.get("seed")
        hashes.append(
            st.HashSpec(
                tuple(ident(c) for c in h.expressions),
                int(h.args["buckets"].name),
                int(seed.name) if seed is not None else 0,
            )
        )
    rng = node.args.get("range")
    if rng is None:
        return st.PartitionSpec(tuple(hashes))
    columns = tuple(ident(c) for c in rng.expressions)
    unknown = [c for c in columns if types and c not in types]
    if unknown:
        raise StatementError(f"RANGE column {unknown[0]!r} is not a column of the table", rng)
    bounds = []
    for b in rng.args.get("partitions") or ():
        nat = range_bounds(b)
        lower = _typed(nat.lower, columns, types, "range bound", b)
        upper = _typed(nat.upper, columns, types, "range bound", b)
        bounds.append(
            RangeBounds(lower, upper, nat.lower_inclusive, nat.upper_inclusive, nat.hash_schema)
        )
    splits = []
    for s in rng.args.get("split_rows") or ():
        row = _typed(_row(s, "split row"), columns, types, "split row", s)
        assert row is not None
        splits.append(row)
    return st.PartitionSpec(tuple(hashes), st.RangeSpec(columns, tuple(bounds), tuple(splits)))


# -- CREATE TABLE ---------------------------------------------------------------------------
def promoted_key(
    columns: Sequence[str], spec: st.PartitionSpec | None, node: exp.Expr
) -> tuple[str, ...]:
    """The non-unique key of a table declared without one (Impala's rule): its hash and
    range partition columns, which must be its leading columns, in table order."""
    named: set[str] = set()
    if spec is not None:
        for h in spec.hash:
            named.update(h.columns)
        if spec.range is not None:
            named.update(spec.range.columns)
    at = sorted(columns.index(c) for c in named if c in columns)
    if not at or at[-1] != len(at) - 1 or len(at) != len(named):
        raise StatementError(
            "Specify primary key or non unique primary key for the Kudu table, or create "
            "partitions with the beginning columns of the table.",
            node,
        )
    return tuple(columns[i] for i in at)


def _promotion_warning(key: Sequence[str]) -> str:
    return f"Partition columns ({', '.join(key)}) are promoted as non unique primary key."


def _primary_key(node: exp.Expr, columns: Sequence[st.ColumnSpec]) -> tuple[str, ...]:
    inline = [c.name for c in columns if c.primary_key]
    element = tuple(ident(k) for k in node.args.get("primary_key") or ())
    if inline and element:
        raise StatementError(
            "the primary key is declared twice (inline and as PRIMARY KEY (...))", node
        )
    if len(inline) > 1:
        raise StatementError(
            f"several columns say PRIMARY KEY ({', '.join(inline)}); declare a compound key "
            f"as PRIMARY KEY ({', '.join(inline)})",
            node,
        )
    for c in columns:
        if c.name in element and c.nullable is True:
            raise StatementError(f"primary key column {c.name!r} cannot be NULL", node)
    return tuple(inline) or element


def create_table(node: exp.Expr, text: str) -> st.CreateTable:
    table = table_name(node.this)
    stored = node.args.get("stored_as")
    if stored is not None and stored.name.upper() != "KUDU":
        raise StatementError(f"only STORED AS KUDU is supported, not {stored.name}", stored)
    columns = tuple(column_spec(c) for c in node.args.get("columns") or ())
    key = _primary_key(node, columns)
    key_unique = not node.args.get("non_unique") and all(c.key_unique for c in columns)
    like = node.args.get("like")
    as_select = node.args.get("as_select")
    types = {c.name: c.type for c in columns}
    part = node.args.get("partitioning")
    spec = partition_spec(part, types) if part is not None else None
    promoted: tuple[str, ...] = ()
    if not key and like is None and spec is not None:
        # Impala promotes the partition columns to a non-unique key; for CTAS once the
        # query's columns are known (``engine.ddl``).
        key_unique = False
        if columns:
            key = promoted = promoted_key([c.name for c in columns], spec, part or node)
    elif not key and like is None:
        raise StatementError(
            f"table {table} needs a primary key: add PRIMARY KEY to a column or "
            "PRIMARY KEY (col, ...) to the definition",
            node.this,
        )
    warnings = (
        () if part is not None or like is not None else (ONE_TABLET_WARNING.format(table=table),)
    )
    if promoted:
        warnings = (*warnings, _promotion_warning(promoted))
    comment = node.args.get("comment")
    stmt = st.CreateTable(
        table=table,
        columns=columns,
        primary_key=key,
        partitioning=spec,
        properties={k: v or "" for k, v in _properties(node.args.get("properties")).items()},
        comment=comment.name if comment is not None else "",
        if_not_exists=bool(node.args.get("exists")),
        as_select=as_select,
        like=table_name(like) if like is not None else None,
        warnings=warnings,
        text=text,
        key_unique=key_unique,
    )
    if columns:
        try:
            stmt.partition_schema(stmt.schema())
        except StatementError:
            raise
        except ProgrammingError as e:
            raise StatementError(f"CREATE TABLE {table}: {e}", part or node.this) from None
    return stmt


# -- ALTER TABLE -------------------------------------------------------------------------------
def _alter_step(node: exp.Expr) -> st.ParserStep | list[st.ParserStep]:
    if isinstance(node, nodes.AddRangePartitionAction):
        return AddRangePartition(range_bounds(node.this), bool(node.args.get("exists")))
    if isinstance(node, nodes.DropRangePartitionAction):
        return DropRangePartition(range_bounds(node.this), bool(node.args.get("exists")))
    if isinstance(node, nodes.AddColumnsAction):
        exists = bool(node.args.get("exists"))
        out: list[st.ParserStep] = []
        for c in node.expressions:
            spec = column_spec(c)
            if spec.primary_key:
                raise StatementError("ALTER TABLE cannot add a primary key column", c)
            out.append(AddColumn(spec.to_column_schema(), exists))
        return out
    if isinstance(node, nodes.DropColumnAction):
        return DropColumn(ident(node.this))
    if isinstance(node, nodes.ChangeColumnAction):
        spec = column_spec(node.expression)
        if spec.primary_key or spec.nullable is not None:
            raise StatementError(
                "CHANGE COLUMN cannot change PRIMARY KEY or NULL / NOT NULL", node.expression
            )
        return st.ChangeColumn(ident(node.this), spec)
    if isinstance(node, nodes.RenameTableAction):
        return st.RenameTo(table_name(node.this))
    if isinstance(node, nodes.AlterColumnAction):
        return _alter_column(node)
    if isinstance(node, nodes.SetTblPropertiesAction):
        props = _properties(node.expressions)
        return SetProperties(props if not node.args.get("unset") else dict.fromkeys(props))
    raise StatementError(f"unsupported ALTER TABLE action {node.sql('kudusql')}", node)


def _alter_column(node: exp.Expr) -> AlterColumn:
    name = ident(node.this)
    attr = node.text("kind").lower()
    if node.args.get("drop"):
        return AlterColumn(name, {"default": None})
    value_node = node.args["expression"]
    value: Any
    if attr == "default":
        value = constant(value_node, f"DEFAULT of column {name!r}")
        if value is None:
            raise StatementError("SET DEFAULT NULL: use DROP DEFAULT", value_node)
    elif attr == "block_size":
        value = int(value_node.name)
    elif attr == "comment":
        value = value_node.name
    else:
        value = value_node.name.upper()
    return AlterColumn(name, {attr: value})


def alter_table(node: exp.Expr, text: str) -> st.AlterTable:
    steps: list[st.ParserStep] = []
    for action in node.args["actions"]:
        step = _alter_step(action)
        steps.extend(step if isinstance(step, list) else [step])
    return st.AlterTable(table_name(node.this), tuple(steps), text=text)
