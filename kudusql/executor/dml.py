"""Applying DML: rows from DuckDB (or from constant VALUES) written to a storage table.

This module owns the write half of INSERT, UPSERT, UPDATE and DELETE. Rows go to
``Table.write`` in batches of at most ``batch_rows`` rows; a statement that fits one
batch applies at one timestamp, visible at once on every tablet. Row errors follow
Impala on Kudu: the rows that fail (duplicate key, NULL key, no covering range
partition, a value that does not convert) are skipped and reported, the rest apply.
With ``atomic`` (``SET abort_on_error = true``) the whole statement is one batch that
applies entirely or raises (IntegrityError for key violations, DataError for bad
values).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from kudusql.common.errors import ProgrammingError
from kudusql.parser.limits import check_cancelled
from kudusql.storage.client.table import Table
from kudusql.storage.tablet.write_ops import RowError, WriteOp

#: Row errors kept as samples per statement.
MAX_ERROR_SAMPLES = 20


@dataclass
class DmlResult:
    """What a DML statement did: rows applied, ignored (the _IGNORE ops), the number of
    row errors and the first ``MAX_ERROR_SAMPLES`` of them, and the last write's
    timestamp."""

    applied: int = 0
    ignored: int = 0
    error_count: int = 0
    errors: list[RowError] = field(default_factory=list)
    timestamp: int | None = None

    def warnings(self, verb: str) -> list[str]:
        if not self.error_count:
            return []
        out = [
            f"{verb}: {self.error_count} row(s) failed and were skipped; "
            f"{self.applied} row(s) applied"
        ]
        out += [str(e) for e in self.errors[:5]]
        return out


def _rename(data: pa.Table, columns: Sequence[str], table: str) -> pa.Table:
    if data.num_columns != len(columns):
        raise ProgrammingError(
            f"writing to {table!r}: {len(columns)} column(s) expected "
            f"({', '.join(columns)}), the rows have {data.num_columns}"
        )
    return data.rename_columns(list(columns))


def write_batches(
    table: Table,
    batches: Iterable[pa.RecordBatch | pa.Table],
    columns: Sequence[str],
    op: WriteOp,
    *,
    atomic: bool,
    batch_rows: int,
    cancelled: threading.Event | None = None,
) -> DmlResult:
    """Write ``batches`` (columns by position) with ``op``; see the module docstring.
    ``cancelled`` is checked before each write: batches already written stay."""
    res = DmlResult()
    pending: list[pa.Table] = []
    pending_rows = 0
    offset = 0

    def flush() -> None:
        nonlocal pending, pending_rows, offset
        if not pending:
            return
        data = pa.concat_tables(pending) if len(pending) > 1 else pending[0]
        pending, pending_rows = [], 0
        if data.num_rows == 0:
            return
        check_cancelled(cancelled)
        wr = table.write(data, op, atomic=atomic)
        res.applied += wr.applied
        res.ignored += wr.ignored
        res.timestamp = wr.timestamp
        res.error_count += len(wr.errors)
        room = MAX_ERROR_SAMPLES - len(res.errors)
        for e in wr.errors[: max(0, room)]:
            res.errors.append(RowError(e.index + offset, e.op, e.key, e.status, e.message))
        offset += data.num_rows

    for b in batches:
        t = b if isinstance(b, pa.Table) else pa.Table.from_batches([b])
        t = _rename(t, columns, table.name)
        pending.append(t)
        pending_rows += t.num_rows
        if not atomic and pending_rows >= batch_rows:
            flush()
    flush()
    return res


def rows_to_table(rows: Sequence[Sequence[Any]], columns: Sequence[str], table: Table) -> pa.Table:
    """Python rows as an Arrow table for ``table`` (``Table.rows_to_arrow``)."""
    return table.rows_to_arrow(columns, rows)
