"""What one statement returns to the DB-API: ``Result``.

This module owns the result value every statement handler builds (the session's
dispatch, the DDL and introspection handlers and the fast paths): rows as an Arrow table
or as Python tuples with their schema, or a row count, with warnings and the HybridTime
the statement read or wrote at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass
class Result:
    """What one statement returned: rows (queries and SHOW statements) or a row count
    (DML), warnings, and the HybridTime it read at or wrote at."""

    table: pa.Table | None = None
    rowcount: int = -1
    warnings: list[str] = field(default_factory=list)
    timestamp: int | None = None
    #: Rows as Python tuples with their schema, for results built without Arrow (the
    #: point-lookup fast path); ``arrow()`` makes the table when one is asked for.
    rows: list[tuple[Any, ...]] | None = None
    row_schema: pa.Schema | None = None
    #: Per result column, whether it may hold NULL (None: unknown); when not given, the
    #: Arrow fields' ``nullable`` flags say it (``QueryPlan.null_ok``).
    null_ok: tuple[bool | None, ...] | None = None

    @property
    def has_rows(self) -> bool:
        return self.table is not None or self.row_schema is not None

    def arrow(self) -> pa.Table | None:
        if self.table is None and self.row_schema is not None:
            cols = list(zip(*self.rows, strict=True)) if self.rows else None
            self.table = pa.table(
                [pa.array(cols[i] if cols else [], f.type) for i, f in enumerate(self.row_schema)],
                schema=self.row_schema,
            )
        return self.table
