"""Write operations: Kudu's eight row operations (``common/row_operations.py``), validated
and decided for a whole batch.

``prepare`` validates and converts an Arrow batch column by column (types, NULLs in
keys or NOT NULL columns, missing required columns, oversized cells and keys) and
encodes the keys. ``decide`` then applies Kudu's semantics to every row against the
tablet's current state, vectorized: a duplicate INSERT is "key already present", an
UPDATE or DELETE of a missing key is "key not found", an UPSERT of a present key
updates only the columns it gives, and the _IGNORE variants turn those errors into
no-ops. Rows that repeat a key within the batch are decided in *rounds* (the n-th
occurrence of each key in round n), so every round is vectorized and still sees the
effect of the rows before it, exactly as if the batch were applied row by row.

A table with a non-unique primary key ends its key with ``auto_incrementing_id``
(``Schema.auto_incrementing_index``): ``prepare`` leaves its value to the tablet for the
INSERT rows (giving one there is a row error, as in Kudu), requires it for every other
operation, and ``assign_auto_ids`` fills it under the tablet's write lock, one
``arange`` per batch, then encodes the keys.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import DataError
from kudusql.common.keys import encode_keys, equal_to_previous, sort_order, strictly_increasing
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import AUTO_INCREMENTING_COLUMN, Schema
from kudusql.common.types import cast_array, display_value

MAX_ENCODED_KEY_BYTES = 16 * 1024


_INSERTING = np.zeros(256, dtype=bool)
_UPDATING = np.zeros(256, dtype=bool)
_DELETING = np.zeros(256, dtype=bool)
_UPSERTING = np.zeros(256, dtype=bool)
_IGNORING = np.zeros(256, dtype=bool)
for _o in (WriteOp.INSERT, WriteOp.INSERT_IGNORE):
    _INSERTING[_o] = True
for _o in (WriteOp.UPSERT, WriteOp.UPSERT_IGNORE):
    _UPSERTING[_o] = True
for _o in (WriteOp.UPDATE, WriteOp.UPDATE_IGNORE):
    _UPDATING[_o] = True
for _o in (WriteOp.DELETE, WriteOp.DELETE_IGNORE):
    _DELETING[_o] = True
for _o in (
    WriteOp.INSERT_IGNORE,
    WriteOp.UPDATE_IGNORE,
    WriteOp.DELETE_IGNORE,
    WriteOp.UPSERT_IGNORE,
):
    _IGNORING[_o] = True


# Error codes (index into _MESSAGES); 0 = no error.
E_OK = 0
E_PRESENT = 1
E_NOT_FOUND = 2
E_NO_KEY = 3
E_NULL_KEY = 4
E_REQUIRED = 5
E_NULL_NOT_NULLABLE = 6
E_BAD_VALUE = 7
E_NO_FIELDS = 8
E_KEY_TOO_LARGE = 9
E_IMMUTABLE = 10
E_UNKNOWN_COLUMN = 11

_STATUS = {
    E_PRESENT: "AlreadyPresent",
    E_NOT_FOUND: "NotFound",
    E_IMMUTABLE: "Immutable",
}


@dataclass
class PreparedBatch:
    """A validated batch: cast columns by schema position, ops, keys and error codes."""

    n: int
    ops: np.ndarray  # uint8 per row
    columns: dict[int, pa.Array[Any]]  # schema index -> cast column (all rows)
    keys: pa.Array[Any]  # encoded keys (binary; empty b"" where the row is invalid)
    err: np.ndarray  # int8 error code per row
    detail: dict[int, str]  # row -> message detail for E_BAD_VALUE etc.
    source: pa.Table  # the caller's data (for error reports)
    #: Rows whose ``auto_incrementing_id`` the tablet assigns (``assign_auto_ids``; their
    #: keys are not encoded until then), or None.
    auto_rows: np.ndarray | None = None

    @property
    def present_nonkey(self) -> list[int]:
        return [i for i in self.columns if i >= self._nk]

    _nk: int = 0


def prepare(
    schema: Schema, data: pa.Table, ops: np.ndarray, pool: Executor | None = None
) -> PreparedBatch:
    """Validate and cast a batch; columns are cast in parallel on ``pool`` when the batch
    is large (Arrow casts release the GIL)."""
    n = data.num_rows
    err = np.zeros(n, dtype=np.int8)
    detail: dict[int, str] = {}

    def fail(mask: np.ndarray, code: int, msg: str | Callable[[int], str] | None = None) -> None:
        newly = mask & (err == E_OK)
        if not newly.any():
            return
        err[newly] = code
        if msg is not None:
            for i in np.flatnonzero(newly)[:1000]:
                detail[int(i)] = msg(int(i)) if callable(msg) else msg

    columns: dict[int, pa.Array[Any]] = {}
    known = [name for name in data.column_names if schema.has_column(name)]
    for name in data.column_names:
        if not schema.has_column(name):
            fail(np.ones(n, dtype=bool), E_UNKNOWN_COLUMN, f"unknown column {name!r}")

    def cast_one(name: str) -> tuple[pa.Array[Any], np.ndarray | None]:
        return cast_array(data.column(name), schema.column(name).type)

    if pool is not None and n >= 100_000 and len(known) > 1:
        casts = list(pool.map(cast_one, known))
    else:
        casts = [cast_one(name) for name in known]
    for name, (cast_col, bad) in zip(known, casts, strict=True):
        i = schema.index_of(name)
        col = schema.columns[i]
        if bad is not None:
            src = data.column(name)
            fail(bad, E_BAD_VALUE, functools.partial(_bad_value_msg, col.name, col.type, src))
        columns[i] = cast_col

    nk = schema.num_key_columns
    inserting = _INSERTING[ops] | _UPSERTING[ops]
    updating = _UPDATING[ops]
    auto = schema.auto_incrementing_index
    if auto is not None:
        _check_auto_column(columns.get(auto), ops, fail)
    for i, col in enumerate(schema.columns):
        arr = columns.get(i)
        if i == auto:
            continue
        if i < nk:
            if arr is None:
                fail(
                    np.ones(n, dtype=bool),
                    E_NO_KEY,
                    f"No value provided for key column {col.name!r}",
                )
            elif arr.null_count:
                fail(
                    _nulls(arr), E_NULL_KEY, f"NULL values not allowed for key column {col.name!r}"
                )
            continue
        if arr is None:
            if not col.nullable and col.default is None:
                fail(inserting, E_REQUIRED, f"No value provided for required column {col.name!r}")
        elif not col.nullable and arr.null_count:
            fail(
                _nulls(arr) & (inserting | updating),
                E_NULL_NOT_NULLABLE,
                f"NULL value not allowed for non-nullable column {col.name!r}",
            )
    if updating.any() and not any(i >= nk for i in columns):
        fail(updating, E_NO_FIELDS, "No fields updated")

    pb = PreparedBatch(n, ops, columns, pa.array([b""] * n, type=pa.binary()), err, detail, data)
    pb._nk = nk
    if auto is not None:
        given = columns.get(auto)
        missing = _INSERTING[ops] if given is None else _INSERTING[ops] & _nulls(given)
        assign = np.flatnonzero(missing & (err == E_OK))
        if len(assign):
            pb.auto_rows = assign
            return pb  # keys encoded once the tablet assigns the ids
    _encode_batch_keys(schema, pb, fail)
    return pb


def _encode_batch_keys(
    schema: Schema,
    pb: PreparedBatch,
    fail: Callable[[np.ndarray, int, str], None],
) -> None:
    """``pb.keys``: the encoded primary key of every row (when every key column is given;
    rows that failed get a placeholder); rows whose key is too large fail."""
    nk = schema.num_key_columns
    columns, err = pb.columns, pb.err
    if not all(i in columns for i in range(nk)):
        return
    key_cols = [columns[i] for i in range(nk)]
    if err.any():
        # Invalid rows may hold NULL keys: give them a placeholder so encoding works.
        ok = pa.array(err == E_OK)
        key_cols = [pc.if_else(ok, c, pa.scalar(_placeholder(c.type), c.type)) for c in key_cols]
    keys = encode_keys(key_cols, [c.type for c in schema.key_columns])
    lengths = np.asarray(pc.binary_length(keys).to_numpy(zero_copy_only=False))
    fail(lengths > MAX_ENCODED_KEY_BYTES, E_KEY_TOO_LARGE, "encoded primary key too large")
    pb.keys = keys


def _check_auto_column(
    given: pa.Array[Any] | None,
    ops: np.ndarray,
    fail: Callable[[np.ndarray, int, str], None],
) -> None:
    """Kudu's rules for ``auto_incrementing_id`` in a batch: an INSERT gives none (the
    tablet assigns it), every other operation names the row by it."""
    inserting = _INSERTING[ops]
    others = ~inserting
    if given is None:
        fail(
            _UPSERTING[ops],
            E_NO_KEY,
            "auto-incrementing column should be set for UPSERT/UPSERT_IGNORE operations",
        )
        fail(others, E_NO_KEY, f"No value provided for key column {AUTO_INCREMENTING_COLUMN!r}")
        return
    nulls = _nulls(given)
    fail(
        inserting & ~nulls,
        E_BAD_VALUE,
        "auto-incrementing column should not be set for INSERT/INSERT_IGNORE operations",
    )
    fail(
        others & nulls,
        E_NULL_KEY,
        f"NULL values not allowed for key column {AUTO_INCREMENTING_COLUMN!r}",
    )
    values = np.asarray(given.fill_null(0).to_numpy(zero_copy_only=False))
    fail(
        others & ~nulls & (values < 0),
        E_BAD_VALUE,
        "auto-incrementing column value must be greater than zero",
    )


def assign_auto_ids(schema: Schema, pb: PreparedBatch, counter: int) -> int:
    """Give ``pb.auto_rows`` the ids ``counter + 1, counter + 2, ...`` (one ``arange``),
    encode the batch's keys, and return the tablet's new counter: the last id given, or
    the largest id an UPSERT of the batch names if that is larger (it may insert it;
    Kudu moves the counter for any operation that names an id). The
    caller holds the tablet's write lock. Kudu increments the counter for every INSERT
    row, including those that fail later, so ids leave gaps but are never reused."""
    auto = schema.auto_incrementing_index
    assert auto is not None
    given = pb.columns.get(auto)
    if given is not None:
        named = _UPSERTING[pb.ops] & (pb.err == E_OK) & ~_nulls(given)
        if named.any():
            values = np.asarray(given.fill_null(0).to_numpy(zero_copy_only=False))
            counter = max(counter, int(values[named].max()))
    rows = pb.auto_rows
    if rows is None:
        return counter
    if counter > _MAX_AUTO_ID - len(rows):
        raise DataError("the auto-incrementing column reached its largest value")
    values = np.zeros(pb.n, dtype=np.int64)
    if given is not None:
        values = np.array(given.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    values[rows] = np.arange(counter + 1, counter + 1 + len(rows), dtype=np.int64)
    pb.columns[auto] = pa.array(values, pa.int64())
    pb.auto_rows = None
    _encode_batch_keys(schema, pb, _failer(pb))
    return counter + len(rows)


_MAX_AUTO_ID = 2**63 - 1


def _failer(pb: PreparedBatch) -> Callable[[np.ndarray, int, str], None]:
    def fail(mask: np.ndarray, code: int, msg: str) -> None:
        newly = mask & (pb.err == E_OK)
        pb.err[newly] = code
        for i in np.flatnonzero(newly)[:1000]:
            pb.detail[int(i)] = msg

    return fail


def _placeholder(t: pa.DataType) -> Any:
    if pa.types.is_string(t):
        return ""
    if pa.types.is_binary(t):
        return b""
    if pa.types.is_decimal(t):
        import decimal

        return decimal.Decimal(0)
    if pa.types.is_date(t):
        import datetime

        return datetime.date(1970, 1, 1)
    if pa.types.is_timestamp(t):
        import datetime

        return datetime.datetime(1970, 1, 1)
    return 0


def _nulls(arr: pa.Array[Any]) -> np.ndarray:
    return np.asarray(pc.is_null(arr).to_numpy(zero_copy_only=False), dtype=bool)


def _bad_value_msg(name: str, t: object, src: pa.ChunkedArray[Any], row: int) -> str:
    try:
        v = src[row].as_py()
    except (ValueError, OverflowError):  # no Python form (nanoseconds): Arrow's text
        text = pc.cast(src.slice(row, 1), pa.string())[0].as_py()
        return f"invalid value {text} for column {name!r} of type {t}"
    if isinstance(v, (str, bytes)) and len(v) > 64 * 1024:
        return f"value too large for column {name!r} ({len(v)} bytes; the limit is 65536)"
    return f"invalid value {display_value(v)} for column {name!r} of type {t}"


def error_message(code: int, detail: str | None) -> tuple[str, str]:
    """(status, message) for an error code."""
    if code == E_PRESENT:
        return "AlreadyPresent", "key already present"
    if code == E_NOT_FOUND:
        return "NotFound", "key not found"
    if code == E_IMMUTABLE:
        return "Immutable", "UPDATE not allowed for immutable column"
    return "InvalidArgument", detail or "invalid row"


def occurrence_rounds(keys: pa.Array[Any], valid: np.ndarray) -> np.ndarray:
    """For each valid row, how many earlier valid rows of the batch share its key."""
    n = len(keys)
    occ = np.zeros(n, dtype=np.int64)
    idx = np.flatnonzero(valid)
    if len(idx) < 2:
        return occ
    vkeys = keys if len(idx) == n else keys.take(idx)
    if strictly_increasing(vkeys):
        return occ
    order = sort_order(vkeys)
    same = equal_to_previous(vkeys, order)
    if not same.any():
        return occ
    # rank within runs of equal keys
    run_start = np.flatnonzero(~same)
    run_id = np.cumsum(~same) - 1
    rank = np.arange(len(order)) - run_start[run_id]
    occ[idx[order]] = rank
    return occ


__all__ = [
    "PreparedBatch",
    "error_message",
    "occurrence_rounds",
    "prepare",
]

# op-class lookup tables for the tablet
INSERTING = _INSERTING
UPSERTING = _UPSERTING
UPDATING = _UPDATING
DELETING = _DELETING
IGNORING = _IGNORING
