"""Write sessions: Kudu's ``KuduSession`` over ``Table.write``.

A session buffers applied operations (as small Python objects, bounded by the mutation
buffer space) and flushes them as Arrow batches: consecutive operations on one table
that set the same columns become one batch, with a per-row operation column when their
kinds differ, so a flush is a handful of vectorized writes however many rows it holds.
(Operations that set different columns cannot share a batch: a missing cell means "not
given", which a NULL in a shared column cannot express.)

Flush modes, as in Kudu:

* ``manual`` (``FLUSH_MANUAL``, the default): ``apply`` buffers; ``flush`` writes. An
  ``apply`` that would overflow the buffer raises OperationalError (flush first).
* ``sync`` (``FLUSH_AUTO_SYNC``): every ``apply`` is written at once and raises if its
  row fails.
* ``background`` (``FLUSH_AUTO_BACKGROUND``): ``apply`` buffers and flushes when the
  buffer passes its watermark or the flush interval has passed. There is no background
  thread: the flush runs inside the ``apply`` that triggers it, and row errors are only
  collected (``flush`` raises for them).

Row errors become ``KuduError`` records in the pending errors, which accumulate (up to
the error buffer size; beyond it ``overflowed`` is reported) until
``get_pending_errors()`` takes them. ``KuduError.failed_op()`` is the operation object
that was applied. ``flush`` (and a ``sync`` ``apply``) raise after recording their
errors, with the kudusql error class of the first one: IntegrityError for a key that is
already present or not found (also for a row no range partition covers), DataError for
an invalid row.

``apply_arrow`` writes a whole Arrow batch directly (after flushing what is buffered, so
the order of writes is kept), in every flush mode, and returns the ``WriteResult``;
its row errors (which name the row's index in the batch) are added to the pending
errors too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from kudusql.client.write import WriteOperation
from kudusql.common.errors import (
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    KuduInvalidArgument,
    KuduOverflowError,
    KuduTypeError,
    KuduValueError,
    KuduWriteDataError,
    KuduWriteIntegrityError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)
from kudusql.common.row_operations import RowError, WriteOp, WriteResult

if TYPE_CHECKING:
    from kudusql.client.client import Client
    from kudusql.client.table import ArrowData, Table

__all__ = [
    "FLUSH_AUTO_BACKGROUND",
    "FLUSH_AUTO_SYNC",
    "FLUSH_MANUAL",
    "KuduError",
    "Session",
]

FLUSH_AUTO_SYNC = "sync"
FLUSH_AUTO_BACKGROUND = "background"
FLUSH_MANUAL = "manual"

_FLUSH_MODES = {
    "sync": FLUSH_AUTO_SYNC,
    "auto_sync": FLUSH_AUTO_SYNC,
    "auto_flush_sync": FLUSH_AUTO_SYNC,
    "background": FLUSH_AUTO_BACKGROUND,
    "auto_background": FLUSH_AUTO_BACKGROUND,
    "auto_flush_background": FLUSH_AUTO_BACKGROUND,
    "manual": FLUSH_MANUAL,
    "manual_flush": FLUSH_MANUAL,
}
# Kudu's C++ enum values (KuduSession::FlushMode)
_FLUSH_MODE_CODES = {0: FLUSH_AUTO_SYNC, 1: FLUSH_AUTO_BACKGROUND, 2: FLUSH_MANUAL}

#: Kudu's default mutation buffer space (7 MiB), flush watermark and interval.
DEFAULT_BUFFER_BYTES = 7 * 1024 * 1024
DEFAULT_WATERMARK = 0.5
DEFAULT_FLUSH_INTERVAL_MS = 1000
DEFAULT_ERROR_BUFFER = 10_000

_OP_COLUMN = "__kudusql_client_op__"

_STATUS_TEXT = {
    "AlreadyPresent": "Already present",
    "NotFound": "Not found",
    "InvalidArgument": "Invalid argument",
    "Immutable": "Immutable",
    "IOError": "IO error",
    "IllegalState": "Illegal state",
    "NotSupported": "Not implemented",
}


def _error_class(status: str) -> type[Error]:
    if status in ("AlreadyPresent", "NotFound"):
        return KuduWriteIntegrityError
    return KuduWriteDataError


#: The write operation metrics a session counts (Kudu's ``GetWriteOpMetrics``): for each
#: kind of operation, the rows applied and the rows an IGNORE variant ignored.
_METRIC_KIND = {
    WriteOp.INSERT: "insert",
    WriteOp.INSERT_IGNORE: "insert",
    WriteOp.UPSERT: "upsert",
    WriteOp.UPSERT_IGNORE: "upsert",
    WriteOp.UPDATE: "update",
    WriteOp.UPDATE_IGNORE: "update",
    WriteOp.DELETE: "delete",
    WriteOp.DELETE_IGNORE: "delete",
}
_IGNORING = {
    WriteOp.INSERT_IGNORE,
    WriteOp.UPSERT_IGNORE,
    WriteOp.UPDATE_IGNORE,
    WriteOp.DELETE_IGNORE,
}


def new_metrics() -> dict[str, int]:
    out = {}
    for kind in ("insert", "upsert", "update", "delete"):
        out[f"successful_{kind}s"] = 0
        out[f"{kind}_ignore_errors"] = 0
    return out


def parse_flush_mode(mode: str | int) -> str:
    if isinstance(mode, int) and not isinstance(mode, bool):
        if mode in _FLUSH_MODE_CODES:
            return _FLUSH_MODE_CODES[mode]
    elif isinstance(mode, str) and mode.strip().lower() in _FLUSH_MODES:
        return _FLUSH_MODES[mode.strip().lower()]
    raise KuduValueError(f"Invalid flush mode: {mode} (manual, sync or background)")


class KuduError:
    """A write that failed: the operation (``failed_op()``; None for a row of an Arrow
    batch, then ``row_index`` is its index in the batch), Kudu's status code
    (AlreadyPresent, NotFound, InvalidArgument, Immutable, ...) and a message."""

    __slots__ = ("_op", "_possibly", "error_class", "key", "message", "row_index", "status")

    def __init__(
        self,
        status: str,
        message: str,
        *,
        op: WriteOperation | None = None,
        row_index: int | None = None,
        key: tuple[Any, ...] | None = None,
        error_class: type[Error] | None = None,
        possibly_successful: bool = False,
    ) -> None:
        self.status = status
        self.message = message
        self._op = op
        self.row_index = row_index
        self.key = key if key is not None or op is None else op.key
        self.error_class: type[Error] = error_class or _error_class(status)
        self._possibly = possibly_successful

    def failed_op(self) -> WriteOperation | None:
        """The operation that failed (None for a row of an Arrow batch)."""
        return self._op

    def was_possibly_successful(self) -> bool:
        """True only when the write failed in a way that may have applied it anyway (an
        I/O failure after the write reached storage)."""
        return self._possibly

    @property
    def status_text(self) -> str:
        return f"{_STATUS_TEXT.get(self.status, self.status)}: {self.message}"

    def __str__(self) -> str:
        what = repr(self._op) if self._op is not None else f"row {self.row_index} key={self.key}"
        return f"{what}: {self.status}: {self.message}"

    def __repr__(self) -> str:
        return f"KuduError({self.status_text!r})"


class Session:
    """Applies write operations to tables (``Client.new_session``); see the module
    docstring for the flush modes and error reporting."""

    def __init__(
        self,
        client: Client,
        flush_mode: str | int = FLUSH_MANUAL,
        timeout_ms: int = 5000,
        *,
        mutation_buffer_sz: int = DEFAULT_BUFFER_BYTES,
        mutation_buffer_watermark: float = DEFAULT_WATERMARK,
        mutation_buffer_flush_interval: int = DEFAULT_FLUSH_INTERVAL_MS,
        error_buffer_size: int = DEFAULT_ERROR_BUFFER,
        mutation_buffer_max_num: int = 2,
    ) -> None:
        self._client = client
        self._metrics = new_metrics()
        self._max_buffers = 2
        self.set_mutation_buffer_max_num(mutation_buffer_max_num)
        self._lock = threading.RLock()
        self._buffer: list[WriteOperation] = []
        self._buffer_bytes = 0
        self._mode = parse_flush_mode(flush_mode)
        self._timeout_ms = 0
        self.set_timeout_ms(timeout_ms)
        self._space = 0
        self.set_mutation_buffer_space(mutation_buffer_sz)
        self._watermark = DEFAULT_WATERMARK
        self.set_mutation_buffer_flush_watermark(mutation_buffer_watermark)
        self._interval_s = 0.0
        self.set_mutation_buffer_flush_interval(mutation_buffer_flush_interval)
        self._error_limit = 0
        self.set_error_buffer_size(error_buffer_size)
        self._last_flush = time.monotonic()
        self._errors: list[KuduError] = []
        self._overflowed = False
        self._first_unreported: KuduError | None = None
        self._unreported = 0
        self._closed = False

    # -- configuration -------------------------------------------------------------------------
    @property
    def flush_mode(self) -> str:
        return self._mode

    def set_flush_mode(self, flush_mode: str | int = FLUSH_MANUAL) -> None:
        """'manual', 'sync' or 'background' (or the FLUSH_* constants). Not allowed while
        operations are buffered."""
        mode = parse_flush_mode(flush_mode)
        with self._lock:
            if self._buffer and mode != self._mode:
                raise ProgrammingError(
                    "cannot change the flush mode while operations are buffered; flush first"
                )
            self._mode = mode

    def set_timeout_ms(self, ms: int) -> None:
        """Kept for compatibility: writes are local and never time out."""
        _check_count(ms, "a timeout")
        self._timeout_ms = int(ms)

    def set_mutation_buffer_space(self, size_bytes: int) -> None:
        """The buffer space for operations waiting to be flushed, in (estimated) bytes of
        Python objects: about 120 bytes per operation, 40 per cell, plus string lengths."""
        _check_count(size_bytes, "the mutation buffer space", "size_t")
        if size_bytes == 0:
            raise KuduInvalidArgument("the mutation buffer space must be positive")
        with self._lock:
            if self._buffer and size_bytes < self._buffer_bytes:
                raise ProgrammingError(
                    "cannot shrink the mutation buffer below what is buffered; flush first"
                )
            self._space = int(size_bytes)

    def set_mutation_buffer_flush_watermark(self, watermark_pct: float) -> None:
        """The buffer fill level (0..1] at which a background session flushes."""
        if isinstance(watermark_pct, bool) or not isinstance(watermark_pct, (int, float)):
            raise KuduTypeError(f"a flush watermark is a number, not {watermark_pct!r}")
        if not 0.0 < watermark_pct <= 1.0:
            raise KuduInvalidArgument(
                f"{round(watermark_pct * 100)}: watermark must be between 0 and 100 "
                "inclusive (a fraction in (0, 1])"
            )
        self._watermark = float(watermark_pct)

    def set_mutation_buffer_flush_interval(self, millis: int) -> None:
        """A background session also flushes at an ``apply`` this long after its last
        flush."""
        _check_count(millis, "the flush interval")
        self._interval_s = millis / 1000.0

    def set_mutation_buffer_max_num(self, max_num: int) -> None:
        """The most mutation buffers a session may hold while earlier ones flush (0:
        no limit). A session here flushes synchronously, holding one buffer at a time,
        so every limit is met."""
        _check_count(max_num, "the number of mutation buffers")
        self._max_buffers = int(max_num)

    def set_error_buffer_size(self, max_errors: int) -> None:
        """How many pending errors are kept; more set ``overflowed``."""
        _check_count(max_errors, "the error buffer size")
        self._error_limit = int(max_errors)

    # -- state ---------------------------------------------------------------------------------
    def count_buffered_operations(self) -> int:
        return len(self._buffer)

    def has_pending_operations(self) -> bool:
        return bool(self._buffer)

    @property
    def buffer_bytes(self) -> int:
        """Estimated bytes of the buffered operations."""
        return self._buffer_bytes

    def count_pending_errors(self) -> int:
        return len(self._errors)

    def get_write_op_metrics(self) -> dict[str, int]:
        """Rows written since the session began, by kind of operation (Kudu's
        ``GetWriteOpMetrics``): ``successful_inserts`` (INSERT and INSERT IGNORE rows
        applied), ``insert_ignore_errors`` (INSERT IGNORE rows ignored), and the same for
        upserts, updates and deletes. Row operations and Arrow writes with one operation
        for every row count; Arrow writes with an operation column do not."""
        with self._lock:
            return dict(self._metrics)

    def get_pending_errors(self) -> tuple[list[KuduError], bool]:
        """Take the pending errors: (errors, overflowed), where ``overflowed`` says some
        were dropped because the error buffer was full."""
        with self._lock:
            errors, overflowed = self._errors, self._overflowed
            self._errors, self._overflowed = [], False
            self._first_unreported, self._unreported = None, 0
            return errors, overflowed

    # -- writing -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ProgrammingError("the session is closed")

    def apply(self, op: WriteOperation) -> None:
        """Apply a write operation (``table.new_insert(...)`` etc.)."""
        if not isinstance(op, WriteOperation):
            raise ProgrammingError(
                f"apply() takes a write operation (table.new_insert() ...), not "
                f"{type(op).__name__}; use apply_arrow() for Arrow data"
            )
        with self._lock:
            self._check_open()
            if op.table.client is not self._client:
                raise ProgrammingError(f"{op!r} belongs to a table of another client")
            if op.applied:
                raise ProgrammingError(f"{op!r} was already applied")
            missing = op.missing_key_columns()
            if missing:
                raise ProgrammingError(
                    f"{op!r}: key column(s) {', '.join(map(repr, missing))} not set"
                )
            size = op.estimated_bytes()
            if self._mode == FLUSH_AUTO_SYNC:
                op._freeze()
                errors = self._write_ops([op])
                self._record(errors)
                self._raise_unreported()
                return
            if self._buffer and self._buffer_bytes + size > self._space:
                if self._mode == FLUSH_MANUAL:
                    raise OperationalError(
                        f"not enough mutation buffer space for {op!r}: {self._buffer_bytes} "
                        f"of {self._space} bytes used by {len(self._buffer)} buffered "
                        "operation(s); call flush() first (or set_mutation_buffer_space)"
                    )
                self._record(self._flush_buffer())
            op._freeze()
            self._buffer.append(op)
            self._buffer_bytes += size
            if self._mode == FLUSH_AUTO_BACKGROUND and (
                self._buffer_bytes >= self._watermark * self._space
                or time.monotonic() - self._last_flush >= self._interval_s
            ):
                self._record(self._flush_buffer())

    def apply_arrow(
        self,
        table: Table,
        data: ArrowData,
        op: WriteOp | str | int | None = WriteOp.INSERT,
        *,
        op_column: str | None = None,
    ) -> WriteResult:
        """Write an Arrow table, record batch or stream (or a dict of columns) to
        ``table`` straight away: ``op`` for every row, or per row from ``op_column``
        (operation names or codes). Buffered operations are flushed first. Returns the
        write result; its row errors are also added to the pending errors."""
        with self._lock:
            self._check_open()
            if table.client is not self._client:
                raise ProgrammingError(f"{table!r} belongs to another client")
            if self._buffer:
                self._record(self._flush_buffer())
            result = table.write_arrow(data, op, op_column=op_column)
            if op_column is None and op is not None:
                self._count(WriteOp.parse(op), result.applied, result.ignored)
            self._record(
                [
                    KuduError(e.status, e.message, row_index=e.index, key=e.key)
                    for e in result.errors
                ],
                report=False,
            )
            return result

    def flush(self) -> None:
        """Write every buffered operation; raise if any write since the last raise (or
        ``get_pending_errors``) failed. The errors stay pending."""
        with self._lock:
            self._check_open()
            if self._buffer:
                self._record(self._flush_buffer())
            self._raise_unreported()

    def close(self) -> None:
        """Close the session. A background session flushes first; a manual one must have
        nothing buffered."""
        with self._lock:
            if self._closed:
                return
            if self._buffer:
                if self._mode == FLUSH_MANUAL:
                    raise ProgrammingError(
                        f"cannot close a session with {len(self._buffer)} buffered "
                        "operation(s); flush() first"
                    )
                self.flush()
            self._closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        """Flush and close; when the block raised, drop the buffered operations."""
        if exc_type is None:
            self.flush()
            self.close()
        else:
            self._buffer, self._buffer_bytes = [], 0
            self._closed = True

    # -- internals -----------------------------------------------------------------------------
    def _count(self, op: WriteOp, applied: int, ignored: int) -> None:
        kind = _METRIC_KIND[op]
        self._metrics[f"successful_{kind}s"] += applied
        self._metrics[f"{kind}_ignore_errors"] += ignored

    def _record(self, errors: Sequence[KuduError], *, report: bool = True) -> None:
        if not errors:
            return
        room = max(0, self._error_limit - len(self._errors))
        if room < len(errors):
            self._overflowed = True
        self._errors.extend(errors[:room])
        if report:
            if self._first_unreported is None:
                self._first_unreported = errors[0]
            self._unreported += len(errors)

    def _raise_unreported(self) -> None:
        first, n = self._first_unreported, self._unreported
        if first is None:
            return
        self._first_unreported, self._unreported = None, 0
        raise first.error_class(
            f"{n} write operation(s) failed; first: {first}. "
            "The errors are in Session.get_pending_errors()"
        )

    def _flush_buffer(self) -> list[KuduError]:
        ops, self._buffer, self._buffer_bytes = self._buffer, [], 0
        self._last_flush = time.monotonic()
        return self._write_ops(ops)

    def _write_ops(self, ops: list[WriteOperation]) -> list[KuduError]:
        """Write ``ops`` in order, one Arrow batch per run of operations on one table
        that set the same columns."""
        errors: list[KuduError] = []
        i = 0
        while i < len(ops):
            first = ops[i]
            # One IGNORE kind at most per batch, so the rows it ignored are known by kind.
            ignoring = first.op_type if first.op_type in _IGNORING else None
            j = i + 1
            while (
                j < len(ops)
                and ops[j]._table.id == first._table.id
                and ops[j]._colset == first._colset
            ):
                t = ops[j].op_type
                if t in _IGNORING:
                    if ignoring is not None and t != ignoring:
                        break
                    ignoring = t
                j += 1
            try:
                run_errors, ignored = _write_run(ops[i:j])
                errors.extend(run_errors)
                self._count_run(ops[i:j], run_errors, ignoring, ignored)
            except DatabaseError as e:  # e.g. the table was dropped: every operation fails
                errors.extend(_exception_errors(e, ops[i:j]))
            except BaseException as e:
                # Not a kudusql error (those become row errors): report the run as
                # possibly applied and give the later operations back to the buffer.
                errors.extend(
                    KuduError(
                        "IllegalState",
                        f"write interrupted: {type(e).__name__}: {e}",
                        op=o,
                        error_class=OperationalError,
                        possibly_successful=True,
                    )
                    for o in ops[i:j]
                )
                self._record(errors)
                self._buffer = ops[j:] + self._buffer
                self._buffer_bytes = sum(o.estimated_bytes() for o in self._buffer)
                raise
            i = j
        return errors

    def _count_run(
        self,
        ops: Sequence[WriteOperation],
        errors: Sequence[KuduError],
        ignoring: WriteOp | None,
        ignored: int,
    ) -> None:
        """Count a batch's rows in the metrics: every row of a kind that did not fail
        was applied, but for the rows the batch's IGNORE kind ignored."""
        failed = {id(e.failed_op()) for e in errors}
        for o in ops:
            if id(o) not in failed:
                self._metrics[f"successful_{_METRIC_KIND[o.op_type]}s"] += 1
        if ignoring is not None and ignored:
            kind = _METRIC_KIND[ignoring]
            self._metrics[f"successful_{kind}s"] -= ignored
            self._metrics[f"{kind}_ignore_errors"] += ignored


def _check_count(n: Any, what: str, c_type: str = "unsigned int") -> None:
    """Raises unless ``n`` is a non-negative int (an OverflowError too when negative, as
    kudu-python's conversion to ``c_type``)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise KuduTypeError(f"{what} is an int, not {n!r}")
    if n < 0:
        raise KuduOverflowError(f"can't convert negative value to {c_type}: {what} is {n}")


def _exception_status(e: Error) -> str:
    if isinstance(e, OperationalError):
        return "IOError"
    if isinstance(e, NotSupportedError):
        return "NotSupported"
    if isinstance(e, ProgrammingError | DataError):
        return "InvalidArgument"
    if isinstance(e, IntegrityError):
        return "AlreadyPresent"
    return "IllegalState"


def _write_run(ops: Sequence[WriteOperation]) -> tuple[list[KuduError], int]:
    """One batch: operations on one table setting the same columns. Returns the row
    errors and how many rows an IGNORE operation ignored."""
    table = ops[0]._table
    schema = table.core.schema
    names = list(ops[0]._cells)
    gone = [n for n in names if not schema.has_column(n)]
    if gone:
        return [
            KuduError("InvalidArgument", f"unknown column {gone[0]!r} (dropped?)", op=o)
            for o in ops
        ], 0
    bad: dict[int, str] = {}
    arrays: list[pa.Array[Any]] = []
    for name in names:
        col = schema.column(name)
        t = col.type.arrow_type()
        values = [o._cells[name] for o in ops]
        try:
            arr = pa.array(values, type=t)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            # Find the bad cells one by one (the checks made when cells were set leave few).
            pieces: list[pa.Array[Any]] = []
            for i, v in enumerate(values):
                try:
                    pieces.append(pa.array([v], type=t))
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    pieces.append(pa.array([None], type=t))
                    bad.setdefault(i, f"invalid value {v!r} for column {name!r} of type {col.type}")
            arr = pa.concat_arrays(pieces)
        arrays.append(arr)
    errors = [(i, KuduError("InvalidArgument", msg, op=ops[i])) for i, msg in bad.items()]
    kept = [i for i in range(len(ops)) if i not in bad]
    if not kept:
        return [e for _, e in sorted(errors, key=lambda p: p[0])], 0
    data = pa.Table.from_arrays(arrays, names=names)
    if bad:
        data = data.take(pa.array(kept, type=pa.int64()))
    codes = np.fromiter((ops[i].op_type for i in kept), dtype=np.uint8, count=len(kept))
    op: WriteOp | None = WriteOp(int(codes[0]))
    op_column = None
    if len(kept) > 1 and bool((codes != codes[0]).any()):
        op, op_column = None, _OP_COLUMN
        data = data.append_column(_OP_COLUMN, pa.array(codes, type=pa.uint8()))
    ignored = 0
    try:
        result = table._write(data, op, op_column=op_column)
    except DatabaseError as e:
        errors += zip(kept, _exception_errors(e, [ops[i] for i in kept]), strict=True)
    else:
        ignored = result.ignored
        errors += [(kept[e.index], _row_error(ops[kept[e.index]], e)) for e in result.errors]
    return [e for _, e in sorted(errors, key=lambda p: p[0])], ignored


def _exception_errors(e: DatabaseError, ops: Sequence[WriteOperation]) -> list[KuduError]:
    """The errors of operations whose whole batch failed with ``e``."""
    status = _exception_status(e)
    return [
        KuduError(
            status,
            str(e),
            op=o,
            error_class=type(e),
            possibly_successful=isinstance(e, OperationalError),
        )
        for o in ops
    ]


def _row_error(op: WriteOperation, e: RowError) -> KuduError:
    return KuduError(e.status, e.message, op=op, key=e.key)


def arrow_table(data: Any) -> pa.Table | pa.RecordBatchReader:
    """Arrow data of a table, record batch, reader or dict of columns."""
    if isinstance(data, pa.Table | pa.RecordBatchReader):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, Mapping):
        try:
            return pa.table(dict(data))
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise DataError(f"cannot make an Arrow table of the columns given: {e}") from e
    raise ProgrammingError(
        "Arrow writes take a pyarrow Table, RecordBatch, RecordBatchReader or a dict of "
        f"columns, not {type(data).__name__}"
    )
