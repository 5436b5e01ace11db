"""The typed statement model: one frozen dataclass per kind of statement.

This module owns what the planner receives from the parser: ``convert.parse(sql)``
returns a ``Statement`` per statement of a script (``parse_one`` exactly one); a table
reference is a ``names.TableName``. DDL statements are plain values ready for storage
(``ColumnSpec.to_column_schema``, ``PartitionSpec.to_partition_schema``, ALTER TABLE as
``kudusql.storage.tables.alter`` steps); DML statements carry the target table and the
sqlglot trees (queries are ``exp.Query`` trees in the kudusql dialect; see
``docs/SQL.md``). Every statement keeps its source ``text``. Constants are already
Python values of the column type where the column is known at parse time, and natural
values (int, Decimal, str, ...) otherwise, converted by the ``...(schema)`` methods once
the table's schema is known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlglot import exp

from kudusql.common.errors import NotSupportedError, ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.parser.literals import coerce
from kudusql.parser.names import TableName, find_column, fold
from kudusql.storage.tables.alter import (
    AddColumn,
    AddRangePartition,
    AlterColumn,
    AlterStep,
    DropColumn,
    DropRangePartition,
    RenameColumn,
    RenameTable,
)
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds


@dataclass(frozen=True, kw_only=True)
class Statement:
    """Base of every statement; ``text`` is its SQL as written."""

    text: str = field(default="", compare=False, repr=False)


# -- databases and sessions --------------------------------------------------------------------
@dataclass(frozen=True)
class CreateDatabase(Statement):
    name: str
    if_not_exists: bool = False
    comment: str = ""


@dataclass(frozen=True)
class DropDatabase(Statement):
    name: str
    if_exists: bool = False
    cascade: bool = False


@dataclass(frozen=True)
class UseDatabase(Statement):
    name: str


@dataclass(frozen=True)
class SetOption(Statement):
    """``SET name = value``: value is a Python constant (a bare word is a str)."""

    name: str
    value: Any


@dataclass(frozen=True)
class ShowSettings(Statement):
    """``SHOW SETTINGS`` / ``SHOW ALL`` / ``SET`` (name None) or ``SHOW name``."""

    name: str | None = None


# -- tables -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ColumnSpec:
    """A column as declared; ``nullable`` None means not said (nullable unless key);
    ``key_unique`` False for ``NON UNIQUE PRIMARY KEY``."""

    name: str
    type: DataType
    primary_key: bool = False
    key_unique: bool = True
    nullable: bool | None = None
    default: Any = None
    encoding: str | None = None
    compression: str | None = None
    block_size: int | None = None
    comment: str = ""

    def to_column_schema(self) -> ColumnSchema:
        return ColumnSchema(
            name=self.name,
            type=self.type,
            nullable=self.nullable is not False and not self.primary_key,
            default=self.default,
            encoding=self.encoding,
            compression=self.compression,
            block_size=self.block_size,
            comment=self.comment,
        )


@dataclass(frozen=True)
class HashSpec:
    """One hash level; ``columns`` empty means all primary key columns."""

    columns: tuple[str, ...]
    buckets: int
    seed: int = 0


@dataclass(frozen=True)
class RangeSpec:
    """The range rule: its columns, explicit partitions and Kudu-style split rows."""

    columns: tuple[str, ...]
    bounds: tuple[RangeBounds, ...] = ()
    split_rows: tuple[tuple[Any, ...], ...] = ()
    #: ``RANGE (c) ()``: no range partition (no bounds otherwise means one unbounded).
    no_ranges: bool = False


@dataclass(frozen=True)
class PartitionSpec:
    hash: tuple[HashSpec, ...] = ()
    range: RangeSpec | None = None

    def to_partition_schema(self, schema: Schema) -> PartitionSchema:
        """The validated ``PartitionSchema`` for ``schema`` (values cast to column types)."""
        dims = [
            HashDimension(h.columns or tuple(schema.declared_key_names), h.buckets, h.seed)
            for h in self.hash
        ]
        if self.range is None:
            return PartitionSchema.create(schema, dims)
        cols = self.range.columns or tuple(schema.key_names)
        bounds = [_typed_bounds(b, cols, schema) for b in self.range.bounds]
        splits = [_typed_row(r, cols, schema, "split row") or () for r in self.range.split_rows]
        given = bounds if bounds or self.range.no_ranges else None
        return PartitionSchema.create(schema, dims, cols, given, splits)


def _typed_row(
    row: tuple[Any, ...] | None, columns: tuple[str, ...], schema: Schema, what: str
) -> tuple[Any, ...] | None:
    if row is None:
        return None
    if len(row) > len(columns):
        raise NotSupportedError(
            f"{what} {row!r} has {len(row)} values but the range has {len(columns)} columns"
        )
    return tuple(
        coerce(v, schema.column(c).type, f"{what} value for column {c!r}")
        for v, c in zip(row, columns, strict=False)
    )


def _typed_bounds(b: RangeBounds, columns: tuple[str, ...], schema: Schema) -> RangeBounds:
    return RangeBounds(
        _typed_row(b.lower, columns, schema, "range bound"),
        _typed_row(b.upper, columns, schema, "range bound"),
        b.lower_inclusive,
        b.upper_inclusive,
        _range_hash_schema(b.hash_schema, schema),
    )


def _range_hash_schema(
    dims: tuple[HashDimension, ...] | None, schema: Schema
) -> tuple[HashDimension, ...] | None:
    """A range's own hash schema with its columns matched to ``schema`` (ignoring case);
    a level without columns hashes every declared key column, as at the table level."""
    if dims is None:
        return None
    every = tuple(schema.declared_key_names)
    return tuple(
        replace(d, columns=tuple(find_column(schema, c) or c for c in d.columns) or every)
        for d in dims
    )


@dataclass(frozen=True)
class CreateTable(Statement):
    """CREATE TABLE, CREATE TABLE ... AS SELECT (``as_select``) and CREATE TABLE ... LIKE
    (``like``; then ``columns`` is empty and the source's definition applies)."""

    table: TableName
    columns: tuple[ColumnSpec, ...] = ()
    primary_key: tuple[str, ...] = ()
    partitioning: PartitionSpec | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    comment: str = ""
    if_not_exists: bool = False
    as_select: exp.Query | None = None
    like: TableName | None = None
    warnings: tuple[str, ...] = ()
    #: False for a non-unique primary key (``NON UNIQUE PRIMARY KEY``, or partition
    #: columns promoted to the key): the hidden ``auto_incrementing_id`` ends the key.
    key_unique: bool = True

    def schema(self) -> Schema:
        """The table's ``Schema`` (not for CTAS or LIKE, whose columns come from elsewhere)."""
        return Schema.build(
            [c.to_column_schema() for c in self.columns],
            self.primary_key,
            key_unique=self.key_unique,
        )

    def partition_schema(self, schema: Schema | None = None) -> PartitionSchema:
        """The ``PartitionSchema`` for ``schema`` (default: ``self.schema()``); one tablet
        when no partitioning was given."""
        schema = schema or self.schema()
        return (self.partitioning or PartitionSpec()).to_partition_schema(schema)


@dataclass(frozen=True)
class DropTable(Statement):
    table: TableName
    if_exists: bool = False
    purge: bool = False


@dataclass(frozen=True)
class ChangeColumn:
    """``CHANGE old new_def``: a rename (the type must stay) plus attribute changes."""

    old: str
    column: ColumnSpec


@dataclass(frozen=True)
class RenameTo:
    """``RENAME TO [db.]name`` (the storage step needs the database resolved)."""

    table: TableName


@dataclass(frozen=True)
class NullDefault:
    """``ALTER COLUMN c SET DEFAULT NULL``: drops the default of a nullable column (Impala);
    a NOT NULL column refuses it (``DROP DEFAULT`` removes its default)."""

    column: str


ParserStep = AlterStep | ChangeColumn | RenameTo | NullDefault


@dataclass(frozen=True)
class AlterTable(Statement):
    """ALTER TABLE with its actions as storage ``AlterStep``s, except ``ChangeColumn``
    and ``RenameTo`` which need the catalog; ``storage_steps`` resolves them all."""

    table: TableName
    steps: tuple[ParserStep, ...]

    def storage_steps(
        self,
        schema: Schema,
        partition_schema: PartitionSchema | None = None,
        rename: Callable[[TableName], str] = str,
    ) -> list[AlterStep]:
        """Steps for ``Database.alter_table``: column names matched to the stored ones
        (ignoring case, ``parser.names``), range bounds and defaults cast to the column
        types of ``schema`` (range columns from ``partition_schema``, else the key);
        ``rename`` maps a ``TableName`` to a storage table name."""
        cols = tuple(
            partition_schema.range_columns if partition_schema else schema.declared_key_names
        )
        out: list[AlterStep] = []
        for step in self.steps:
            if isinstance(step, ChangeColumn):
                old = find_column(schema, step.old) or step.old
                clash = _clash(schema, step.column.name, old)
                if clash is not None:
                    raise ProgrammingError(f"column {clash!r} already exists")
                out.extend(_change_column_steps(replace(step, old=old), schema))
            elif isinstance(step, AddColumn):
                existing = find_column(schema, step.column.name)
                if existing is None:
                    out.append(step)
                elif not step.if_not_exists:
                    raise ProgrammingError(f"column {existing!r} already exists")
            elif isinstance(step, DropColumn):
                out.append(replace(step, name=find_column(schema, step.name) or step.name))
            elif isinstance(step, RenameTo):
                out.append(RenameTable(rename(step.table)))
            elif isinstance(step, AddRangePartition):
                bounds = _typed_bounds(step.bounds, cols, schema)
                out.append(AddRangePartition(bounds, step.if_not_exists))
            elif isinstance(step, DropRangePartition):
                out.append(
                    DropRangePartition(_typed_bounds(step.bounds, cols, schema), step.if_exists)
                )
            elif isinstance(step, AlterColumn):
                name = find_column(schema, step.name) or step.name
                changes = dict(step.changes)
                if "default" in changes:
                    _check_default_allowed(schema, name, changes["default"] is None)
                if changes.get("default") is not None:
                    col = schema.column(name)
                    what = f"DEFAULT of {name!r}"
                    changes["default"] = coerce(changes["default"], col.type, what)
                out.append(AlterColumn(name, changes))
            elif isinstance(step, NullDefault):
                name = find_column(schema, step.column) or step.column
                _check_default_allowed(schema, name, False)
                if schema.has_column(name) and not schema.column(name).nullable:
                    raise ProgrammingError(
                        f"Default value of NULL not allowed on non-nullable column: '{name}'"
                    )
                out.append(AlterColumn(name, {"default": None}))
            else:
                out.append(step)
        return out


def _check_default_allowed(schema: Schema, name: str, drop: bool) -> None:
    """Impala sets and drops no default of a primary key column."""
    if schema.has_column(name) and schema.is_key(name):
        raise ProgrammingError(
            f"Cannot {'drop' if drop else 'set'} default value for primary key column '{name}'"
        )


def _clash(schema: Schema, new: str, old: str) -> str | None:
    """The column other than ``old`` whose name equals ``new`` ignoring case, if any."""
    return next((c for c in schema.names if c != old and fold(c) == fold(new)), None)


def _change_column_steps(step: ChangeColumn, schema: Schema) -> list[AlterStep]:
    col = schema.column(step.old)
    new = step.column
    if new.type != col.type:
        raise NotSupportedError(
            f"cannot change the type of column {step.old!r} from {col.type} to {new.type}: "
            "Kudu columns keep their type (CHANGE can rename and set attributes)"
        )
    out: list[AlterStep] = []
    if new.name != step.old:
        out.append(RenameColumn(step.old, new.name))
    changes: dict[str, Any] = {}
    if new.default is not None:
        changes["default"] = coerce(new.default, col.type, f"DEFAULT of {new.name!r}")
    for attr in ("encoding", "compression", "block_size"):
        if getattr(new, attr) is not None:
            changes[attr] = getattr(new, attr)
    if new.comment:
        changes["comment"] = new.comment
    if changes:
        out.append(AlterColumn(new.name, changes))
    return out


MaintenanceAction = Literal["FLUSH", "COMPACT", "GC", "MAINTENANCE"]


@dataclass(frozen=True)
class MaintainTable(Statement):
    """Maintenance on demand: FLUSH (MemRowSets and DeltaMemStores), COMPACT (delta and
    merging compactions), GC (history older than the ancient history mark) or
    MAINTENANCE (all three)."""

    table: TableName
    action: MaintenanceAction


# -- DML and queries ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Insert(Statement):
    """INSERT [IGNORE]; ``source`` is an ``exp.Values`` or an ``exp.Query``."""

    table: TableName
    columns: tuple[str, ...] | None
    source: exp.Expr
    ignore: bool = False
    ast: exp.Expr | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Upsert(Statement):
    table: TableName
    columns: tuple[str, ...] | None
    source: exp.Expr
    ast: exp.Expr | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Update(Statement):
    """UPDATE; ``alias`` is how the query refers to the target (its name if no alias)."""

    table: TableName
    alias: str
    assignments: tuple[tuple[str, exp.Expr], ...]
    ast: exp.Update


@dataclass(frozen=True)
class Delete(Statement):
    table: TableName
    alias: str
    ast: exp.Delete


@dataclass(frozen=True)
class Query(Statement):
    """A query. Time travel is ``exp.Version`` on each ``exp.Table`` (``time_travel``
    lists them); ``table_changes`` calls are ``nodes.TableChanges``."""

    ast: exp.Query

    def time_travel(self) -> list[tuple[exp.Table, exp.Expr]]:
        """Each table reference with an AS OF clause and its expression."""
        return [
            (t, t.args["version"].expression)
            for t in self.ast.find_all(exp.Table)
            if t.args.get("version") is not None
        ]


# -- introspection ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ShowDatabases(Statement):
    like: str | None = None


@dataclass(frozen=True)
class ShowTables(Statement):
    database: str | None = None
    like: str | None = None


@dataclass(frozen=True)
class ShowCreateTable(Statement):
    table: TableName


@dataclass(frozen=True)
class Describe(Statement):
    table: TableName
    formatted: bool = False


@dataclass(frozen=True)
class ShowPartitions(Statement):
    """SHOW PARTITIONS (every tablet) or SHOW RANGE PARTITIONS (``range_only``)."""

    table: TableName
    range_only: bool = False


@dataclass(frozen=True)
class ShowTabletServers(Statement):
    """SHOW TABLET SERVERS: every tablet server the master knows (a cluster only)."""


@dataclass(frozen=True)
class ShowHashSchema(Statement):
    """SHOW HASH SCHEMA (Impala 4.3): every range partition with its hash schema."""

    table: TableName


@dataclass(frozen=True)
class ShowTableStats(Statement):
    table: TableName


@dataclass(frozen=True)
class ShowColumnStats(Statement):
    table: TableName


@dataclass(frozen=True)
class ComputeStats(Statement):
    table: TableName


@dataclass(frozen=True)
class Explain(Statement):
    statement: Statement
