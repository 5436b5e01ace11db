"""Partition schemas and partitions: how a table's rows are split into tablets.

This module owns Kudu's partitioning rule (``kudu-internals.md`` §1) as pure values and
batch computations, with no I/O:

* ``PartitionSchema``: zero or more hash dimensions (``HashDimension``: primary-key
  columns, at least 2 buckets, a seed), then an optional range rule (range columns, a
  subset of the key) with the table's current range partitions (``RangeBounds``: lower
  inclusive and upper exclusive unless flagged otherwise, a missing end unbounded).
  Since Kudu 1.17 a range partition may carry its own hash schema (``RangeBounds.
  hash_schema``); the other ranges use the table-wide one. As in Kudu, every hash schema
  has as many dimensions as the table-wide one (its columns, bucket counts and seeds
  may differ), a range whose schema equals the table-wide one stores none, and such
  ranges cannot be combined with split rows.
  ``PartitionSchema.create`` builds one from bounds and Kudu-style split rows;
  ``validate`` checks it against a ``Schema``; ``to_dict``/``from_dict`` give the
  JSON-able form the catalog stores; ``add_range_partition``/``drop_range_partition``
  return a new value.
* ``Partition``: one tablet's slice of the table: a bucket per hash dimension (of its
  range's hash schema) and a range. Its partition key is each bucket as a 4-byte
  big-endian uint32, then the encoded range key. ``create_partitions`` lists them ordered
  by partition key (bucket-major).
* Routing batches: ``bucket_for`` (MurmurHash64A of the key-encoded dimension columns with
  the dimension's seed, modulo its bucket count) and ``partition_for_batch`` (each row's
  index in ``create_partitions``, or -1 where no range partition covers the row) are
  vectorized over whole Arrow batches: the range first, then the buckets of each
  distinct hash schema over the rows of its ranges.

Unset trailing columns of a bound or split row take the type minimum, as in Kudu, so a
bound is any prefix of the range columns.
"""

from __future__ import annotations

import bisect
import datetime
import functools
import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from kudusql.common.errors import DataError, ProgrammingError
from kudusql.common.json_values import from_json_value, to_json_value
from kudusql.common.keys import ArrowArray, encode_key, encode_keys, fixed_key_width
from kudusql.common.murmur import murmur2_64
from kudusql.common.schema import Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.batch_keys import locate_in_ranges, murmur2_64_keys
from kudusql.storage.tables.range_key import (
    Component,
    KeyDomain,
    encode_components,
    increment_components,
)

__all__ = [
    "NO_TABLET_MESSAGE",
    "Batch",
    "HashDimension",
    "Partition",
    "PartitionSchema",
    "RangeBounds",
    "add_range_partition",
    "bucket_for",
    "create_partitions",
    "drop_range_partition",
    "encode_range_keys",
    "partition_for_batch",
    "partitions_for_range",
]

Batch: TypeAlias = "pa.Table | pa.RecordBatch | Mapping[str, ArrowArray]"

NO_TABLET_MESSAGE = "No tablet covering the requested range partition"
_BUCKET_BYTES = 4
_MAX_BUCKETS = 2**31 - 1


# ------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------
def _as_tuple(v: Any) -> tuple[Any, ...] | None:
    if v is None:
        return None
    t = tuple(v) if isinstance(v, list | tuple) else (v,)
    return t or None


@dataclass(frozen=True)
class HashDimension:
    """``HASH (columns) PARTITIONS num_buckets [SEED seed]``."""

    columns: tuple[str, ...]
    num_buckets: int
    seed: int = 0

    def __post_init__(self) -> None:
        cols = (self.columns,) if isinstance(self.columns, str) else tuple(self.columns)
        object.__setattr__(self, "columns", cols)

    def describe(self) -> str:
        seed = f" SEED {self.seed}" if self.seed else ""
        return f"HASH ({', '.join(self.columns)}) PARTITIONS {self.num_buckets}{seed}"

    def to_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "num_buckets": self.num_buckets, "seed": self.seed}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HashDimension:
        return cls(tuple(d["columns"]), int(d["num_buckets"]), int(d.get("seed", 0)))


@dataclass(frozen=True)
class RangeBounds:
    """One range partition: ``lower <= range key < upper`` by default.

    ``lower``/``upper`` are tuples of values for a prefix of the range columns (a single
    value is taken as a 1-tuple); None or ``()`` means unbounded. The inclusive flags
    allow Kudu's and Impala's other bound kinds (``VALUES <= 20``, ``VALUE = 30``)."""

    lower: tuple[Any, ...] | None = None
    upper: tuple[Any, ...] | None = None
    lower_inclusive: bool = True
    upper_inclusive: bool = False
    #: This range's own hash schema (Kudu 1.17), or None: the table-wide one.
    hash_schema: tuple[HashDimension, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "lower", _as_tuple(self.lower))
        object.__setattr__(self, "upper", _as_tuple(self.upper))
        if self.hash_schema is not None:
            object.__setattr__(self, "hash_schema", tuple(self.hash_schema))

    def describe(self, fmt_row: Callable[[tuple[Any, ...]], str] | None = None) -> str:
        """Impala's ``SHOW RANGE PARTITIONS`` style: ``10 <= VALUES < 20`` (bound rows
        written by ``fmt_row``, SQL literals for SHOW; ``UNBOUNDED`` for no bounds)."""
        fmt = fmt_row or _fmt_row
        lo, hi = self.lower, self.upper
        if lo is not None and lo == hi and self.lower_inclusive and self.upper_inclusive:
            return f"VALUE = {fmt(lo)}"
        parts = []
        if lo is not None:
            parts.append(f"{fmt(lo)} {'<=' if self.lower_inclusive else '<'}")
        parts.append("VALUES")
        if hi is not None:
            parts.append(f"{'<=' if self.upper_inclusive else '<'} {fmt(hi)}")
        return "UNBOUNDED" if lo is None and hi is None else " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lower": None if self.lower is None else [to_json_value(v) for v in self.lower],
            "upper": None if self.upper is None else [to_json_value(v) for v in self.upper],
            "lower_inclusive": self.lower_inclusive,
            "upper_inclusive": self.upper_inclusive,
            **(
                {}
                if self.hash_schema is None
                else {"hash": [d.to_dict() for d in self.hash_schema]}
            ),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RangeBounds:
        def row(vals: list[Any] | None) -> tuple[Any, ...] | None:
            return (
                None
                if vals is None
                else tuple(from_json_value(v, "partition schema") for v in vals)
            )

        # "hash" is absent in catalogs written before per-range hash schemas existed
        hashes = d.get("hash")
        return cls(
            row(d.get("lower")),
            row(d.get("upper")),
            bool(d.get("lower_inclusive", True)),
            bool(d.get("upper_inclusive", False)),
            None if hashes is None else tuple(HashDimension.from_dict(h) for h in hashes),
        )


@dataclass(frozen=True)
class Partition:
    """One tablet's slice: ``hash_buckets`` (one per dimension) times a range.

    Range keys are encoded range-column keys, ``b""`` when that end is unbounded.
    ``partition_key_start`` is the buckets (4-byte big-endian each) then
    ``range_key_start``; ``partition_key_end`` likewise, except that a range unbounded
    above ends where the next bucket of the last dimension begins (buckets with the last
    one plus 1), as in Kudu, and is ``b""`` (unbounded) when there is no hash dimension."""

    hash_buckets: tuple[int, ...]
    range_bounds: RangeBounds
    range_key_start: bytes
    range_key_end: bytes
    partition_key_start: bytes
    partition_key_end: bytes

    def describe(self, partition_schema: PartitionSchema) -> str:
        """``HASH (a) PARTITION 1, RANGE (b) PARTITION 10 <= VALUES < 20``."""
        dims = partition_schema.hash_schema_for(self.range_bounds)
        parts = [
            f"HASH ({', '.join(d.columns)}) PARTITION {b}"
            for d, b in zip(dims, self.hash_buckets, strict=True)
        ]
        if partition_schema.range_columns:
            cols = ", ".join(partition_schema.range_columns)
            parts.append(f"RANGE ({cols}) PARTITION {self.range_bounds.describe()}")
        return ", ".join(parts) or "UNPARTITIONED"


@dataclass(frozen=True)
class PartitionSchema:
    """Hash dimensions, then the range rule and the table's current range partitions.

    With no range columns there is exactly one, unbounded, range. Build one with
    ``create`` (which converts, sorts and validates); the plain constructor stores what
    it is given (``from_dict`` uses it), and ``validate`` checks it."""

    hash_dimensions: tuple[HashDimension, ...] = ()
    range_columns: tuple[str, ...] = ()
    range_bounds: tuple[RangeBounds, ...] = (RangeBounds(),)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash_dimensions", tuple(self.hash_dimensions))
        rc = self.range_columns
        object.__setattr__(self, "range_columns", (rc,) if isinstance(rc, str) else tuple(rc))
        object.__setattr__(self, "range_bounds", tuple(self.range_bounds))

    @classmethod
    def create(
        cls,
        schema: Schema,
        hash_dimensions: Iterable[HashDimension] = (),
        range_columns: Sequence[str] = (),
        range_bounds: Iterable[RangeBounds] | None = None,
        split_rows: Iterable[Sequence[Any]] = (),
    ) -> PartitionSchema:
        """A validated partition schema for ``schema``.

        ``range_bounds`` lists the range partitions (None: one unbounded range; an empty
        list: none, so no key has a tablet until a range is added);
        ``split_rows`` then cut those ranges at each split, so that splits alone give
        consecutive ranges covering every key, like Kudu's ``SPLIT ROWS``."""
        base = cls(tuple(hash_dimensions), tuple(range_columns))
        base._validate_columns(schema)
        bounds = list(range_bounds or ())
        splits = [tuple(s) for s in split_rows]
        if (bounds or splits) and not base.range_columns:
            raise ProgrammingError("range bounds and split rows need range partition columns")
        if not base.range_columns:
            return base
        domains = _domains(base, schema)
        normal = [base._own_hash_schema(_normalize_bounds(b, base, schema), schema) for b in bounds]
        if not normal and (range_bounds is None or splits):
            normal = [RangeBounds()]
        if splits and any(b.hash_schema is not None for b in normal):
            raise ProgrammingError(
                "split rows and range partitions with their own hash schema cannot be "
                "combined (Kudu refuses both at once)"
            )
        ordered = _encoded_ranges(tuple(normal), domains, base.range_columns)
        if splits:
            split_keys = [_normalize_row(s, base, schema, "split row") for s in splits]
            normal = _split_ranges(ordered, split_keys, domains, base.range_columns)
        else:
            normal = [r.bounds for r in ordered]
        result = replace(base, range_bounds=tuple(normal))
        result.validate(schema)
        return result

    # -- validation ---------------------------------------------------------------------------
    def validate(self, schema: Schema) -> None:
        """Raise ProgrammingError unless this partition schema fits ``schema``."""
        self._validate_columns(schema)
        for b in self.range_bounds:
            if b.hash_schema is not None:
                self._check_range_hash_schema(b, schema)
        if not self.range_columns:
            if self.range_bounds != (RangeBounds(),):
                raise ProgrammingError(
                    "without range partition columns there is exactly one unbounded range"
                )
            return
        _encoded_ranges(self.range_bounds, _domains(self, schema), self.range_columns)

    def _validate_columns(self, schema: Schema) -> None:
        _validate_hash_schema(self.hash_dimensions, schema)
        what = f"RANGE ({', '.join(self.range_columns)})"
        for col in self.range_columns:
            _check_key_column(schema, col, what)
        if len(set(self.range_columns)) != len(self.range_columns):
            raise ProgrammingError(f"{what}: a range partition column is listed twice")

    def _check_range_hash_schema(self, b: RangeBounds, schema: Schema) -> None:
        """Kudu's rules for a range's own hash schema: as many dimensions as the
        table-wide one, each valid as a table-wide dimension is."""
        dims = b.hash_schema or ()
        if len(dims) != len(self.hash_dimensions):
            raise ProgrammingError(
                f"range partition {b.describe()}: its hash schema has {len(dims)} "
                f"dimension(s) but the table's has {len(self.hash_dimensions)}; a varying "
                "number of hash dimensions per range is not supported (as in Kudu)"
            )
        _validate_hash_schema(dims, schema)

    def _own_hash_schema(self, b: RangeBounds, schema: Schema) -> RangeBounds:
        """``b`` checked, without a hash schema of its own when it equals the table's."""
        if b.hash_schema is None:
            return b
        if b.hash_schema == self.hash_dimensions:
            return replace(b, hash_schema=None)
        self._check_range_hash_schema(b, schema)
        return b

    def hash_schema_for(self, bounds: RangeBounds) -> tuple[HashDimension, ...]:
        """The hash dimensions of the range partition ``bounds``: its own, else the
        table-wide ones."""
        return self.hash_dimensions if bounds.hash_schema is None else bounds.hash_schema

    @property
    def has_range_hash_schemas(self) -> bool:
        """Whether some range partition has a hash schema of its own."""
        return any(b.hash_schema is not None for b in self.range_bounds)

    # -- presentation and persistence -------------------------------------------------------
    def describe(self) -> str:
        """``HASH (a) PARTITIONS 4, RANGE (b)``."""
        parts = [d.describe() for d in self.hash_dimensions]
        if self.range_columns:
            parts.append(f"RANGE ({', '.join(self.range_columns)})")
        return ", ".join(parts) or "UNPARTITIONED"

    @property
    def num_hash_combinations(self) -> int:
        """Tablets per range partition: the product of the bucket counts."""
        return math.prod(d.num_buckets for d in self.hash_dimensions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hash": [d.to_dict() for d in self.hash_dimensions],
            "range": {
                "columns": list(self.range_columns),
                "bounds": [b.to_dict() for b in self.range_bounds],
            },
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionSchema:
        rng = d.get("range") or {}
        return cls(
            tuple(HashDimension.from_dict(h) for h in d.get("hash", [])),
            tuple(rng.get("columns", [])),
            tuple(RangeBounds.from_dict(b) for b in rng.get("bounds", [{}])),
        )


def _validate_hash_schema(dims: Sequence[HashDimension], schema: Schema) -> None:
    """Raise ProgrammingError unless ``dims`` is a valid hash schema for ``schema``."""
    seen: set[str] = set()
    for dim in dims:
        what = dim.describe()
        if not dim.columns:
            raise ProgrammingError("a hash dimension needs at least one column")
        n = dim.num_buckets
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= _MAX_BUCKETS:
            raise ProgrammingError(
                f"{what}: a hash dimension needs at least 2 buckets (at most {_MAX_BUCKETS})"
            )
        s = dim.seed
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2**32:
            raise ProgrammingError(f"{what}: the seed must be an unsigned 32-bit integer")
        for col in dim.columns:
            _check_key_column(schema, col, what)
            if col in seen:
                raise ProgrammingError(
                    f"{what}: column {col!r} is used twice in hash partitioning "
                    "(hash dimensions must not share columns)"
                )
            seen.add(col)


# ------------------------------------------------------------------------------------------
# Partitions, and adding or dropping range partitions
# ------------------------------------------------------------------------------------------
def create_partitions(partition_schema: PartitionSchema, schema: Schema) -> list[Partition]:
    """Every partition (one per bucket combination of its range's hash schema per range),
    by partition key.

    The order is bucket-major. Without per-range hash schemas, the partition of buckets
    ``(b0, .., bk)`` and range ``r`` (ranges sorted by lower bound) is at
    ``((b0 * n1 + b1) * .. + bk) * R + r``; in every case it is the index
    ``partition_for_batch`` returns."""
    return list(_layout_of(partition_schema, schema).partitions)


@dataclass(frozen=True)
class _Layout:
    """A partition schema's partitions in order, and how routing finds a row's index:
    ``flat[base[r] + combo]`` for range ``r`` and bucket combination number ``combo``
    (``((b0 * n1 + b1) * .. + bk)`` in that range's hash schema)."""

    ranges: tuple[_EncodedRange, ...]
    partitions: tuple[Partition, ...]
    base: np.ndarray
    flat: np.ndarray


def _layout_of(partition_schema: PartitionSchema, schema: Schema) -> _Layout:
    domains = _domains(partition_schema, schema)
    try:
        return _layout(partition_schema, domains)
    except TypeError:  # an unhashable bound value: nothing to cache
        return _layout.__wrapped__(partition_schema, domains)


@functools.lru_cache(maxsize=64)
def _layout(partition_schema: PartitionSchema, domains: tuple[KeyDomain, ...]) -> _Layout:
    ps = partition_schema
    ranges = (
        _encoded_ranges(ps.range_bounds, domains, ps.range_columns)
        if ps.range_columns
        else (_EncodedRange(RangeBounds(), b"", None),)
    )
    made: list[tuple[bytes, int, int, Partition]] = []  # key, range, combo number, partition
    sizes = []
    for ri, r in enumerate(ranges):
        dims = ps.hash_schema_for(r.bounds)
        sizes.append(math.prod(d.num_buckets for d in dims))
        for number, combo in enumerate(itertools.product(*(range(d.num_buckets) for d in dims))):
            prefix = b"".join(b.to_bytes(_BUCKET_BYTES, "big") for b in combo)
            if r.upper is not None:
                end = prefix + r.upper
            elif combo:
                # Kudu: an unbounded range ends where the next bucket of its last
                # dimension begins.
                end = prefix[:-_BUCKET_BYTES] + (combo[-1] + 1).to_bytes(_BUCKET_BYTES, "big")
            else:
                end = b""
            p = Partition(combo, r.bounds, r.lower, r.upper or b"", prefix + r.lower, end)
            made.append((p.partition_key_start, ri, number, p))
    made.sort(key=lambda m: m[0])  # already in order without per-range hash schemas
    base = np.zeros(len(ranges), dtype=np.int64)
    if sizes:
        base[1:] = np.cumsum(sizes)[:-1]
    flat = np.zeros(sum(sizes), dtype=np.int64)
    for i, (_, ri, number, _) in enumerate(made):
        flat[base[ri] + number] = i
    return _Layout(ranges, tuple(m[3] for m in made), base, flat)


def partitions_for_range(
    partition_schema: PartitionSchema, schema: Schema, bounds: RangeBounds
) -> list[Partition]:
    """The partitions (one per bucket combination) of the range partition ``bounds``."""
    lo, hi = _encode_bounds(
        _normalize_bounds(bounds, partition_schema, schema),
        _domains(partition_schema, schema),
        partition_schema.range_columns,
    )
    hi_b = hi or b""
    return [
        p
        for p in create_partitions(partition_schema, schema)
        if p.range_key_start == lo and p.range_key_end == hi_b
    ]


def add_range_partition(
    partition_schema: PartitionSchema, schema: Schema, bounds: RangeBounds
) -> PartitionSchema:
    """A copy with the range partition ``bounds`` added; it must overlap no other."""
    if not partition_schema.range_columns:
        raise ProgrammingError("cannot add a range partition: the table has no range columns")
    new = partition_schema._own_hash_schema(
        _normalize_bounds(bounds, partition_schema, schema), schema
    )
    ordered = _encoded_ranges(
        (*partition_schema.range_bounds, new),
        _domains(partition_schema, schema),
        partition_schema.range_columns,
    )
    return replace(partition_schema, range_bounds=tuple(r.bounds for r in ordered))


def drop_range_partition(
    partition_schema: PartitionSchema, schema: Schema, bounds: RangeBounds
) -> PartitionSchema:
    """A copy without the range partition whose bounds equal ``bounds`` (compared as keys,
    so ``[10, 20)`` matches ``[10, 19]`` on an integer column; a hash schema given with
    ``bounds`` is ignored, as Impala does: the range goes with its own)."""
    if not partition_schema.range_columns:
        raise ProgrammingError("cannot drop a range partition: the table has no range columns")
    cols = partition_schema.range_columns
    domains = _domains(partition_schema, schema)
    target = _encode_bounds(_normalize_bounds(bounds, partition_schema, schema), domains, cols)
    ordered = _encoded_ranges(partition_schema.range_bounds, domains, cols)
    keep = [r.bounds for r in ordered if (r.lower, r.upper) != target]
    if len(keep) == len(ordered):
        raise ProgrammingError(
            f"no range partition {bounds.describe()} to drop in RANGE ({', '.join(cols)})"
        )
    return replace(partition_schema, range_bounds=tuple(keep))


# ------------------------------------------------------------------------------------------
# Routing batches
# ------------------------------------------------------------------------------------------
def bucket_for(dimension: HashDimension, schema: Schema, batch: Batch) -> np.ndarray:
    """Each row's bucket in ``dimension`` (int64 array), for the whole batch at once.

    Bucket = MurmurHash64A(key encoding of the dimension's columns, the last of them
    unescaped; seed) mod num_buckets. Key columns must hold no nulls."""
    types = [schema.column(c).type for c in dimension.columns]
    keys = encode_keys(_columns(batch, dimension.columns), types)
    hashes = murmur2_64_keys(keys, dimension.seed)
    return (hashes % np.uint64(dimension.num_buckets)).astype(np.int64)


def encode_range_keys(
    partition_schema: PartitionSchema, schema: Schema, batch: Batch
) -> pa.Array[Any]:
    """Each row's encoded range key (a binary array; empty keys without range columns)."""
    cols = partition_schema.range_columns
    if not cols:
        return pa.repeat(pa.scalar(b"", pa.binary()), _num_rows(batch))
    types = [schema.column(c).type for c in cols]
    return encode_keys(_columns(batch, cols), types)


def partition_for_batch(
    partition_schema: PartitionSchema, schema: Schema, batch: Batch
) -> np.ndarray:
    """Each row's index in ``create_partitions(partition_schema, schema)`` (int64), or -1
    where no range partition covers the row (Kudu's per-row error
    "No tablet covering the requested range partition"). Key columns must be non-null."""
    n = _num_rows(batch)
    ps = partition_schema
    lay = _layout_of(ps, schema)
    ranges = lay.ranges
    if not ranges:
        return np.full(n, -1, dtype=np.int64)
    if ps.range_columns:
        types = [schema.column(c).type for c in ps.range_columns]
        keys = encode_range_keys(ps, schema, batch)
        ridx = locate_in_ranges(
            keys, [r.lower for r in ranges], [r.upper for r in ranges], fixed_key_width(types)
        )
    else:
        ridx = np.zeros(n, dtype=np.int64)
    if not ps.has_range_hash_schemas:
        combo = _combos(ps.hash_dimensions, schema, batch, n)
        out: np.ndarray = combo * len(ranges) + ridx
    else:
        # Each distinct hash schema buckets the rows of its own ranges.
        combo = np.zeros(n, dtype=np.int64)
        by_schema: dict[tuple[HashDimension, ...], list[int]] = {}
        for i, r in enumerate(ranges):
            by_schema.setdefault(ps.hash_schema_for(r.bounds), []).append(i)
        for dims, members in by_schema.items():
            rows = np.flatnonzero(np.isin(ridx, members))
            if not len(rows):
                continue
            if len(rows) == n:
                combo = _combos(dims, schema, batch, n)
                continue
            cols = list(dict.fromkeys(c for d in dims for c in d.columns))
            sub = {c: a.take(rows) for c, a in zip(cols, _columns(batch, cols), strict=True)}
            combo[rows] = _combos(dims, schema, sub, len(rows))
        out = lay.flat[lay.base[np.maximum(ridx, 0)] + combo]
    out[ridx < 0] = -1
    return out


def _combos(dims: Sequence[HashDimension], schema: Schema, batch: Batch, n: int) -> np.ndarray:
    """Each row's bucket combination number ``((b0 * n1 + b1) * .. + bk)`` in ``dims``."""
    combo = np.zeros(n, dtype=np.int64)
    for dim in dims:
        combo = combo * dim.num_buckets + bucket_for(dim, schema, batch)
    return combo


def partition_for_row(
    partition_schema: PartitionSchema, schema: Schema, row: Mapping[str, Any]
) -> int:
    """``partition_for_batch`` for one row of Python values (key column -> value), without
    building Arrow arrays: the point-lookup path. Raises DataError for a bad key value."""
    lay = _layout_of(partition_schema, schema)
    ranges = lay.ranges
    if not ranges:
        return -1
    r = 0
    if partition_schema.range_columns:
        cols = partition_schema.range_columns
        key = encode_key([row[c] for c in cols], [schema.column(c).type for c in cols])
        r = bisect.bisect_right([x.lower for x in ranges], key) - 1
        if r < 0 or (ranges[r].upper is not None and key >= ranges[r].upper):  # type: ignore[operator]
            return -1
    combo = 0
    for dim in partition_schema.hash_schema_for(ranges[r].bounds):
        cols = dim.columns
        key = encode_key([row[c] for c in cols], [schema.column(c).type for c in cols])
        combo = combo * dim.num_buckets + murmur2_64(key, dim.seed) % dim.num_buckets
    if not partition_schema.has_range_hash_schemas:
        return combo * len(ranges) + r
    return int(lay.flat[lay.base[r] + combo])


# ------------------------------------------------------------------------------------------
# Encoded range bounds
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _EncodedRange:
    bounds: RangeBounds
    lower: bytes  # b"" when unbounded
    upper: bytes | None  # None when unbounded


def _encoded_ranges(
    bounds: tuple[RangeBounds, ...], domains: tuple[KeyDomain, ...], columns: tuple[str, ...]
) -> tuple[_EncodedRange, ...]:
    """The ranges sorted by lower bound, checked: lower < upper, and no two overlap.

    The encodings are cached (routing asks for them on every batch); the result always
    carries the caller's own ``RangeBounds`` objects."""
    try:
        order = _sorted_range_keys(bounds, domains, columns)
    except TypeError:  # an unhashable bound value: nothing to cache
        order = _sorted_range_keys.__wrapped__(bounds, domains, columns)
    return tuple(_EncodedRange(bounds[i], lo, hi) for i, lo, hi in order)


@functools.lru_cache(maxsize=256)
def _sorted_range_keys(
    bounds: tuple[RangeBounds, ...], domains: tuple[KeyDomain, ...], columns: tuple[str, ...]
) -> tuple[tuple[int, bytes, bytes | None], ...]:
    """(index in ``bounds``, lower key, upper key) by lower key, after the checks."""
    enc = sorted(
        ((i, *_encode_bounds(b, domains, columns)) for i, b in enumerate(bounds)),
        key=lambda e: e[1],
    )
    for (i, _, hi), (j, lo, _) in itertools.pairwise(enc):
        if hi is None or hi > lo:
            raise ProgrammingError(
                f"range partitions overlap: {bounds[i].describe()} and {bounds[j].describe()} "
                f"in RANGE ({', '.join(columns)})"
            )
    return tuple(enc)


def _encode_bounds(
    b: RangeBounds, domains: Sequence[KeyDomain], columns: Sequence[str]
) -> tuple[bytes, bytes | None]:
    """(inclusive lower key, exclusive upper key or None) of a range partition."""
    what = f"range partition {b.describe()}"
    lo = b""
    if b.lower is not None:
        parts = _full_components(b.lower, domains, columns, what)
        if not b.lower_inclusive:
            inc = increment_components(parts, domains)
            if inc is None:
                raise ProgrammingError(
                    f"{what}: an exclusive lower bound cannot be the largest key"
                )
            parts = inc
        lo = encode_components(parts, domains)
    hi: bytes | None = None
    if b.upper is not None:
        parts = _full_components(b.upper, domains, columns, what)
        if b.upper_inclusive:
            inc = increment_components(parts, domains)
            parts = inc if inc is not None else []
        if parts:
            if all(c == d.min for c, d in zip(parts, domains, strict=True)):
                raise ProgrammingError(f"{what}: the upper bound is the smallest key; it is empty")
            hi = encode_components(parts, domains)
    if hi is not None and lo >= hi:
        raise ProgrammingError(f"{what}: the lower bound must be less than the upper bound")
    return lo, hi


def _full_components(
    values: tuple[Any, ...], domains: Sequence[KeyDomain], columns: Sequence[str], what: str
) -> list[Component]:
    if len(values) > len(domains):
        raise ProgrammingError(
            f"{what}: {len(values)} values for {len(domains)} range columns ({', '.join(columns)})"
        )
    parts: list[Component] = []
    for v, d, col in zip(values, domains, columns, strict=False):
        try:
            parts.append(d.component(v))
        except DataError as e:
            raise ProgrammingError(f"{what}: bad value for range column {col!r}: {e}") from None
    return parts + [d.min for d in domains[len(values) :]]


def _split_ranges(
    ordered: Sequence[_EncodedRange],
    splits: list[tuple[Any, ...]],
    domains: tuple[KeyDomain, ...],
    columns: tuple[str, ...],
) -> list[RangeBounds]:
    """Cut the sorted ranges at each split row (each must fall strictly inside one)."""
    keyed = []
    for s in splits:
        parts = _full_components(s, domains, columns, "split row")
        if all(c == d.min for c, d in zip(parts, domains, strict=True)):
            raise ProgrammingError(
                f"split row {_fmt_row(s)} is the smallest key: it must set a range column "
                "to more than its minimum"
            )
        keyed.append((encode_components(parts, domains), s))
    keyed.sort(key=lambda ks: ks[0])
    for (k1, s1), (k2, _) in itertools.pairwise(keyed):
        if k1 == k2:
            raise ProgrammingError(f"duplicate split row {_fmt_row(s1)}")
    out: list[RangeBounds] = []
    i = 0
    for r in ordered:
        lower, lower_inc = r.bounds.lower, r.bounds.lower_inclusive
        while i < len(keyed) and (r.upper is None or keyed[i][0] <= r.upper):
            key, split = keyed[i]
            if key < r.lower:
                break
            if key == r.lower or key == r.upper:
                raise ProgrammingError(
                    f"split row {_fmt_row(split)} equals a bound of range partition "
                    f"{r.bounds.describe()}"
                )
            out.append(RangeBounds(lower, split, lower_inc, False))
            lower, lower_inc = split, True
            i += 1
        out.append(RangeBounds(lower, r.bounds.upper, lower_inc, r.bounds.upper_inclusive))
    if i < len(keyed):
        raise ProgrammingError(
            f"split row {_fmt_row(keyed[i][1])} is outside every range partition"
        )
    return out


# ------------------------------------------------------------------------------------------
# Small helpers
# ------------------------------------------------------------------------------------------
def _domains(partition_schema: PartitionSchema, schema: Schema) -> tuple[KeyDomain, ...]:
    return tuple(KeyDomain.of(schema.column(c).type) for c in partition_schema.range_columns)


def _check_key_column(schema: Schema, col: str, what: str) -> None:
    if not schema.has_column(col):
        raise ProgrammingError(f"{what}: unknown column {col!r}")
    if not schema.is_key(col):
        raise ProgrammingError(
            f"{what}: column {col!r} is not a primary key column "
            "(hash and range partitioning use key columns only)"
        )
    if schema.column(col).auto_incrementing:
        raise ProgrammingError(
            f"{what}: column {col!r} cannot partition a table (tablets assign its values "
            "after rows are routed to them)"
        )


def _normalize_row(
    values: Sequence[Any], partition_schema: PartitionSchema, schema: Schema, what: str
) -> tuple[Any, ...]:
    """Values converted to the range columns' types (a prefix of them)."""
    cols = partition_schema.range_columns
    if len(values) > len(cols):
        raise ProgrammingError(
            f"{what} {_fmt_row(tuple(values))}: {len(values)} values for "
            f"{len(cols)} range columns ({', '.join(cols)})"
        )
    out = []
    for v, col in zip(values, cols, strict=False):
        t: DataType = schema.column(col).type
        if v is None:
            raise ProgrammingError(f"{what}: range column {col!r} cannot be NULL")
        try:
            out.append(t.python_value(v))
        except ProgrammingError:
            raise ProgrammingError(
                f"{what}: {v!r} is not a valid {t} for range column {col!r}"
            ) from None
    return tuple(out)


def _normalize_bounds(
    b: RangeBounds, partition_schema: PartitionSchema, schema: Schema
) -> RangeBounds:
    what = f"range partition {b.describe()}"
    lo = None if b.lower is None else _normalize_row(b.lower, partition_schema, schema, what)
    hi = None if b.upper is None else _normalize_row(b.upper, partition_schema, schema, what)
    return replace(b, lower=lo, upper=hi)


def _columns(batch: Batch, names: Sequence[str]) -> list[ArrowArray]:
    out = []
    for name in names:
        try:
            out.append(batch[name] if isinstance(batch, Mapping) else batch.column(name))
        except KeyError:
            raise ProgrammingError(
                f"the batch has no column {name!r} (a partition column)"
            ) from None
    return out


def _num_rows(batch: Batch) -> int:
    if isinstance(batch, Mapping):
        return len(next(iter(batch.values()))) if batch else 0
    return int(batch.num_rows)


def _fmt_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, datetime.date):  # also datetime
        return json.dumps(v.isoformat())
    return repr(v) if isinstance(v, bytes) else str(v)


def _fmt_row(values: tuple[Any, ...]) -> str:
    if len(values) == 1:
        return _fmt_value(values[0])
    return "(" + ", ".join(_fmt_value(v) for v in values) + ")"
