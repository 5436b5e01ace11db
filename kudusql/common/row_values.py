"""Python rows as Arrow columns, each value meaning what it means alone.

The row path's fallback and every layer that turns Python rows into the batch a write
takes (the tables layer, the cluster's client) build their columns here, so a value
converts, or fails, the same way whichever path or process carries it.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import DataError
from kudusql.common.schema import Schema
from kudusql.common.types import _INT_BOUNDS, DataType, TypeKind, cast_array


def rows_to_arrow(schema: Schema, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> pa.Table:
    """Python rows as an Arrow table for the batch path, each value meaning what it would
    mean alone (``column_from_values``); the batch path's validation then converts each
    column to its type and reports the values that do not convert, row by row."""
    arrays = []
    for i, name in enumerate(names):
        values = [r[i] for r in rows]
        dtype = schema.column(name).type if schema.has_column(name) else None
        arrays.append(column_from_values(values, dtype))
    return pa.table(arrays, names=list(names))


#: Python types whose values Arrow builds into the column's type exactly as a cast of
#: the values' own array would (Arrow's direct build truncates a float or a Decimal to
#: an int, a datetime to a date, and rounds a float to FLOAT without an overflow check).
_EXACT_BUILD: dict[TypeKind, frozenset[type]] = {
    **{k: frozenset({int}) for k in _INT_BOUNDS},
    TypeKind.DOUBLE: frozenset({float, int}),
    TypeKind.DECIMAL: frozenset({decimal.Decimal}),
    TypeKind.STRING: frozenset({str}),
    TypeKind.VARCHAR: frozenset({str}),
    TypeKind.BINARY: frozenset({bytes}),
    TypeKind.BOOL: frozenset({bool}),
    TypeKind.DATE: frozenset({datetime.date}),
    TypeKind.TIMESTAMP: frozenset({datetime.datetime}),
}
_NONE = type(None)
_INT_DECIMAL = {int, decimal.Decimal}
_BUILD_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


def column_from_values(values: list[Any], dtype: DataType | None) -> pa.Array[Any]:
    """An Arrow column of Python values in which each value means what it means alone.

    Values of the column's own Python types are built in the column's type (exact).
    Values of one other type are built in the type Arrow infers for them, and the
    batch path's cast then decides each one. Values of several types (``[1, "2",
    2.5]``) are converted type by type, each group as if it came alone, so a value's
    outcome never depends on the other rows of its batch: the column comes back in the
    column's type, or, when some value does not convert, as text that converts back to
    exactly the converted values (and fails again for the others, whose text then names
    them in the row error)."""
    types = {type(v) for v in values}
    types.discard(_NONE)
    if dtype is not None and types <= _EXACT_BUILD.get(dtype.kind, frozenset()):
        try:
            return pa.array(values, type=dtype.arrow_type())
        except _BUILD_ERRORS:
            pass  # out of range: the values' own array and the cast report it
    if types == _INT_DECIMAL:  # every int is exactly a Decimal: one group
        values = [decimal.Decimal(v) if type(v) is int else v for v in values]
        types = {decimal.Decimal}
    if len(types) <= 1 or dtype is None:
        return _inferred(values)
    target = dtype.arrow_type()
    converted: list[Any] = [None] * len(values)
    text: list[str | None] = [None] * len(values)
    failed = False
    for t in types:
        idx = [i for i, v in enumerate(values) if type(v) is t]
        arr, bad = cast_array(_inferred([values[i] for i in idx]), dtype)
        for j, v in zip(idx, arr.to_pylist(), strict=True):
            converted[j] = v
        if bad is not None:
            failed = True
            for k in np.flatnonzero(bad).tolist():
                text[idx[k]] = str(values[idx[k]])
    if not failed:
        return pa.array(converted, type=target)
    good = pc.cast(pa.array(converted, type=target), pa.string()).to_pylist()
    return pa.array([t if t is not None else g for t, g in zip(text, good, strict=True)])


def _inferred(values: list[Any]) -> pa.Array[Any]:
    """The values in the Arrow type they infer, or as text when they infer none."""
    try:
        arr: pa.Array[Any] = pa.array(values)
        return arr
    except UnicodeEncodeError:
        pass  # a str UTF-8 cannot hold: named below
    except _BUILD_ERRORS:
        pass
    texts = [None if v is None else str(v) for v in values]
    for t in texts:
        if t is not None:
            try:
                t.encode("utf-8")
            except UnicodeEncodeError as e:
                raise DataError(
                    f"{t!r} is not valid text: UTF-8 cannot hold {t[e.start : e.end]!r} at "
                    f"position {e.start} (a lone surrogate)"
                ) from None
    return pa.array(texts, type=pa.string())
