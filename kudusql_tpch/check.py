"""Answers: kudusql's result of a query must equal DuckDB's over the same Parquet files.

Equal means the same number of rows and, row by row, the same values: integers exactly,
other numbers (DECIMAL, DOUBLE) within a relative 1e-9 or an absolute 0.01 (the
precision TPC-H answers are printed with), everything else with ``==``. Rows are
compared in order only where the query has a top-level ORDER BY; otherwise both sides
are sorted first. The first difference is described, so a failure names what differs.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Sequence
from typing import Any

REL_TOL = 1e-9
ABS_TOL = 0.01


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    num = (int, float, decimal.Decimal)
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a == b)
    if isinstance(a, num) and isinstance(b, num):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return abs(fa - fb) <= max(ABS_TOL, REL_TOL * max(abs(fa), abs(fb)))
    return bool(a == b)


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for v in row:
        if v is None:
            out.append((0, ""))
        elif isinstance(v, int | float | decimal.Decimal) and not isinstance(v, bool):
            out.append((1, round(float(v), 1)))
        elif isinstance(v, datetime.date | datetime.datetime):
            out.append((2, v.isoformat()))
        else:
            out.append((3, str(v)))
    return tuple(out)


def compare_results(
    ours: Sequence[tuple[Any, ...]], theirs: Sequence[tuple[Any, ...]], *, ordered: bool
) -> str | None:
    """None if the two answers agree (row count; values with REL_TOL / ABS_TOL for
    numbers; row order only when ``ordered``), else a description of the first
    difference."""
    if len(ours) != len(theirs):
        return f"{len(ours)} rows, expected {len(theirs)}"
    a, b = list(ours), list(theirs)
    if not ordered:
        a.sort(key=_sort_key)
        b.sort(key=_sort_key)
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if len(x) != len(y):
            return f"row {i}: {len(x)} columns, expected {len(y)}"
        for j, (u, v) in enumerate(zip(x, y, strict=True)):
            if not _close(u, v):
                return f"row {i}, column {j + 1}: {u!r}, expected {v!r} (row {x!r})"
    return None
