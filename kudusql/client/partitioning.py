"""``Partitioning``: how ``Client.create_table`` splits a table into tablets, built the
Kudu Python client way (hash dimensions, then range partitions and split rows).

Bounds and split rows may be a dict (range column name -> value), a tuple or list
(values of the range columns in order; a prefix is allowed), a ``PartialRow``, a single
value (the first range column), or None / empty (unbounded). Values are checked as cells
of their columns (a TIMESTAMP bound may be ``('2016-01-01', '%Y-%m-%d')``).

``RangePartition`` is a range with its own hash schema (Kudu 1.17's custom hash schemas
per range), for ``Partitioning.add_custom_range_partition`` and the alterer's
``add_custom_range_partition``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kudusql.client.row import PartialRow, check_value
from kudusql.common.errors import KuduValueError, ProgrammingError
from kudusql.common.schema import Schema as CoreSchema
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds

__all__ = [
    "EXCLUSIVE_BOUND",
    "INCLUSIVE_BOUND",
    "Partitioning",
    "RangePartition",
    "bound_inclusive",
    "range_bounds",
]

#: Range bound types (Kudu's ``kudu.EXCLUSIVE_BOUND`` / ``kudu.INCLUSIVE_BOUND``).
EXCLUSIVE_BOUND = 0
INCLUSIVE_BOUND = 1

_BOUND_TYPES = {"exclusive": False, "inclusive": True}


def bound_inclusive(bound_type: str | int) -> bool:
    """True for an inclusive bound type ('inclusive' or INCLUSIVE_BOUND)."""
    if isinstance(bound_type, bool):
        raise KuduValueError(f"Invalid range partition bound type: {bound_type!r}")
    if isinstance(bound_type, int):
        if bound_type not in (EXCLUSIVE_BOUND, INCLUSIVE_BOUND):
            raise KuduValueError(f"Invalid range partition bound type: {bound_type!r}")
        return bound_type == INCLUSIVE_BOUND
    key = str(bound_type).strip().lower()
    if key not in _BOUND_TYPES:
        raise KuduValueError(
            f"Invalid range partition bound type: {bound_type!r} (inclusive or exclusive)"
        )
    return _BOUND_TYPES[key]


def range_row(
    row: Any, range_columns: Sequence[str], what: str = "range bound"
) -> tuple[Any, ...] | None:
    """The values of a bound or split row for a prefix of ``range_columns``."""
    if row is None:
        return None
    if isinstance(row, PartialRow):
        row = row.to_dict()
    if isinstance(row, Mapping):
        unknown = [k for k in row if k not in range_columns]
        if unknown:
            raise ProgrammingError(
                f"{what} {dict(row)!r} names {', '.join(map(repr, unknown))}, not a range "
                f"partition column (range columns: {', '.join(range_columns)})"
            )
        vals: list[Any] = []
        for c in range_columns:
            if c not in row:
                break
            vals.append(row[c])
        if len(vals) != len(row):
            raise ProgrammingError(
                f"{what} {dict(row)!r} must give a prefix of the range columns "
                f"({', '.join(range_columns)})"
            )
        return tuple(vals) or None
    if isinstance(row, (tuple, list)):
        if len(row) > len(range_columns):
            raise ProgrammingError(
                f"{what} {tuple(row)!r} has {len(row)} values; the range columns are "
                f"({', '.join(range_columns)})"
            )
        return tuple(row) or None
    return (row,)


def _checked(
    row: tuple[Any, ...] | None, range_columns: Sequence[str], schema: CoreSchema | None
) -> tuple[Any, ...] | None:
    """The values of a bound checked as cells of their columns."""
    if row is None or schema is None:
        return row
    return tuple(
        check_value(replace(schema.column(c), nullable=True), v)
        for c, v in zip(range_columns, row, strict=False)
    )


def range_bounds(
    lower: Any,
    upper: Any,
    lower_type: str | int,
    upper_type: str | int,
    range_columns: Sequence[str],
    schema: CoreSchema | None = None,
) -> RangeBounds:
    return RangeBounds(
        _checked(range_row(lower, range_columns, "lower bound"), range_columns, schema),
        _checked(range_row(upper, range_columns, "upper bound"), range_columns, schema),
        bound_inclusive(lower_type),
        bound_inclusive(upper_type),
    )


class RangePartition:
    """A range partition with its own hash schema: ``RangePartition(lower, upper)``,
    then ``add_hash_partitions`` once per hash dimension (as many dimensions as the
    table-wide hash schema has)."""

    def __init__(
        self,
        lower_bound: Any = None,
        upper_bound: Any = None,
        lower_bound_type: str | int = "inclusive",
        upper_bound_type: str | int = "exclusive",
    ) -> None:
        bound_inclusive(lower_bound_type)
        bound_inclusive(upper_bound_type)
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.lower_bound_type = lower_bound_type
        self.upper_bound_type = upper_bound_type
        self.hash_dimensions: list[tuple[list[str], int, int | None]] = []

    def add_hash_partitions(
        self, column_names: Sequence[str] | str, num_buckets: int, seed: int | None = None
    ) -> RangePartition:
        cols = [column_names] if isinstance(column_names, str) else list(column_names)
        self.hash_dimensions.append((cols, num_buckets, seed))
        return self

    def bounds(self, range_columns: Sequence[str], schema: CoreSchema) -> RangeBounds:
        """The storage range bounds, with this range's hash schema."""
        b = range_bounds(
            self.lower_bound,
            self.upper_bound,
            self.lower_bound_type,
            self.upper_bound_type,
            range_columns,
            schema,
        )
        return replace(b, hash_schema=tuple(_hash_dimensions(self.hash_dimensions, schema)))

    def __repr__(self) -> str:
        return (
            f"RangePartition({self.lower_bound!r}, {self.upper_bound!r}, "
            f"hash={self.hash_dimensions!r})"
        )


def _hash_dimensions(
    dims: Sequence[tuple[list[str], int, int | None]], schema: CoreSchema
) -> list[HashDimension]:
    for cols, n, _ in dims:
        for c in cols:
            schema.index_of(c)
        if isinstance(n, bool) or not isinstance(n, int):
            raise ProgrammingError(f"the number of hash buckets must be an int, not {n!r}")
    return [HashDimension(tuple(cols), n, seed or 0) for cols, n, seed in dims]


class Partitioning:
    """Describes a table's partitioning for ``Client.create_table``.

    Every setter returns the object, so calls chain::

        Partitioning().add_hash_partitions(['key'], 4).set_range_partition_columns(['ts'])
            .add_range_partition({'ts': lo}, {'ts': hi})

    Unlike Kudu, a table whose range partition columns are never set has no range
    partitioning (rather than range partitioning on the whole primary key); the two
    behave the same for reads and writes.
    """

    def __init__(self) -> None:
        self._hash: list[tuple[list[str], int, int | None]] = []
        self._range_columns: list[str] | None = None
        self._ranges: list[tuple[Any, Any, str | int, str | int] | RangePartition] = []
        self._splits: list[Any] = []

    def add_hash_partitions(
        self, column_names: Sequence[str] | str, num_buckets: int, seed: int | None = None
    ) -> Partitioning:
        """Add a hash dimension: rows go to ``num_buckets`` buckets by a hash of
        ``column_names`` (primary key columns); each dimension multiplies the tablets."""
        cols = [column_names] if isinstance(column_names, str) else list(column_names)
        self._hash.append((cols, num_buckets, seed))
        return self

    def set_range_partition_columns(self, column_names: Sequence[str] | str) -> Partitioning:
        """The primary key columns the range partitions are defined on ([] for none)."""
        self._range_columns = (
            [column_names] if isinstance(column_names, str) else list(column_names)
        )
        return self

    def add_range_partition(
        self,
        lower_bound: Any = None,
        upper_bound: Any = None,
        lower_bound_type: str | int = "inclusive",
        upper_bound_type: str | int = "exclusive",
    ) -> Partitioning:
        """Add a range partition ``[lower, upper)`` (by default); ranges must not
        overlap. Without any, the range is unbounded."""
        if not self._range_columns:
            raise ProgrammingError(
                "set the range partition columns before adding a range partition"
            )
        bound_inclusive(lower_bound_type)
        bound_inclusive(upper_bound_type)
        self._ranges.append((lower_bound, upper_bound, lower_bound_type, upper_bound_type))
        return self

    def add_custom_range_partition(self, range_partition: RangePartition) -> Partitioning:
        """Add a range partition with its own hash schema (a ``RangePartition``)."""
        if not self._range_columns:
            raise ProgrammingError(
                "set the range partition columns before adding a range partition"
            )
        if not isinstance(range_partition, RangePartition):
            raise ProgrammingError(
                f"add_custom_range_partition() takes a RangePartition, not "
                f"{type(range_partition).__name__}"
            )
        self._ranges.append(range_partition)
        return self

    def add_range_partition_split(self, split_row: Any) -> Partitioning:
        """Split the range partitions at ``split_row``."""
        if not self._range_columns:
            raise ProgrammingError(
                "set the range partition columns before adding a range partition split"
            )
        self._splits.append(split_row)
        return self

    def to_partition_schema(self, schema: CoreSchema) -> PartitionSchema:
        """The storage partition schema for a table of ``schema`` (validated)."""
        dims = _hash_dimensions(self._hash, schema)
        rcols = list(self._range_columns or [])
        for c in rcols:
            schema.index_of(c)
        bounds = [
            r.bounds(rcols, schema)
            if isinstance(r, RangePartition)
            else range_bounds(*r, rcols, schema)
            for r in self._ranges
        ]
        splits: list[tuple[Any, ...]] = []
        for s in self._splits:
            row = _checked(range_row(s, rcols, "split row"), rcols, schema)
            if row is None:
                raise ProgrammingError("a split row needs at least one value")
            splits.append(row)
        return PartitionSchema.create(schema, dims, rcols, bounds or None, splits)

    def __repr__(self) -> str:
        return (
            f"Partitioning(hash={self._hash!r}, range_columns={self._range_columns!r}, "
            f"ranges={self._ranges!r}, splits={self._splits!r})"
        )
