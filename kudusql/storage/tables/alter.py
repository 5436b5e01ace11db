"""ALTER TABLE as data: the steps a user asks for, and what they do to a table's catalog
entry (pure: no files are touched here; ``Database.alter_table`` carries it out).

Several steps apply together and atomically, as in Kudu's AlterTable: every step is
checked against the result of the steps before it, and nothing changes unless all
succeed. Schema steps bump the table's schema version; range-partition steps add
tablet entries (new tablet ids) or remove them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.storage.tables.catalog import TableMeta, TabletEntry
from kudusql.storage.tables.partition import (
    PartitionSchema,
    RangeBounds,
    add_range_partition,
    create_partitions,
    drop_range_partition,
    partitions_for_range,
)


@dataclass(frozen=True)
class AddColumn:
    """Add ``column`` (nullable, or NOT NULL with a default that existing rows read)."""

    column: ColumnSchema
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropColumn:
    """Drop a non-key column; its data is no longer read and compactions reclaim it."""

    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class RenameColumn:
    old: str
    new: str


@dataclass(frozen=True)
class AlterColumn:
    """Change a column's default, encoding, compression, block size or comment
    (``Schema.alter_column``); ``default=None`` drops the default."""

    name: str
    changes: Mapping[str, Any]


@dataclass(frozen=True)
class RenameTable:
    new_name: str


@dataclass(frozen=True)
class AddRangePartition:
    bounds: RangeBounds
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropRangePartition:
    bounds: RangeBounds
    if_exists: bool = False


@dataclass(frozen=True)
class SetProperties:
    """Set table properties (a value of None removes the property)."""

    properties: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class SetOwner:
    """Set the table's owner (Kudu's ``SetOwner``)."""

    owner: str


@dataclass(frozen=True)
class SetComment:
    """Set the table's comment (Kudu's ``SetComment``; "" removes it)."""

    comment: str


AlterStep = (
    AddColumn
    | DropColumn
    | RenameColumn
    | AlterColumn
    | RenameTable
    | AddRangePartition
    | DropRangePartition
    | SetProperties
    | SetOwner
    | SetComment
)


@dataclass
class AlterResult:
    """The new catalog entry, the tablets to create and to delete, the next tablet id."""

    meta: TableMeta
    added: list[TabletEntry]
    dropped: list[TabletEntry]
    next_tablet_id: int
    schema_changed: bool


def apply_alter(meta: TableMeta, steps: Sequence[AlterStep], next_tablet_id: int) -> AlterResult:
    """``meta`` with every step applied; raises ProgrammingError for the first bad step."""
    if not steps:
        raise ProgrammingError("ALTER TABLE needs at least one change")
    schema = meta.schema
    ps = meta.partition_schema
    name = meta.name
    props = dict(meta.properties)
    owner, comment = meta.owner, meta.comment
    tablets = {t.partition_key_start: t for t in meta.tablets}
    added: dict[bytes, TabletEntry] = {}
    dropped: list[TabletEntry] = []
    for step in steps:
        if isinstance(step, AddColumn):
            if step.if_not_exists and schema.has_column(step.column.name):
                continue
            schema = schema.add_column(step.column)
        elif isinstance(step, DropColumn):
            if step.if_exists and not schema.has_column(step.name):
                continue
            schema = schema.drop_column(step.name)
            every_dim = [
                *ps.hash_dimensions,
                *(d for b in ps.range_bounds for d in b.hash_schema or ()),
            ]
            _check_not_partition_column(every_dim, ps.range_columns, step.name)
        elif isinstance(step, RenameColumn):
            schema = schema.rename_column(step.old, step.new)
            ps = _rename_in_partitioning(ps, step.old, step.new)
        elif isinstance(step, AlterColumn):
            schema = schema.alter_column(step.name, **dict(step.changes))
        elif isinstance(step, RenameTable):
            if not step.new_name:
                raise ProgrammingError("a table needs a name")
            name = step.new_name
        elif isinstance(step, AddRangePartition):
            try:
                new_ps = add_range_partition(ps, schema, step.bounds)
            except ProgrammingError:
                if step.if_not_exists and _has_range(ps, schema, step.bounds):
                    continue
                raise
            for p in partitions_for_range(new_ps, schema, step.bounds):
                added[p.partition_key_start] = TabletEntry.of(next_tablet_id, p)
                next_tablet_id += 1
            ps = new_ps
        elif isinstance(step, DropRangePartition):
            try:
                gone = partitions_for_range(ps, schema, step.bounds)
                ps = drop_range_partition(ps, schema, step.bounds)
            except ProgrammingError:
                if step.if_exists:
                    continue
                raise
            for p in gone:
                start = p.partition_key_start
                if start in added:
                    del added[start]  # added and dropped in the same ALTER
                elif start in tablets:
                    dropped.append(tablets.pop(start))
        elif isinstance(step, SetProperties):
            for prop, v in step.properties.items():
                if v is None:
                    props.pop(prop, None)
                else:
                    props[prop] = str(v)
        elif isinstance(step, SetOwner):
            if not step.owner:
                raise ProgrammingError("a table owner needs a non-empty name")
            owner = step.owner
        elif isinstance(step, SetComment):
            comment = step.comment
        else:  # pragma: no cover - the union above is exhaustive
            raise ProgrammingError(f"unknown ALTER TABLE step {step!r}")
    every = {**tablets, **added}
    new_meta = meta.with_(
        name=name,
        schema=schema,
        partition_schema=ps,
        properties=props,
        owner=owner,
        comment=comment,
        schema_version=meta.schema_version + (schema != meta.schema),
    )
    order = [p.partition_key_start for p in create_partitions(ps, schema)]
    new_meta = new_meta.with_(tablets=tuple(every[k] for k in order))
    new_meta.partitions()  # consistency check
    return AlterResult(
        new_meta, list(added.values()), dropped, next_tablet_id, schema != meta.schema
    )


def _has_range(ps: PartitionSchema, schema: Schema, bounds: RangeBounds) -> bool:
    try:
        return bool(partitions_for_range(ps, schema, bounds))
    except ProgrammingError:
        return False


def _check_not_partition_column(
    hash_dimensions: Sequence[Any], range_columns: Sequence[str], name: str
) -> None:
    # Key columns cannot be dropped, and only key columns partition; kept as a guard.
    if name in range_columns or any(name in d.columns for d in hash_dimensions):
        raise ProgrammingError(f"cannot drop partitioning column {name!r}")


def _rename_in_partitioning(ps: PartitionSchema, old: str, new: str) -> PartitionSchema:
    def ren(cols: Sequence[str]) -> tuple[str, ...]:
        return tuple(new if c == old else c for c in cols)

    def ren_dims(dims: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(replace(d, columns=ren(d.columns)) for d in dims)

    bounds = tuple(
        b if b.hash_schema is None else replace(b, hash_schema=ren_dims(b.hash_schema))
        for b in ps.range_bounds
    )
    return replace(
        ps,
        hash_dimensions=ren_dims(ps.hash_dimensions),
        range_columns=ren(ps.range_columns),
        range_bounds=bounds,
    )
