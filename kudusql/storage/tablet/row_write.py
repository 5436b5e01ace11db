"""The row path: write batches of a few rows (``SMALL_WRITE_ROWS``) as Python values.

For a batch of one to eight rows, every Arrow kernel (cast, key encoding, ``isin``,
``take``) and every one-row array costs more than handling the row in Python. The row
path therefore keeps Python values end to end: a ``RowLayout`` (one per schema and list
of given columns) checks and converts each value with a scalar converter per column
type, encodes the key with ``encode_key``, and builds the full row in schema order
with the column defaults. ``decide_rows`` checks the keys' presence one at a time, and
the decided ``RowWrite`` is logged in the compact WAL record
(``log_record.encode_rows``) and appended to the MemRowSet as tuples, which it turns
into Arrow lazily (``MemRowSet.insert_rows``). The tablet commits them through the same
protocol as a decided Arrow batch (``Tablet._commit``).

The row path is an optimization inside the tablet's one write path, chosen once per
batch from its shape (``RowPath.choose``, by ``Tablet.write``; the tables layer makes the
choice for the Python rows it routes, ``RowBatch.converted``). It takes:

- values whose Python type is exactly the column's (``int`` for integers, ``float``
  or an exactly representable ``int`` for FLOAT/DOUBLE, ``str``, ``bytes``, ``bool``,
  ``datetime.date``, naive ``datetime.datetime``, a ``Decimal`` with the column's
  scale), NULL only where the column allows it, no key too large, no cell over
  64 KiB, every required column given, no key repeated in the batch;
- INSERT, INSERT_IGNORE, UPSERT and UPSERT_IGNORE rows.

Any other batch (a value to cast or reject, an UPDATE) is written by the batch path,
which gives the same result and the same error messages. One case depends on the
tablet's state, not the batch's shape: an UPSERT of a present key (an update) or an
INSERT over a deleted MemRowSet row (a REINSERT) is decided in rounds by the batch
path, so ``decide_rows`` answers False and the tablet hands the batch, as given, to the
batch path under the same write lock (``Tablet._write_row_batch``), before anything
is logged or applied.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from kudusql.common.errors import Error
from kudusql.common.keys import key_encoder
from kudusql.common.row_operations import RowError, WriteOp
from kudusql.common.row_values import rows_to_arrow
from kudusql.common.schema import Schema
from kudusql.common.types import _INT_BOUNDS, MAX_CELL_BYTES, DataType, TypeKind
from kudusql.storage.tablet.diskrowset import default_column
from kudusql.storage.tablet.log_record import (
    KIND_MRS,
    encode_rows,
    one_row_encoder,
    values_encoder,
)
from kudusql.storage.tablet.memrowset import MemRowSet
from kudusql.storage.tablet.rowsets import RowSets
from kudusql.storage.tablet.write_ops import MAX_ENCODED_KEY_BYTES
from kudusql.storage.tablet.write_path import A_INSERT

#: Batches of at most this many rows take the row path.
SMALL_WRITE_ROWS = 8

#: Operations the row path decides itself.
ROW_OPS = frozenset({WriteOp.INSERT, WriteOp.INSERT_IGNORE, WriteOp.UPSERT, WriteOp.UPSERT_IGNORE})


class _Slow:
    """A value the row path does not convert: the batch goes down the Arrow path."""

    __slots__ = ()


SLOW: Any = _Slow()

Converter = Callable[[Any], Any]
_F32 = struct.Struct("<f")
#: Integers a DOUBLE (FLOAT) holds exactly: the bound of Arrow's safe integer casts.
_FLOAT_EXACT = 2**53
_FLOAT32_EXACT = 2**24


def _int_conv(kind: TypeKind) -> Converter:
    lo, hi = _INT_BOUNDS[kind]

    def conv(v: Any) -> Any:
        if type(v) is int and lo <= v <= hi:
            return v
        return SLOW

    return conv


def _double(v: Any) -> Any:
    t = type(v)
    if t is float:
        return v
    if t is int and -_FLOAT_EXACT <= v <= _FLOAT_EXACT:
        return float(v)
    return SLOW


def _float32(v: Any) -> Any:
    t = type(v)
    if t is int and -_FLOAT32_EXACT <= v <= _FLOAT32_EXACT:
        return float(v)
    if t is not float:
        return SLOW
    try:
        # The float32 Arrow stores; a finite value beyond FLOAT's range does not pack
        # (the batch path rejects it too).
        return _F32.unpack(_F32.pack(v))[0]
    except (OverflowError, struct.error):
        return SLOW


def _string(v: Any) -> Any:
    if type(v) is not str:
        return SLOW
    if len(v) * 4 > MAX_CELL_BYTES or not v.isascii():
        try:
            if len(v.encode()) > MAX_CELL_BYTES:
                return SLOW
        except UnicodeEncodeError:  # lone surrogates
            return SLOW
    return v


def _varchar(length: int) -> Converter:
    def conv(v: Any) -> Any:
        if type(v) is not str:
            return SLOW
        return _string(v[:length])  # Kudu truncates to the declared length (code points)

    return conv


def _binary(v: Any) -> Any:
    if type(v) is bytes and len(v) <= MAX_CELL_BYTES:
        return v
    return SLOW


def _bool(v: Any) -> Any:
    return v if type(v) is bool else SLOW


def _date(v: Any) -> Any:
    return v if type(v) is datetime.date else SLOW


def _timestamp(v: Any) -> Any:
    if type(v) is datetime.datetime and v.tzinfo is None:
        return v
    return SLOW


def _decimal(precision: int, scale: int) -> Converter:
    def conv(v: Any) -> Any:
        if type(v) is not decimal.Decimal or not v.is_finite():
            return SLOW
        t = v.as_tuple()
        if t.exponent != -scale or len(t.digits) > precision:
            return SLOW
        return v

    return conv


_PY_TYPES = {
    TypeKind.BOOL: bool,
    TypeKind.FLOAT: float,
    TypeKind.DOUBLE: float,
    TypeKind.DECIMAL: decimal.Decimal,
    TypeKind.STRING: str,
    TypeKind.VARCHAR: str,
    TypeKind.BINARY: bytes,
    TypeKind.DATE: datetime.date,
    TypeKind.TIMESTAMP: datetime.datetime,
}


def python_type(t: DataType) -> type:
    """The Python type of the values ``converter(t)`` returns (besides None)."""
    return int if t.kind in _INT_BOUNDS else _PY_TYPES[t.kind]


def converter(t: DataType) -> Converter:
    """The scalar converter of a column type: value -> stored value, or ``SLOW``."""
    k = t.kind
    if k in _INT_BOUNDS:
        return _int_conv(k)
    if k is TypeKind.DOUBLE:
        return _double
    if k is TypeKind.FLOAT:
        return _float32
    if k is TypeKind.STRING:
        return _string
    if k is TypeKind.VARCHAR:
        assert t.length is not None
        return _varchar(t.length)
    if k is TypeKind.BINARY:
        return _binary
    if k is TypeKind.BOOL:
        return _bool
    if k is TypeKind.DATE:
        return _date
    if k is TypeKind.TIMESTAMP:
        return _timestamp
    assert t.precision is not None and t.scale is not None
    return _decimal(t.precision, t.scale)


class RowLayout:
    """How rows that give the columns ``names`` (in that order) become stored rows."""

    def __init__(self, schema: Schema, names: Sequence[str]) -> None:
        self.schema = schema
        self.names = tuple(names)
        #: False when the batch path must handle every batch of this layout (an unknown,
        #: repeated or missing key column, a required column not given).
        self.ok = True
        idx: list[int] = []
        for n in self.names:
            if not schema.has_column(n):
                self.ok = False
                idx.append(-1)
            else:
                idx.append(schema.index_of(n))
        if len(set(idx)) != len(idx) or schema.auto_incrementing_index is not None:
            # (the batch path assigns a non-unique key's auto-incrementing ids)
            self.ok = False
        nk = schema.num_key_columns
        given = set(idx)
        for i, c in enumerate(schema.columns):
            if i in given:
                continue
            if i < nk or (not c.nullable and c.default is None):
                self.ok = False
        #: Schema index of each given column.
        self.index = tuple(idx)
        #: Column ids of the given columns (what the WAL records), in given order.
        self.col_ids = tuple(schema.columns[i].id if i >= 0 else -1 for i in idx)
        #: The compact WAL record's encoder of each given column.
        self.encode_values = values_encoder(
            [python_type(schema.columns[i].type) if i >= 0 else type(None) for i in idx]
        )
        #: The whole compact WAL record of a one-row batch (``one_row_encoder``; None
        #: when the layout is not ``ok``: an unknown column has no id to record).
        self.encode_record: Any = (
            one_row_encoder(self.col_ids, self.encode_values) if self.ok else None
        )
        self._conv: list[tuple[Converter, bool]] = []
        for i in idx:
            if i < 0:
                self._conv.append((_never, False))
            else:
                c = schema.columns[i]
                self._conv.append((converter(c.type), c.nullable and i >= nk))
        #: Position in the given row of each key column.
        self.key_pos = tuple(idx.index(i) if i in given else -1 for i in range(nk))
        self._encode_key = key_encoder([c.type for c in schema.key_columns])
        self._defaults = [
            None if c.default is None else default_column(c, 1)[0].as_py() for c in schema.columns
        ]
        self._place = tuple(enumerate(idx))
        self.ncols = len(schema.columns)
        self._varlen = tuple(
            j for j, i in enumerate(idx) if i >= 0 and schema.columns[i].type.is_varlen
        )
        kinds = [schema.columns[i].type.kind if i >= 0 else None for i in idx]
        #: The row's stored values (given order), or None when the batch path must do it.
        self.convert: Callable[[Sequence[Any]], tuple[Any, ...] | None] = _compile_convert(
            self._conv, kinds
        )

    def key(self, values: Sequence[Any]) -> bytes | None:
        """The encoded primary key of converted values, or None (too large)."""
        kp = self.key_pos
        try:
            if len(kp) == 1:
                k = self._encode_key((values[kp[0]],))
            else:
                k = self._encode_key([values[p] for p in kp])
        except Error:
            return None
        return k if len(k) <= MAX_ENCODED_KEY_BYTES else None

    def key_values(self, values: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(values[p] for p in self.key_pos)

    def full(self, values: Sequence[Any]) -> tuple[Any, ...]:
        """The row in schema order, defaults where no value was given."""
        out = list(self._defaults)
        for j, i in self._place:
            out[i] = values[j]
        return tuple(out)

    def nbytes(self, values: Sequence[Any], key: bytes) -> int:
        """The MemRowSet's memory estimate of one row (as the Arrow path counts it)."""
        n = 8 * self.ncols + len(key) + 16
        for j in self._varlen:
            v = values[j]
            if v is not None:
                n += len(v)
        return n


def _never(v: Any) -> Any:
    return SLOW


# Inline tests for the common exact types: no converter call for them.
_INLINE = {
    TypeKind.INT8: "type({a}) is int and {lo} <= {a} <= {hi}",
    TypeKind.INT16: "type({a}) is int and {lo} <= {a} <= {hi}",
    TypeKind.INT32: "type({a}) is int and {lo} <= {a} <= {hi}",
    TypeKind.INT64: "type({a}) is int and {lo} <= {a} <= {hi}",
    TypeKind.DOUBLE: "type({a}) is float",
    TypeKind.STRING: "type({a}) is str and len({a}) <= 16384 and {a}.isascii()",
    TypeKind.BINARY: "type({a}) is bytes and len({a}) <= 65536",
    TypeKind.BOOL: "type({a}) is bool",
    TypeKind.DATE: "type({a}) is date",
}


def _compile_convert(
    convs: list[tuple[Converter, bool]], kinds: list[TypeKind | None]
) -> Callable[[Sequence[Any]], tuple[Any, ...] | None]:
    """``RowLayout.convert`` as straight-line code for this layout: per value, an inline
    test of the exact Python type where it decides alone, else the column's converter."""
    n = len(convs)
    env: dict[str, Any] = {"SLOW": SLOW, "date": datetime.date}
    args = [f"a{j}" for j in range(n)]
    lines = ["def convert(row):", f"    if len(row) != {n}:", "        return None"]
    if n:
        lines.append(f"    {', '.join(args)}{',' if n == 1 else ''} = row")
    for j, ((conv, nullable), kind) in enumerate(zip(convs, kinds, strict=True)):
        a, x = f"a{j}", f"x{j}"
        env[f"c{j}"] = conv
        lines.append(f"    if {a} is None:")
        lines.append(f"        {x} = None" if nullable else "        return None")
        test = _INLINE.get(kind) if kind is not None else None
        if test is not None and kind is not None:
            lo, hi = _INT_BOUNDS.get(kind, (0, 0))
            lines.append(f"    elif {test.format(a=a, lo=lo, hi=hi)}:")
            lines.append(f"        {x} = {a}")
        lines.append("    else:")
        lines.append(f"        {x} = c{j}({a})")
        lines.append(f"        if {x} is SLOW:")
        lines.append("            return None")
    xs = ", ".join(f"x{j}" for j in range(n))
    lines.append(f"    return ({xs}{',' if n == 1 else ''})")
    exec("\n".join(lines), env)
    return env["convert"]  # type: ignore[no-any-return]


# -- the row path's batches, decisions and commit ------------------------------------------
@dataclass(slots=True)
class RowBatch:
    """A write batch of Python rows, each giving the columns ``names`` in that order.

    ``converted``: the rows are ``RowLayout.convert``'s output for the tablet's schema
    (the tables layer converted them to route them by their key values, and so chose
    the row path for them)."""

    names: tuple[str, ...]
    rows: Sequence[Sequence[Any]]
    converted: bool = False

    @property
    def num_rows(self) -> int:
        return len(self.rows)


@dataclass(slots=True)
class RowWrite:
    """A batch the row path takes, and once decided (``decide_rows``), a
    ``LoggedWrite``: logged as the compact record, applied as MemRowSet tuples.

    Its rows as given, their stored values and encoded keys (distinct), its one
    operation, and the batch itself, for the batch path when the tablet's state calls
    for it. Decided: the MemRowSet its new rows go to, their batch positions, the rows
    an _IGNORE operation skipped and the AlreadyPresent errors."""

    layout: RowLayout
    rows: Sequence[Sequence[Any]]
    values: list[tuple[Any, ...]]
    keys: list[bytes]
    op: WriteOp
    source: pa.Table | pa.RecordBatch | RowBatch
    #: Sequence numbers the batch takes: one per row, as in the batch path.
    n: int
    mrs: MemRowSet = field(init=False)
    inserts: list[int] = field(init=False)
    ignored: int = field(init=False)
    errors: list[RowError] = field(init=False)

    def arrow(self, schema: Schema) -> pa.Table:
        """The batch as the batch path takes it: the Arrow batch given, or the Python
        rows built into one (``rows_to_arrow``)."""
        src = self.source
        if isinstance(src, RowBatch):
            return rows_to_arrow(schema, src.names, src.rows)
        if isinstance(src, pa.RecordBatch):
            return pa.Table.from_batches([src])
        return src

    def record(self, ts: int, seq: int) -> bytes | None:
        inserts, mrs = self.inserts, self.mrs
        if not inserts:
            return None
        lay, keys, values = self.layout, self.keys, self.values
        if len(keys) == 1:  # one struct pack per layout (the same bytes as encode_rows)
            return lay.encode_record(  # type: ignore[no-any-return]
                ts, seq, 1, 0, A_INSERT, KIND_MRS, mrs.id, -1, -1, False, keys[0], values[0]
            )
        mid = mrs.id
        logged = [(i, A_INSERT, KIND_MRS, mid, -1, -1, False, keys[i], values[i]) for i in inserts]
        return encode_rows(ts, seq, len(keys), lay.col_ids, logged, lay.encode_values)

    def apply(self, ts: int, seq: int) -> int:
        inserts, mrs = self.inserts, self.mrs
        if not inserts:
            return 0
        lay, keys, values = self.layout, self.keys, self.values
        if len(inserts) == 1:
            i = inserts[0]
            nbytes = lay.nbytes(values[i], keys[i])
            mrs.insert_row(lay.full(values[i]), keys[i], ts, seq + i, nbytes)
            return nbytes
        nbytes = sum(lay.nbytes(values[i], keys[i]) for i in inserts)
        mrs.insert_rows(
            [lay.full(values[i]) for i in inserts],
            [keys[i] for i in inserts],
            ts,
            [seq + i for i in inserts],
            nbytes,
        )
        return nbytes


class RowPath:
    """The row path's state in one tablet, for one schema: a ``RowLayout`` per list of
    given columns, an ``ArrowRows`` reader per recent Arrow schema. ``choose`` makes the
    row path's choice for a batch given to the tablet."""

    #: Layouts kept (a tablet sees few lists of columns; past this they start again).
    MAX_LAYOUTS = 64

    def __init__(self, schema: Schema, enabled: bool) -> None:
        self.schema = schema
        self.enabled = enabled
        self._layouts: dict[tuple[str, ...], RowLayout] = {}
        self._readers: list[ArrowRows] = []  # readers of the last few batch schemas

    def choose(
        self,
        data: pa.Table | pa.RecordBatch | RowBatch,
        op: WriteOp | str | int | None,
        op_column: str | None,
        threshold: int,
    ) -> RowWrite | None:
        """The row path's choice, made once per batch from its shape, before any lock:
        a batch of at most ``SMALL_WRITE_ROWS`` rows of one operation in ``ROW_OPS``,
        below the bulk-load size ``threshold``, whose values the row path takes as they
        are (every column known, no value to cast or reject, no key too large or
        repeated in the batch). Its ``RowWrite``, or None: the batch path writes it.
        (One function on purpose: every write passes here, and on this VM each call
        on the path of a one-row insert costs about half a microsecond.)"""
        n = data.num_rows
        if not (
            0 < n <= SMALL_WRITE_ROWS
            and n < threshold
            and op_column is None
            and op is not None
            and self.enabled
        ):
            return None
        wop = op if type(op) is WriteOp else WriteOp.parse(op)
        if wop not in ROW_OPS:
            return None
        converted = False
        if isinstance(data, RowBatch):
            names, rows, converted = data.names, data.rows, data.converted
        else:  # the rows as Python values (none: values Python cannot hold, such as
            # nanoseconds, which the batch path casts or rejects)
            try:
                if isinstance(data, pa.Table):
                    names = tuple(data.column_names)
                    rows = list(zip(*(c.to_pylist() for c in data.columns), strict=True))
                else:
                    schema = data.schema
                    for reader in self._readers:
                        if reader.schema.equals(schema):
                            break
                    else:
                        reader = ArrowRows(schema)
                        self._readers = [reader, *self._readers[:3]]
                    names, rows = reader.names, reader.rows(data)
            except (pa.ArrowException, ValueError, TypeError, OverflowError, KeyError):
                return None
        lay = self._layouts.get(names)
        if lay is None:
            lay = self.layout(names)
        if not lay.ok:
            return None
        convert, key = lay.convert, lay.key
        if n == 1:
            v = rows[0] if converted else convert(rows[0])
            if v is None:
                return None
            k = key(v)
            if k is None:
                return None
            return RowWrite(lay, rows, [v], [k], wop, data, 1)  # type: ignore[list-item]
        values: list[tuple[Any, ...]] = []
        keys: list[bytes] = []
        for r in rows:
            v = r if converted else convert(r)
            if v is None:
                return None
            k = key(v)
            if k is None:
                return None
            values.append(v)  # type: ignore[arg-type]
            keys.append(k)
        if len(set(keys)) != n:
            return None  # a repeated key: decided in rounds by the batch path
        return RowWrite(lay, rows, values, keys, wop, data, n)

    def layout(self, names: tuple[str, ...]) -> RowLayout:
        """The layout of rows giving the columns ``names`` (made once, then kept)."""
        lay = self._layouts.get(names)
        if lay is None:
            if len(self._layouts) >= self.MAX_LAYOUTS:
                self._layouts.clear()
            lay = self._layouts[names] = RowLayout(self.schema, names)
        return lay


def exists_elsewhere(rs: RowSets, key: bytes) -> bool:
    """Whether ``key`` is live in a frozen MemRowSet or a DiskRowSet (the row path's
    ``locate`` for one key absent from the active MemRowSet)."""
    for fm in rs.frozen:
        s = fm.lookup_one(key)
        if s >= 0 and fm.is_alive(s):
            return True
    for i in rs.covering(key):
        d = rs.drs[i]
        rid = d.find_rowid_one(key)
        if rid >= 0 and not d.dead_at_latest()[rid]:
            return True
    return False


def decide_rows(rs: RowSets, rw: RowWrite) -> bool:
    """Decide each row of ``rw`` against the current stores (under the write lock),
    key by key: absent everywhere, a new MemRowSet row; present, AlreadyPresent for an
    INSERT, skipped for an INSERT_IGNORE. False when a row needs the batch path's
    decision: an UPSERT of a present key (an update) or a key whose MemRowSet row is
    deleted (a REINSERT of its slot); the batch path then writes the batch and ``rw``
    is dropped."""
    mrs = rs.mrs
    elsewhere = bool(rs.frozen or rs.drs)
    if rw.n == 1:  # the common case, without the loop
        k = rw.keys[0]
        if mrs.lookup_one(k) < 0 and not (elsewhere and exists_elsewhere(rs, k)):
            rw.mrs, rw.inserts, rw.ignored, rw.errors = mrs, [0], 0, []
            return True
    op = rw.op
    inserts: list[int] = []
    errors: list[RowError] = []
    ignored = 0
    for i, k in enumerate(rw.keys):
        slot = mrs.lookup_one(k)
        if slot >= 0:
            if not mrs.is_alive(slot):
                return False
            exists = True
        else:
            exists = elsewhere and exists_elsewhere(rs, k)
        if not exists:
            inserts.append(i)
        elif op is WriteOp.INSERT_IGNORE:
            ignored += 1
        elif op is WriteOp.INSERT:
            key = rw.layout.key_values(rw.rows[i])
            errors.append(RowError(i, op, key, "AlreadyPresent", "key already present"))
        else:
            return False
    rw.mrs, rw.inserts, rw.ignored, rw.errors = mrs, inserts, ignored, errors
    return True


# -- Arrow in, Python out -------------------------------------------------------------------
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_EPOCH = datetime.datetime(1970, 1, 1)
_FIXED: dict[pa.DataType, tuple[str, int]] = {
    pa.int8(): ("b", 1),
    pa.int16(): ("h", 2),
    pa.int32(): ("i", 4),
    pa.int64(): ("q", 8),
    pa.float32(): ("f", 4),
    pa.float64(): ("d", 8),
    pa.date32(): ("i", 4),
    pa.timestamp("us"): ("q", 8),
}


class ArrowRows:
    """Reads the rows of small record batches of one Arrow schema as Python values.

    A batch whose columns are plain, null-free and unsliced (each buffer exactly as long
    as its rows need, so every column starts at offset 0) is decoded straight from its
    buffers: wrapping each column as a pyarrow array costs microseconds per column.
    Any other batch goes through ``to_pylist`` per column."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.names = tuple(schema.names)
        plan: list[tuple[int, str, int]] = []
        for f in schema:
            t = f.type
            if t in _FIXED:
                code, width = _FIXED[t]
                kind = _K_DATE if t == pa.date32() else _K_TS if t == pa.timestamp("us") else _K_NUM
                plan.append((kind, code, width))
            elif t == pa.string() or t == pa.binary():
                plan.append((_K_STR if t == pa.string() else _K_BIN, "i", 4))
            else:
                plan = []
                break
        self._plan = plan or None
        self._nbufs = None if plan is None else 1 + sum(3 if k >= _K_STR else 2 for k, _, _ in plan)
        self._structs: dict[int, list[tuple[int, struct.Struct, int]]] = {}
        self._one = _one_row_decoder(plan) if plan else _no_row

    def rows(self, batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
        if self._plan is not None:
            if batch.num_rows == 1:
                try:
                    one = self._one(batch.to_struct_array().buffers())
                except (pa.ArrowException, AttributeError, ValueError, OverflowError, struct.error):
                    one = None
                if one is not None:
                    return [one]
            out = self._from_buffers(batch)
            if out is not None:
                return out
        cols = [c.to_pylist() for c in batch.columns]
        return list(zip(*cols, strict=True))

    def _compiled(self, n: int) -> list[tuple[int, struct.Struct, int]]:
        c = self._structs.get(n)
        if c is None:
            assert self._plan is not None
            c = [
                (k, struct.Struct(f"<{n + 1 if k >= _K_STR else n}{code}"), width)
                for k, code, width in self._plan
            ]
            self._structs[n] = c
        return c

    def _from_buffers(self, batch: pa.RecordBatch) -> list[tuple[Any, ...]] | None:
        n = batch.num_rows
        try:
            bufs = batch.to_struct_array().buffers()
        except (pa.ArrowException, AttributeError):
            return None
        if len(bufs) != self._nbufs:
            return None
        cols: list[Sequence[Any]] = []
        p = 1  # bufs[0]: the struct's validity
        for kind, st, _width in self._compiled(n):
            if bufs[p] is not None:
                return None  # a validity bitmap: nulls, or a bit offset we cannot see
            buf = bufs[p + 1]
            if buf is None or buf.size != st.size:
                return None  # sliced (or padded): the column may not start at 0
            vals = st.unpack_from(buf)
            if kind >= _K_STR:
                data = bufs[p + 2]
                p += 3
                raw = data.to_pybytes() if data is not None else b""
                if kind == _K_STR:
                    cols.append([raw[vals[j] : vals[j + 1]].decode() for j in range(n)])
                else:
                    cols.append([raw[vals[j] : vals[j + 1]] for j in range(n)])
                continue
            p += 2
            if kind == _K_NUM:
                cols.append(vals)
            elif kind == _K_DATE:
                try:
                    cols.append([_fromordinal(_EPOCH_ORDINAL + d) for d in vals])
                except (ValueError, OverflowError):
                    return None
            else:
                try:
                    cols.append([_EPOCH + _timedelta(microseconds=v) for v in vals])
                except OverflowError:
                    return None
        return list(zip(*cols, strict=True))


_K_NUM, _K_DATE, _K_TS, _K_STR, _K_BIN = range(5)


def _no_row(bufs: list[Any]) -> None:
    return None


def _one_row_decoder(plan: list[tuple[int, str, int]]) -> Callable[[list[Any]], Any]:
    """A function decoding the buffers of a one-row batch of this plan into its row
    tuple (None when a buffer is not as expected), generated as straight-line code:
    the loop over columns of ``_from_buffers`` costs more than the decoding."""
    lines = [
        "def decode(b):",
        f"    if len(b) != {1 + sum(3 if k >= _K_STR else 2 for k, _, _ in plan)}:",
    ]
    lines.append("        return None")
    env: dict[str, Any] = {
        "fromordinal": datetime.date.fromordinal,
        "EPOCH_ORDINAL": _EPOCH_ORDINAL,
        "EPOCH": _EPOCH,
        "timedelta": datetime.timedelta,
        "OFFS": struct.Struct("<ii"),
    }
    p = 1
    names = []
    for j, (kind, code, width) in enumerate(plan):
        v = f"v{j}"
        names.append(v)
        lines.append(f"    if b[{p}] is not None:")
        lines.append("        return None")
        if kind >= _K_STR:
            lines.append(f"    o = b[{p + 1}]")
            lines.append("    if o is None or o.size != 8:")
            lines.append("        return None")
            lines.append("    lo, hi = OFFS.unpack_from(o)")
            lines.append(f"    d = b[{p + 2}]")
            raw = "(d.to_pybytes()[lo:hi] if d is not None else b'')"
            lines.append(f"    {v} = {raw}{'.decode()' if kind == _K_STR else ''}")
            p += 3
            continue
        env[f"S{j}"] = struct.Struct(f"<{code}")
        lines.append(f"    x = b[{p + 1}]")
        lines.append(f"    if x is None or x.size != {width}:")
        lines.append("        return None")
        lines.append(f"    {v} = S{j}.unpack_from(x)[0]")
        if kind == _K_DATE:
            lines.append(f"    {v} = fromordinal(EPOCH_ORDINAL + {v})")
        elif kind == _K_TS:
            lines.append(f"    {v} = EPOCH + timedelta(microseconds={v})")
        p += 2
    lines.append(f"    return ({', '.join(names)},)")
    exec("\n".join(lines), env)
    return env["decode"]  # type: ignore[no-any-return]


_fromordinal = datetime.date.fromordinal
_timedelta = datetime.timedelta
