"""Column predicates and the scan specification storage understands.

A predicate is bound to one column and evaluated exactly on Arrow arrays; it can also
answer whether a page with given zone-map statistics could hold a match, so scans
prune pages without ever returning a wrong row. Predicates on a primary-key prefix
become encoded key bounds (``key_bounds``) that narrow DiskRowSets to rowid ranges.

An *advisory* predicate (``ColumnPredicate.advisory()``) is a hint from a caller that
filters the rows again itself (the SQL executor: DuckDB applies the whole WHERE clause).
Scans use it to prune exactly as any other predicate (partitions, key ranges, rowsets,
zone-mapped pages) but need not evaluate it row by row, so surviving pages go out whole
(zero-copy from the block cache) instead of being filtered and copied.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import ProgrammingError
from kudusql.common.json_values import from_json_value, to_json_value
from kudusql.common.keys import ArrowArray
from kudusql.common.schema import Schema
from kudusql.common.types import TypeKind


class PredicateKind(enum.Enum):
    EQ = "="
    RANGE = "range"
    IN = "in"
    IS_NULL = "is null"
    IS_NOT_NULL = "is not null"
    PREFIX = "prefix"


@dataclass(frozen=True)
class ColumnPredicate:
    """``column <kind> value``. RANGE has optional ``lower``/``upper`` with inclusivity flags."""

    column: str
    kind: PredicateKind
    value: Any = None
    lower: Any = None
    upper: Any = None
    lower_inclusive: bool = True
    upper_inclusive: bool = False
    values: tuple[Any, ...] = ()
    #: A pruning hint: rows that fail it may be returned (see the module docstring).
    hint: bool = False

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def eq(cls, column: str, value: Any) -> ColumnPredicate:
        return cls(column, PredicateKind.EQ, value=value)

    @classmethod
    def lt(cls, column: str, value: Any) -> ColumnPredicate:
        return cls(column, PredicateKind.RANGE, upper=value, upper_inclusive=False)

    @classmethod
    def le(cls, column: str, value: Any) -> ColumnPredicate:
        return cls(column, PredicateKind.RANGE, upper=value, upper_inclusive=True)

    @classmethod
    def gt(cls, column: str, value: Any) -> ColumnPredicate:
        return cls(column, PredicateKind.RANGE, lower=value, lower_inclusive=False)

    @classmethod
    def ge(cls, column: str, value: Any) -> ColumnPredicate:
        return cls(column, PredicateKind.RANGE, lower=value, lower_inclusive=True)

    @classmethod
    def between(cls, column: str, lo: Any, hi: Any) -> ColumnPredicate:
        return cls(column, PredicateKind.RANGE, lower=lo, upper=hi, upper_inclusive=True)

    @classmethod
    def in_list(cls, column: str, values: Sequence[Any]) -> ColumnPredicate:
        return cls(column, PredicateKind.IN, values=tuple(values))

    @classmethod
    def is_null(cls, column: str) -> ColumnPredicate:
        return cls(column, PredicateKind.IS_NULL)

    @classmethod
    def is_not_null(cls, column: str) -> ColumnPredicate:
        return cls(column, PredicateKind.IS_NOT_NULL)

    @classmethod
    def prefix(cls, column: str, prefix: str | bytes) -> ColumnPredicate:
        return cls(column, PredicateKind.PREFIX, value=prefix)

    def advisory(self) -> ColumnPredicate:
        """This predicate as a pruning hint: scans may return rows that fail it."""
        return self if self.hint else replace(self, hint=True)

    def exact(self) -> ColumnPredicate:
        """This predicate evaluated row by row (a hint made exact)."""
        return replace(self, hint=False) if self.hint else self

    def __str__(self) -> str:
        k = self.kind
        if k is PredicateKind.EQ:
            return f"{self.column} = {self.value!r}"
        if k is PredicateKind.IN:
            return f"{self.column} IN {list(self.values)!r}"
        if k is PredicateKind.PREFIX:
            return f"{self.column} LIKE {self.value!r}%"
        if k is PredicateKind.RANGE:
            parts = []
            if self.lower is not None:
                parts.append(
                    f"{self.column} {'>=' if self.lower_inclusive else '>'} {self.lower!r}"
                )
            if self.upper is not None:
                parts.append(
                    f"{self.column} {'<=' if self.upper_inclusive else '<'} {self.upper!r}"
                )
            return " AND ".join(parts) or f"{self.column} IS NOT NULL"
        return f"{self.column} {k.value.upper()}"

    # -- serialization (scan tokens) ----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"column": self.column, "kind": self.kind.value}
        for k in ("value", "lower", "upper"):
            v = getattr(self, k)
            if v is not None:
                d[k] = to_json_value(v)
        if self.kind is PredicateKind.RANGE:
            d["lower_inclusive"] = self.lower_inclusive
            d["upper_inclusive"] = self.upper_inclusive
        if self.values:
            d["values"] = [to_json_value(v) for v in self.values]
        if self.hint:
            d["hint"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ColumnPredicate:
        def val(k: str) -> Any:
            v = d.get(k)
            return None if v is None else from_json_value(v, "scan token")

        return cls(
            d["column"],
            PredicateKind(d["kind"]),
            value=val("value"),
            lower=val("lower"),
            upper=val("upper"),
            lower_inclusive=bool(d.get("lower_inclusive", True)),
            upper_inclusive=bool(d.get("upper_inclusive", False)),
            values=tuple(from_json_value(v, "scan token") for v in d.get("values", ())),
            hint=bool(d.get("hint", False)),
        )

    # -- binding ------------------------------------------------------------------------------
    def bind(self, schema: Schema) -> ColumnPredicate:
        """Check the column exists and convert literals to the column's type."""
        col = schema.column(self.column)
        t = col.type

        def conv(v: Any) -> Any:
            if v is None:
                return None
            if t.kind is TypeKind.VARCHAR and isinstance(v, str):
                return v  # compare the whole literal: truncating it would widen the match
            try:
                return t.python_value(v)
            except ProgrammingError:
                raise ProgrammingError(
                    f"predicate {self}: {v!r} is not a valid {t} for column {self.column!r}"
                ) from None

        if self.kind is PredicateKind.PREFIX:
            if not t.is_varlen:
                raise ProgrammingError(f"prefix predicate on non-string column {self.column!r}")
            return self
        return ColumnPredicate(
            self.column,
            self.kind,
            value=conv(self.value),
            lower=conv(self.lower),
            upper=conv(self.upper),
            lower_inclusive=self.lower_inclusive,
            upper_inclusive=self.upper_inclusive,
            values=tuple(v for v in (conv(x) for x in self.values) if v is not None),
            hint=self.hint,
        )

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate(self, arr: ArrowArray) -> np.ndarray:
        """A boolean numpy mask: True where the row satisfies the predicate (NULL -> False)."""
        k = self.kind
        if k is PredicateKind.IS_NULL:
            return _mask(pc.is_null(arr))
        if k is PredicateKind.IS_NOT_NULL:
            return _mask(pc.is_valid(arr))
        if k is PredicateKind.EQ:
            res = pc.equal(arr, _scalar(self.value, arr.type))
        elif k is PredicateKind.IN:
            if not self.values:
                return np.zeros(len(arr), dtype=bool)
            res = pc.is_in(arr, value_set=pa.array(list(self.values), type=arr.type))
        elif k is PredicateKind.PREFIX:
            p = self.value
            if pa.types.is_binary(arr.type):
                pb = p if isinstance(p, bytes) else str(p).encode()
                res = pc.starts_with(arr.cast(pa.binary()), pb)  # type: ignore[call-overload]
            else:
                res = pc.starts_with(arr, str(p) if not isinstance(p, bytes) else p.decode())
        else:
            rng = None
            if self.lower is not None:
                f = pc.greater_equal if self.lower_inclusive else pc.greater
                rng = f(arr, _scalar(self.lower, arr.type))
            if self.upper is not None:
                f = pc.less_equal if self.upper_inclusive else pc.less
                r2 = f(arr, _scalar(self.upper, arr.type))
                rng = r2 if rng is None else pc.and_(rng, r2)
            if rng is None:
                return _mask(pc.is_valid(arr))
            res = rng
        return _mask(res)

    def may_match_zone(self, lo: Any, hi: Any, null_count: int, nan_count: int, n: int) -> bool:
        """Could a page with these statistics contain a matching row? (never a false 'no')."""
        k = self.kind
        if k is PredicateKind.IS_NULL:
            return null_count > 0
        if k is PredicateKind.IS_NOT_NULL:
            return null_count < n
        if null_count >= n:
            return False
        if lo is None or hi is None or nan_count > 0:
            return True
        try:
            if k is PredicateKind.EQ:
                return bool(lo <= self.value <= hi)
            if k is PredicateKind.IN:
                return any(lo <= v <= hi for v in self.values)
            if k is PredicateKind.RANGE:
                if self.lower is not None and (
                    hi < self.lower or (hi == self.lower and not self.lower_inclusive)
                ):
                    return False
                return not (
                    self.upper is not None
                    and (lo > self.upper or (lo == self.upper and not self.upper_inclusive))
                )
            if k is PredicateKind.PREFIX:
                p = self.value
                if isinstance(lo, str) and isinstance(p, str):
                    return bool(hi >= p and (lo[: len(p)] <= p))
                return True
        except TypeError:
            return True
        return True

    def is_none(self) -> bool:
        """True when no row can match (an empty IN list or an empty range)."""
        if self.kind is PredicateKind.IN:
            return not self.values
        if self.kind is PredicateKind.RANGE and self.lower is not None and self.upper is not None:
            try:
                if self.lower > self.upper:
                    return True
                if self.lower == self.upper:
                    return not (self.lower_inclusive and self.upper_inclusive)
            except TypeError:
                return False
        return False


def _scalar(v: Any, t: pa.DataType) -> pa.Scalar[Any]:
    return pa.scalar(v, type=t)


def _mask(res: ArrowArray) -> np.ndarray:
    if isinstance(res, pa.ChunkedArray):
        arr: pa.Array[Any] = res.combine_chunks() if res.num_chunks != 1 else res.chunks[0]
    else:
        arr = res
    if arr.null_count:
        arr = arr.fill_null(False)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool)
