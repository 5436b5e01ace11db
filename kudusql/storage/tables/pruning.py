"""Partition pruning: which partitions (tablets) a scan with given predicates must read.

This module owns Kudu's partition pruner (``kudu-internals.md`` §1) over the values of
``kudusql.storage.tables.partition``:

1. The predicates on each partition column are merged (AND) and simplified as Kudu's
   column predicates are: an exclusive lower end becomes inclusive by taking the
   successor, an inclusive upper end exclusive likewise, a range of one value an
   equality, ``c < MIN`` or an empty IN list "no rows", IS NULL on a key column "no
   rows". The result per column is a set of values (= and IN), a range
   ``[lower, upper)``, or nothing.
2. Hash dimensions: when every column of a dimension has a value set, only the buckets
   of the combinations of those values can hold a matching row. A range partition with
   its own hash schema (Kudu 1.17) has its buckets computed with that schema.
3. Range: the constraints are pushed, in range-column order, into an inclusive lower and
   an exclusive upper range key (Kudu's ``PushLowerBoundKeyPredicates`` and
   ``PushUpperBoundKeyPredicates`` rules; unpushed columns take their minimum).
4. A partition is kept iff its bucket in every dimension of its range's hash schema is
   allowed and its range intersects ``[lower, upper)``.

Pruning only drops partitions that cannot hold a matching row; scans still evaluate every
predicate. A predicate whose literal does not fit the column's type is not used for
pruning (it cannot narrow anything safely).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kudusql.common.errors import DataError
from kudusql.common.keys import prefix_successor
from kudusql.common.murmur import murmur2_64
from kudusql.common.predicates import ColumnPredicate, PredicateKind
from kudusql.common.schema import Schema
from kudusql.storage.tables.partition import HashDimension, Partition, PartitionSchema
from kudusql.storage.tables.range_key import (
    Component,
    KeyDomain,
    encode_components,
    increment_components,
)

__all__ = ["PruningPlan", "plan_pruning", "prune_partitions"]

# Hash pruning enumerates the combinations of a dimension's values; past this many it
# keeps every bucket instead (Kudu has no limit; this bounds the planning time).
MAX_HASH_COMBINATIONS = 1 << 16


@dataclass(frozen=True)
class PruningPlan:
    """What the predicates allow: per hash dimension of the table-wide hash schema the
    possible buckets (None: any), the same for each range's own hash schema
    (``range_buckets``), and the range keys ``[range_lower, range_upper)`` (``b""``/None:
    unbounded). ``empty`` means no row can match at all."""

    empty: bool
    buckets: tuple[frozenset[int] | None, ...]
    range_lower: bytes
    range_upper: bytes | None
    range_buckets: Mapping[tuple[HashDimension, ...], tuple[frozenset[int] | None, ...]] = field(
        default_factory=dict
    )

    def keeps(self, partition: Partition) -> bool:
        """True if ``partition`` may hold a row matching the predicates."""
        if self.empty:
            return False
        own = partition.range_bounds.hash_schema
        allowed_buckets = self.buckets if own is None else self.range_buckets[own]
        for allowed, b in zip(allowed_buckets, partition.hash_buckets, strict=True):
            if allowed is not None and b not in allowed:
                return False
        if self.range_upper is not None and partition.range_key_start >= self.range_upper:
            return False
        end = partition.range_key_end
        return not (end and end <= self.range_lower)


def prune_partitions(
    partition_schema: PartitionSchema,
    schema: Schema,
    partitions: Sequence[Partition],
    predicates: Sequence[ColumnPredicate],
) -> list[int]:
    """Indices into ``partitions`` of those a scan with ``predicates`` (bound to ``schema``,
    ANDed) must read, in order."""
    plan = plan_pruning(partition_schema, schema, predicates)
    return [i for i, p in enumerate(partitions) if plan.keeps(p)]


def plan_pruning(
    partition_schema: PartitionSchema, schema: Schema, predicates: Sequence[ColumnPredicate]
) -> PruningPlan:
    """The bucket sets and range-key bounds that ``predicates`` imply."""
    dims = partition_schema.hash_dimensions
    own = {b.hash_schema for b in partition_schema.range_bounds if b.hash_schema is not None}
    columns = {c for s in (dims, *own) for d in s for c in d.columns}
    columns |= set(partition_schema.range_columns)
    cons = _constraints(schema, columns, predicates)
    if cons is None:
        none = {s: tuple(frozenset[int]() for _ in s) for s in own}
        return PruningPlan(True, tuple(frozenset() for _ in dims), b"", None, none)
    buckets = tuple(_allowed_buckets(d, schema, cons) for d in dims)
    per_range = {s: tuple(_allowed_buckets(d, schema, cons) for d in s) for s in own}
    domains = [KeyDomain.of(schema.column(c).type) for c in partition_schema.range_columns]
    lower, upper = _range_key_bounds(partition_schema.range_columns, domains, cons)
    return PruningPlan(False, buckets, lower, upper, per_range)


# ------------------------------------------------------------------------------------------
# Per-column constraints
# ------------------------------------------------------------------------------------------
@dataclass
class _Constraint:
    """The merged predicates of one column, as canonical components."""

    lower: Component | None = None  # inclusive
    upper: Component | None = None  # exclusive
    values: list[Component] | None = None  # sorted, distinct: = and IN
    is_null: bool = False  # IS NULL
    not_null: bool = False  # IS NOT NULL, or any comparison
    empty: bool = False


def _constraints(
    schema: Schema, columns: set[str], predicates: Sequence[ColumnPredicate]
) -> dict[str, _Constraint] | None:
    """Merged constraints per column (ANDed, like Kudu's scan spec merges predicates);
    None when some column's constraint admits no row, which prunes every partition."""
    out: dict[str, _Constraint] = {}
    for p in predicates:
        if p.is_none():
            return None
        t = schema.column(p.column).type
        _apply(
            out.setdefault(p.column, _Constraint()), p, KeyDomain.of(t) if t.key_allowed else None
        )
    for name, c in out.items():
        col = schema.column(name)
        if c.is_null and (c.not_null or not col.nullable):
            return None
        if col.type.key_allowed:
            _simplify(c, KeyDomain.of(col.type))
        if c.empty:
            return None
    return {name: c for name, c in out.items() if name in columns}


def _component(value: object, domain: KeyDomain) -> Component | None:
    if value is None:
        return None
    try:
        return domain.component(value)
    except DataError:
        return None


def _apply(c: _Constraint, p: ColumnPredicate, d: KeyDomain | None) -> None:
    """AND one predicate into ``c`` (only its NULL-ness when the type has no domain)."""
    k = p.kind
    if k is PredicateKind.IS_NULL:
        c.is_null = True
        return
    c.not_null = True
    if d is None:
        return
    if k in (PredicateKind.EQ, PredicateKind.IN):
        raw = [p.value] if k is PredicateKind.EQ else list(p.values)
        comps = [_component(v, d) for v in raw]
        if any(x is None for x in comps):
            return  # a literal that does not fit the type: not used for pruning
        vals = set(comps)
        c.values = sorted(vals if c.values is None else vals.intersection(c.values))
    elif k is PredicateKind.RANGE:
        lo = _component(p.lower, d)
        if lo is not None and not p.lower_inclusive:
            lo = d.successor(lo)
            if lo is None:  # "> MAX"
                c.empty = True
                return
        hi = _component(p.upper, d)
        if hi is not None and p.upper_inclusive:
            hi = d.successor(hi)  # "<= MAX" bounds nothing
        _narrow(c, lo, hi)
    elif k is PredicateKind.PREFIX and d.width is None and isinstance(p.value, str | bytes):
        v = p.value
        prefix = v.encode("utf-8") if isinstance(v, str) else v
        _narrow(c, prefix, prefix_successor(prefix))


def _narrow(c: _Constraint, lo: Component | None, hi: Component | None) -> None:
    if lo is not None and (c.lower is None or lo > c.lower):
        c.lower = lo
    if hi is not None and (c.upper is None or hi < c.upper):
        c.upper = hi


def _simplify(c: _Constraint, d: KeyDomain) -> None:
    """Kudu's simplifications: apply the range to a value set, spot empty and one-value
    ranges, drop a lower end at the type minimum."""
    if c.empty:
        return
    lo, hi = c.lower, c.upper
    if c.values is not None:
        c.values = [v for v in c.values if (lo is None or v >= lo) and (hi is None or v < hi)]
        c.lower = c.upper = None
        c.empty = not c.values
        return
    if (hi is not None and hi <= d.min) or (lo is not None and hi is not None and lo >= hi):
        c.empty = True
    elif lo is not None and hi is not None and d.successor(lo) == hi:
        c.values, c.lower, c.upper = [lo], None, None
    elif lo is not None and lo <= d.min:
        c.lower = None
    elif lo is not None and d.max is not None and lo >= d.max:
        c.values, c.lower, c.upper = [lo], None, None


# ------------------------------------------------------------------------------------------
# Hash buckets and range keys
# ------------------------------------------------------------------------------------------
def _allowed_buckets(
    dim: HashDimension, schema: Schema, cons: Mapping[str, _Constraint]
) -> frozenset[int] | None:
    """The buckets the value combinations hash to, or None (any bucket)."""
    lists: list[list[Component]] = []
    for col in dim.columns:
        c = cons.get(col)
        if c is None or not c.values:
            return None
        lists.append(c.values)
    if math.prod(len(v) for v in lists) > MAX_HASH_COMBINATIONS:
        return None
    last = len(lists) - 1
    encoded = [
        [KeyDomain.of(schema.column(col).type).encode(v, i == last) for v in vals]
        for i, (col, vals) in enumerate(zip(dim.columns, lists, strict=True))
    ]
    buckets: set[int] = set()
    for combo in itertools.product(*encoded):
        buckets.add(murmur2_64(b"".join(combo), dim.seed) % dim.num_buckets)
        if len(buckets) == dim.num_buckets:
            break
    return frozenset(buckets)


def _range_key_bounds(
    columns: Sequence[str], domains: Sequence[KeyDomain], cons: Mapping[str, _Constraint]
) -> tuple[bytes, bytes | None]:
    """(inclusive lower, exclusive upper or None) range keys of every matching row."""
    parts: list[Component] = []
    for col in columns:
        c = cons.get(col)
        if c is not None and c.values:
            parts.append(c.values[0])
        elif c is not None and c.lower is not None:
            parts.append(c.lower)
        else:
            break
    lower = encode_components(parts, domains) if parts else b""

    parts = []
    inclusive = True
    for col, d in zip(columns, domains, strict=True):
        c = cons.get(col)
        if c is not None and c.values:
            parts.append(c.values[-1])
            continue
        if c is None or c.upper is None:
            break
        prev = d.predecessor(c.upper)
        if prev is None:  # e.g. b < "r": keep the exclusive end and stop
            parts.append(c.upper)
            inclusive = False
            break
        parts.append(prev)
    if not parts:
        return lower, None
    full = increment_components(parts, domains) if inclusive else parts
    return lower, None if full is None else encode_components(full, domains)
