"""``TableAlterer`` (``client.new_table_alterer(table)``): collects ALTER TABLE steps the
Kudu Python client way and applies them together, atomically, with ``alter()``.

Column specs returned by ``add_column``/``alter_column`` may be changed until
``alter()``; steps apply in the order they were added.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kudusql.client.partitioning import RangePartition, range_bounds
from kudusql.client.schema import ColumnSpec, TypeLike
from kudusql.client.table import Table
from kudusql.common.errors import (
    KuduInvalidArgument,
    KuduNotFound,
    KuduTypeError,
    NotSupportedError,
    ProgrammingError,
)
from kudusql.common.schema import AUTO_INCREMENTING_COLUMN
from kudusql.storage.tables.alter import (
    AddColumn,
    AddRangePartition,
    AlterColumn,
    AlterStep,
    DropColumn,
    DropRangePartition,
    RenameColumn,
    RenameTable,
    SetComment,
    SetOwner,
    SetProperties,
)

__all__ = ["TableAlterer"]


class TableAlterer:
    """Steps to alter one table; ``alter()`` applies them all or none and returns the
    altered table."""

    def __init__(self, table: Table) -> None:
        if not isinstance(table, Table):
            raise KuduTypeError(f"a TableAlterer alters a Table, not {type(table).__name__}")
        self._table = table
        # Each entry: a finished step, or ("add"|"alter", spec) resolved at alter().
        self._steps: list[AlterStep | tuple[str, ColumnSpec]] = []

    def rename(self, table_name: str) -> TableAlterer:
        """Rename the table."""
        if not isinstance(table_name, str) or not table_name:
            raise ProgrammingError("a table needs a non-empty name")
        self._steps.append(RenameTable(table_name))
        return self

    def add_column(
        self,
        name: str,
        type_: TypeLike | None = None,
        nullable: bool | None = None,
        compression: str | None = None,
        encoding: str | None = None,
        default: Any = None,
        comment: str | None = None,
    ) -> ColumnSpec:
        """Add a column (nullable unless said otherwise; a NOT NULL column needs a
        default, which the rows already stored read). Returns its spec."""
        spec = ColumnSpec(name).set(
            type=type_,
            nullable=nullable,
            compression=compression,
            encoding=encoding,
            default=default,
            comment=comment,
        )
        self._steps.append(("add", spec))
        return spec

    def alter_column(self, name: str, rename_to: str | None = None) -> ColumnSpec:
        """Alter a column: its spec takes ``rename``, ``default``/``clear_default``,
        ``encoding``, ``compression``, ``block_size`` and ``comment``."""
        spec = ColumnSpec(name, altering=True)
        if rename_to:
            spec.rename(rename_to)
        self._steps.append(("alter", spec))
        return spec

    def drop_column(self, name: str) -> TableAlterer:
        """Drop a non-key column."""
        self._steps.append(DropColumn(name))
        return self

    def _bounds_step(
        self, lower: Any, upper: Any, lower_type: str | int, upper_type: str | int
    ) -> Any:
        rcols = list(self._table.core.partition_schema.range_columns)
        if not rcols:
            raise ProgrammingError(
                f"table {self._table.name!r} has no range partitioning: range partitions "
                "cannot be added or dropped"
            )
        return range_bounds(lower, upper, lower_type, upper_type, rcols, self._table.core.schema)

    def add_range_partition(
        self,
        lower_bound: Any = None,
        upper_bound: Any = None,
        lower_bound_type: str | int = "inclusive",
        upper_bound_type: str | int = "exclusive",
    ) -> TableAlterer:
        """Add a range partition (it must not overlap the others)."""
        bounds = self._bounds_step(lower_bound, upper_bound, lower_bound_type, upper_bound_type)
        self._steps.append(AddRangePartition(bounds))
        return self

    def drop_range_partition(
        self,
        lower_bound: Any = None,
        upper_bound: Any = None,
        lower_bound_type: str | int = "inclusive",
        upper_bound_type: str | int = "exclusive",
    ) -> TableAlterer:
        """Drop the range partition with exactly these bounds (and its rows)."""
        bounds = self._bounds_step(lower_bound, upper_bound, lower_bound_type, upper_bound_type)
        self._steps.append(DropRangePartition(bounds))
        return self

    def add_custom_range_partition(self, range_partition: RangePartition) -> TableAlterer:
        """Add a range partition with its own hash schema (a ``RangePartition``)."""
        if not isinstance(range_partition, RangePartition):
            raise KuduTypeError(
                f"add_custom_range_partition() takes a RangePartition, not "
                f"{type(range_partition).__name__}"
            )
        core = self._table.core
        rcols = list(core.partition_schema.range_columns)
        if not rcols:
            raise ProgrammingError(
                f"table {self._table.name!r} has no range partitioning: range partitions "
                "cannot be added or dropped"
            )
        self._steps.append(AddRangePartition(range_partition.bounds(rcols, core.schema)))
        return self

    def set_owner(self, new_owner: str) -> TableAlterer:
        """Set the table's owner."""
        if not isinstance(new_owner, str):
            raise KuduTypeError(f"a table owner is a str, not {type(new_owner).__name__}")
        self._steps.append(SetOwner(new_owner))
        return self

    def set_comment(self, new_comment: str) -> TableAlterer:
        """Set the table's comment ("" removes it)."""
        if not isinstance(new_comment, str):
            raise KuduTypeError(f"a table comment is a str, not {type(new_comment).__name__}")
        self._steps.append(SetComment(new_comment))
        return self

    def set_properties(self, properties: Mapping[str, str | None]) -> TableAlterer:
        """Set table properties (None removes one)."""
        self._steps.append(SetProperties(dict(properties)))
        return self

    alter_extra_configs = set_properties

    def _resolve(self) -> list[AlterStep]:
        schema = self._table.core.schema
        out: list[AlterStep] = []
        for step in self._steps:
            _check_auto_incrementing(step)
            if not isinstance(step, tuple):
                out.append(step)
                continue
            kind, spec = step
            if kind == "add":
                if spec._set.get("primary_key"):
                    raise ProgrammingError(
                        f"cannot add primary key column {spec.name!r} to an existing table"
                    )
                out.append(AddColumn(spec._column(key=False)))
                continue
            # Column specs refer to names as they are when their step runs.
            current = schema.column(_name_at(out, spec.name, schema.has_column))
            changes, new_name = spec._changes(current)
            if changes:
                out.append(AlterColumn(spec.name, changes))
            if new_name is not None and new_name != spec.name:
                out.append(RenameColumn(spec.name, new_name))
            if not changes and new_name is None:
                raise ProgrammingError(f"alter_column({spec.name!r}) changes nothing")
        return out

    def alter(self) -> Table:
        """Apply every step atomically; returns the altered table."""
        steps = self._resolve()
        if not steps:
            raise ProgrammingError("nothing to alter: add at least one change")
        client = self._table.client
        db = client.database
        meta = db.table_meta(self._table.name, soft_deleted=True)
        if meta is None or db.table(self._table.name, soft_deleted=True).id != self._table.id:
            raise KuduNotFound(f'the table does not exist: table_name: "{self._table.name}"')
        if meta.soft_deleted:
            raise KuduInvalidArgument(
                f"soft_deleted table {meta.name} should not be altered (recall it first)"
            )
        try:
            core = db.alter_table(self._table.name, steps)
        except (KuduInvalidArgument, NotSupportedError):
            raise
        except ProgrammingError as e:
            raise KuduInvalidArgument(str(e)) from None
        self._steps = []
        return Table(client, core)


def _check_auto_incrementing(step: AlterStep | tuple[str, ColumnSpec]) -> None:
    """Kudu's rules for the hidden key column of a non-unique primary key: it cannot be
    dropped, added, renamed or lose its default; its storage attributes and comment may
    change."""
    col = AUTO_INCREMENTING_COLUMN
    if isinstance(step, DropColumn) and step.name == col:
        raise KuduInvalidArgument(f"can't drop column: {col} (the auto-incrementing column)")
    if not isinstance(step, tuple):
        return
    kind, spec = step
    if kind == "add" and spec.name.lower() == col:
        raise KuduInvalidArgument(f"can't add a column with reserved name: {col}")
    if kind == "alter" and spec.name == col:
        if "rename" in spec._set:
            raise KuduInvalidArgument(f"can't change name for column: {col}")
        if "default" in spec._set:
            raise KuduInvalidArgument(f"can't change remove default for column: {col}")


def _name_at(steps: list[AlterStep], name: str, exists: Any) -> str:
    """The original name of the column called ``name`` after ``steps`` (renames undone),
    for looking up its type; a column added by the steps keeps its own spec."""
    for s in reversed(steps):
        if isinstance(s, RenameColumn) and s.new == name:
            name = s.old
        if isinstance(s, AddColumn) and s.column.name == name:
            raise ProgrammingError(
                f"column {name!r} is added by this ALTER; set its attributes on its add_column spec"
            )
    if not exists(name):
        raise ProgrammingError(f"unknown column {name!r}")
    return name
