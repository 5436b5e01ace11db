"""Applying DML: rows from DuckDB (or from constant VALUES) written to a storage table.

This module owns the write half of INSERT, UPSERT, UPDATE and DELETE. Rows go to
``Table.write`` in batches of at most ``batch_rows`` rows; a statement that fits one
batch applies at one timestamp, visible at once on every tablet. Row errors follow
Impala on Kudu: the rows that fail (duplicate key, NULL key, no covering range
partition, a value that does not convert, a TIMESTAMP outside Impala's range) are
skipped and reported, the rest apply.
With ``atomic`` (``SET abort_on_error = true``) the whole statement is one batch that
applies entirely or raises (IntegrityError for key violations, DataError for bad
values).
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import Error, ProgrammingError
from kudusql.common.row_operations import RowError, WriteOp, atomic_rejection
from kudusql.common.types import DataType, TypeKind, cast_array, display_value
from kudusql.parser.limits import check_cancelled
from kudusql.storage.tables.handles import TableHandle

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
    table: TableHandle,
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
        rows = data.num_rows
        data, kept, errors = timestamp_range_errors(data, table, op)
        if errors and atomic:
            raise atomic_rejection(errors)
        if data.num_rows:
            wr = table.write(data, op, atomic=atomic)
            res.applied += wr.applied
            res.ignored += wr.ignored
            res.timestamp = wr.timestamp
            errors += [
                e if kept is None else dataclasses.replace(e, index=int(kept[e.index]))
                for e in wr.errors
            ]
        errors.sort(key=lambda e: e.index)
        res.error_count += len(errors)
        room = MAX_ERROR_SAMPLES - len(res.errors)
        for e in errors[: max(0, room)]:
            res.errors.append(RowError(e.index + offset, e.op, e.key, e.status, e.message))
        offset += rows

    for b in batches:
        t = b if isinstance(b, pa.Table) else pa.Table.from_batches([b])
        t = _rename(t, columns, table.name)
        pending.append(t)
        pending_rows += t.num_rows
        if not atomic and pending_rows >= batch_rows:
            flush()
    flush()
    return res


#: Impala's TIMESTAMP range, 1400-01-01 to 9999-12-31 (microseconds since the epoch, to
#: the first microsecond after it).
TIMESTAMP_RANGE = (-17987443200 * 10**6, 253402300800 * 10**6)
_TIMESTAMP = DataType(TypeKind.TIMESTAMP)


def timestamp_out_of_range(value: Any) -> bool:
    """A Python value for a TIMESTAMP column that converts to a timestamp outside
    Impala's range (what ``timestamp_range_errors`` refuses)."""
    if value is None:
        return False
    if isinstance(value, datetime.datetime):
        return value.year < 1400  # a datetime cannot pass 9999
    try:
        converted = _TIMESTAMP.python_value(value)
    except Error:
        return False  # not a timestamp at all: the write's own error
    return isinstance(converted, datetime.datetime) and converted.year < 1400


def timestamp_range_errors(
    data: pa.Table, table: TableHandle, op: WriteOp
) -> tuple[pa.Table, np.ndarray | None, list[RowError]]:
    """The rows of ``data`` to write, the index in ``data`` of each (None: all of them)
    and the row errors of the others: a value for a TIMESTAMP column outside Impala's
    range, which Impala cannot hold (a CAST gives NULL there; a value written as it is
    fails its row, as a value that does not fit its column does)."""
    schema = table.schema
    bad: np.ndarray | None = None
    why: dict[int, str] = {}
    for name in data.column_names:
        if not schema.has_column(name) or schema.column(name).type.kind is not TypeKind.TIMESTAMP:
            continue
        stamps, unreadable = cast_array(data.column(name), _TIMESTAMP)
        micros = stamps.cast(pa.int64())
        valid = np.asarray(pc.is_valid(micros).to_numpy(zero_copy_only=False), dtype=bool)
        values = np.asarray(micros.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        low, end = TIMESTAMP_RANGE
        mask: np.ndarray = valid & ((values < low) | (values >= end))
        if unreadable is not None:
            mask = mask & ~unreadable
        if not mask.any():
            continue
        for i in np.flatnonzero(mask)[:MAX_ERROR_SAMPLES]:
            why.setdefault(int(i), _outside_message(name, data.column(name), int(i)))
        bad = mask if bad is None else (bad | mask)
    if bad is None:
        return data, None, []
    keys = [k for k in schema.key_names if k in data.column_names]
    errors = []
    for n, i in enumerate(np.flatnonzero(bad).tolist()):
        # Only the first rows' errors are ever shown (``MAX_ERROR_SAMPLES``).
        shown = n < MAX_ERROR_SAMPLES and keys
        key = tuple(data.column(k)[i].as_py() for k in keys) if shown else None
        message = why.get(i, "invalid value for a TIMESTAMP column")
        errors.append(RowError(i, op, key, "InvalidArgument", message))
    kept = np.flatnonzero(~bad)
    return data.take(kept), kept, errors


def _outside_message(name: str, column: pa.ChunkedArray[Any], row: int) -> str:
    try:
        text = display_value(column[row].as_py())
    except (ValueError, OverflowError):  # no Python form: Arrow's text of it
        text = str(pc.cast(column.slice(row, 1), pa.string())[0].as_py())
    return (
        f"invalid value {text} for column {name!r} of type TIMESTAMP: outside "
        "1400-01-01..9999-12-31, the range of Impala's TIMESTAMP"
    )
