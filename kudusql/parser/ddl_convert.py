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
from kudusql.parser.column_storage import compression_name, encoding_name
from kudusql.parser.const_eval import fold
from kudusql.parser.literals import StatementError, coerce, data_type
from kudusql.parser.names import fold as fold_name
from kudusql.parser.names import ident, table_name
from kudusql.storage.tables.alter import (
    AddColumn,
    AddRangePartition,
    AlterColumn,
    DropColumn,
    DropRangePartition,
    SetComment,
    SetOwner,
    SetProperties,
)
from kudusql.storage.tables.partition import HashDimension, RangeBounds

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
        default = column_default(default_node, name, dtype)
        if default is None and (nullable is False or primary_key):
            raise StatementError(
                f"Default value of NULL not allowed on non-nullable column: '{name}'",
                default_node,
            )
    attrs = column_attributes(node, name)
    return st.ColumnSpec(
        name=name,
        type=dtype,
        primary_key=primary_key,
        key_unique=not node.args.get("non_unique"),
        nullable=nullable,
        default=default,
        encoding=attrs.get("encoding"),
        compression=attrs.get("compression"),
        block_size=attrs.get("block_size"),
        comment=attrs.get("comment", ""),
    )


def column_default(node: exp.Expr, column: str, dtype: Any) -> Any:
    """A DEFAULT constant expression folded and converted to the column's type."""
    what = f"DEFAULT of column {column!r}"
    return coerce(fold(node, what), dtype, what, node)


def column_attributes(node: exp.Expr, column: str) -> dict[str, Any]:
    """The storage attributes and comment a column definition or ALTER COLUMN SET
    gives: encoding and compression by their Kudu names, a positive block size."""
    out: dict[str, Any] = {}
    for attr, to_name in (("encoding", encoding_name), ("compression", compression_name)):
        word = node.args.get(attr)
        if word is not None:
            try:
                out[attr] = to_name(word.name, column)
            except StatementError as e:
                raise StatementError(e.message, word) from None
    block_size = node.args.get("block_size")
    if block_size is not None:
        if int(block_size.name) <= 0:
            raise StatementError(
                f"Invalid value for BLOCK_SIZE: {block_size.name}. "
                "A positive INTEGER value is expected.",
                block_size,
            )
        out["block_size"] = int(block_size.name)
    if node.args.get("comment") is not None:
        out["comment"] = node.args["comment"].name
    return out


def _properties(props: Sequence[exp.Expr] | None) -> dict[str, str | None]:
    return {
        p.this.name: (p.args["expression"].name if p.args.get("expression") else None)
        for p in props or ()
    }


# -- partitioning -----------------------------------------------------------------------------
def _row(node: exp.Expr | None, what: str) -> tuple[Any, ...] | None:
    if node is None:
        return None
    value = fold(node, what)
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


def partition_spec(
    node: nodes.Partitioning, types: dict[str, Any], key: Sequence[str] = ()
) -> st.PartitionSpec:
    """The ``PartitionSpec``; values are typed when ``types`` (column -> DataType) is
    known. A RANGE rule without columns ranges over the primary key ``key`` (Impala);
    when the key is not known yet (CREATE TABLE ... AS SELECT) its columns stay empty
    and ``PartitionSpec.to_partition_schema`` takes the table's key."""
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
    columns = tuple(ident(c) for c in rng.expressions) or tuple(key)
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
    # ``RANGE (c) ()``: no range partition (none written at all: one unbounded range).
    no_ranges = rng.args.get("partitions") == [] and not splits
    return st.PartitionSpec(
        tuple(hashes), st.RangeSpec(columns, tuple(bounds), tuple(splits), no_ranges)
    )


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
    key = tuple(inline) or element
    _check_key_leads(node, key, columns)
    return key


def _check_key_leads(
    node: exp.Expr, key: tuple[str, ...], columns: Sequence[st.ColumnSpec]
) -> None:
    """Kudu's key columns are the table's first columns, in key order (Impala refuses
    any other order rather than reordering the columns)."""
    if not columns or not key:
        return
    names = {fold_name(c.name) for c in columns}
    if any(fold_name(k) not in names for k in key):
        return  # Schema.build names the unknown column
    leading = tuple(c.name for c in columns[: len(key)])
    if tuple(map(fold_name, leading)) != tuple(map(fold_name, key)):
        expected = ", ".join(f"'{k}'" for k in key)
        found = ", ".join(f"'{c}'" for c in leading)
        where = node.args.get("primary_key") or [node]
        raise StatementError(
            "Kudu PRIMARY KEY columns must be specified as the first columns in the table "
            f"(expected leading columns ({expected}) but found ({found}))",
            where[0],
        )


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
    spec = partition_spec(part, types, key) if part is not None else None
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
    if isinstance(node, nodes.SetOwnerAction):
        return SetOwner(ident(node.this))
    if isinstance(node, nodes.SetTblPropertiesAction):
        return _set_properties(_properties(node.expressions), bool(node.args.get("unset")))
    raise StatementError(f"unsupported ALTER TABLE action {node.sql('kudusql')}", node)


def _set_properties(props: dict[str, str | None], unset: bool) -> list[st.ParserStep]:
    """SET / UNSET TBLPROPERTIES (UNSET: values None). Impala's ``comment`` property is
    the table's comment, which Kudu keeps as a field of its own (``SetComment``); the
    rest are properties."""
    out: list[st.ParserStep] = []
    if "comment" in props:
        out.append(SetComment("" if unset else props.pop("comment") or ""))
    if props:
        out.append(SetProperties(dict.fromkeys(props) if unset else props))
    return out


def _alter_column(node: exp.Expr) -> list[st.ParserStep]:
    """``ALTER COLUMN c SET options`` (one ``AlterColumn`` for all of them, plus a
    ``NullDefault`` for ``SET DEFAULT NULL``) or ``ALTER COLUMN c DROP DEFAULT``."""
    name = ident(node.this)
    if node.args.get("drop"):
        return [AlterColumn(name, {"default": None})]
    changes: dict[str, Any] = column_attributes(node, name)
    out: list[st.ParserStep] = []
    value_node = node.args.get("default")
    if value_node is not None:
        value = fold(value_node, f"DEFAULT of column {name!r}")
        if value is None:
            out.append(st.NullDefault(name))
        else:
            changes["default"] = value
    if changes:
        out.insert(0, AlterColumn(name, changes))
    return out


def alter_table(node: exp.Expr, text: str) -> st.AlterTable:
    steps: list[st.ParserStep] = []
    added: set[str] = set()
    for action in node.args["actions"]:
        step = _alter_step(action)
        for one in step if isinstance(step, list) else [step]:
            if isinstance(one, AddColumn):
                folded = fold_name(one.column.name)
                if folded in added:
                    raise StatementError(f"Duplicate column name: {one.column.name}", action)
                added.add(folded)
            steps.append(one)
    return st.AlterTable(table_name(node.this), tuple(steps), text=text)
