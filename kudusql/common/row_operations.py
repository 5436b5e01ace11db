"""The write vocabulary every layer shares: Kudu's row operations and what a write
batch reports back.

``WriteOp`` holds Kudu's operation codes (the WAL stores them); ``operations`` turns a
caller's "one operation for every row" or "an operation column" into one code per row.
``RowError`` is a row a batch could not apply, ``WriteResult`` what a batch did, and
``atomic_rejection`` the error an all-or-nothing batch with row errors raises.
``WriteShortcuts`` gives anything with ``write`` its one-operation forms (``insert``,
``upsert``, ...). Kudu keeps this vocabulary in ``common/row_operations.h`` and the
client's ``RowError``/``WriteResult``; it knows nothing of tablets, so the layers above
the tables layer use it without reaching into storage.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import DataError, Error, IntegrityError, ProgrammingError
from kudusql.common.types import display_value


class WriteOp(enum.IntEnum):
    """DO NOT CHANGE: on-disk (the WAL stores these; Kudu's op codes)."""

    INSERT = 1
    UPDATE = 2
    DELETE = 3
    UPSERT = 5
    INSERT_IGNORE = 10
    UPDATE_IGNORE = 11
    DELETE_IGNORE = 12
    UPSERT_IGNORE = 13

    @classmethod
    def parse(cls, v: WriteOp | str | int) -> WriteOp:
        if isinstance(v, WriteOp):
            return v
        if isinstance(v, str):
            try:
                return cls[v.strip().upper()]
            except KeyError:
                raise ProgrammingError(f"unknown write operation {v!r}") from None
        try:
            return cls(int(v))
        except ValueError:
            raise ProgrammingError(f"unknown write operation {v!r}") from None


@dataclass(frozen=True)
class RowError:
    """A row the batch could not apply: its index in the caller's batch and why."""

    index: int
    op: WriteOp
    key: tuple[Any, ...] | None
    status: str  # Kudu's status code: AlreadyPresent, NotFound, InvalidArgument, Immutable
    message: str

    def __str__(self) -> str:
        key = "?" if self.key is None else ", ".join(display_value(v) for v in self.key)
        return f"row {self.index} ({self.op.name} key=({key})): {self.status}: {self.message}"


def atomic_rejection(errors: Sequence[RowError]) -> Error:
    """The error an atomic batch with these row errors raises: IntegrityError for key
    violations (already present, not found), DataError for bad values."""
    msg = f"atomic write batch rejected: {len(errors)} row error(s); first: {errors[0]}"
    if any(e.status in ("AlreadyPresent", "NotFound") for e in errors):
        return IntegrityError(msg)
    return DataError(msg)


@dataclass
class WriteResult:
    """What a write batch did: its timestamp, rows applied, ignored and failed."""

    timestamp: int
    applied: int
    ignored: int
    errors: list[RowError] = field(default_factory=list)


def operations(data: pa.Table, op: WriteOp | str | int | None, op_column: str | None) -> np.ndarray:
    """The operation code of every row: one for all, or from an operation column."""
    n = data.num_rows
    if op_column is not None:
        opcol = data.column(op_column)
        if pa.types.is_integer(opcol.type):
            ops = np.asarray(opcol.to_numpy(), dtype=np.int64)
            bad = [int(v) for v in np.unique(ops) if int(v) not in WriteOp._value2member_map_]
            if bad:
                raise ProgrammingError(f"unknown write operation code(s) {bad}")
            return ops.astype(np.uint8)
        names = opcol.to_pylist()
        uniq = {v: WriteOp.parse(v) for v in set(names) if v is not None}
        if len(uniq) != len(set(names)):
            raise ProgrammingError(f"{op_column} holds a NULL operation")
        return np.fromiter((uniq[v] for v in names), dtype=np.uint8, count=n)
    if op is None:
        raise ProgrammingError("write() needs an operation or an op_column")
    return np.full(n, WriteOp.parse(op), dtype=np.uint8)


class WriteShortcuts:
    """``insert``/``insert_ignore``/``upsert``/``update``/``delete``: ``write`` with one
    operation for every row (for the Tablet and the Table)."""

    def write(
        self,
        data: pa.Table | pa.RecordBatch,
        op: WriteOp | str | int | None = None,
        *,
        op_column: str | None = None,
        atomic: bool = False,
    ) -> WriteResult:
        raise NotImplementedError

    def insert(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.INSERT, **kw)

    def insert_ignore(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.INSERT_IGNORE, **kw)

    def upsert(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.UPSERT, **kw)

    def update(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.UPDATE, **kw)

    def delete(self, data: pa.Table | pa.RecordBatch, **kw: Any) -> WriteResult:
        return self.write(data, WriteOp.DELETE, **kw)
