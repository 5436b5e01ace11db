"""The WAL payload of a write batch: the batch *as decided*, not as sent.

The tablet logs each batch after deciding every row (Kudu's REPLICATE and COMMIT in
one record): the rows that changed something, their action (insert, reinsert, update,
delete), the store each one went to (MemRowSet id, or DiskRowSet id with its
DeltaMemStore id and the rowid) and the new cell values. Replay can then skip exactly
the rows whose store is already durable and apply the rest without deciding again,
so a crash during or after a flush neither loses nor duplicates anything.

Encoding: a 24-byte header (u64 timestamp, u64 first sequence number, u32 rows in the
original batch, u32 schema length, little-endian), the Arrow IPC schema message, then
one Arrow IPC record-batch message (uncompressed: the WAL compresses large payloads)
with the columns
``row`` (int32, index in the caller's batch), ``action`` (int8), ``kind`` (int8: 1 MemRowSet,
2 DiskRowSet), ``store`` (int64: MemRowSet id or DiskRowSet id), ``dms`` (int64:
DeltaMemStore id, -1 for MemRowSet rows), ``rowid`` (int64, -1 for MemRowSet rows),
``drop_immutable`` (bool), ``key`` (binary, the encoded primary key) and one column
``c<id>`` per column the batch carried.

The row path (batches of a few rows) writes the *compact* layout instead, the same
fields packed with ``struct`` and its values tagged by type (``encode_rows``): an
Arrow IPC stream costs more to build than the whole rest of a one-row write. A schema
length of 0 in the header marks it (an Arrow schema message is never empty), so older
records read as before. ``decode_record`` reads both; FORMAT.md has the bytes.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.common.errors import CorruptionError

# DO NOT CHANGE: on-disk (stored in WAL records).
KIND_MRS = 1
KIND_DRS = 2
# Record header: ts (u64), seq_base (u64), n (u32), schema length (u32).
_HEAD = struct.Struct("<QQII")


@dataclass
class DecidedBatch:
    ts: int
    seq_base: int
    n: int
    row: np.ndarray
    action: np.ndarray
    kind: np.ndarray
    store: np.ndarray
    dms: np.ndarray
    rowid: np.ndarray
    drop_immutable: np.ndarray
    keys: pa.Array[Any]
    columns: dict[int, pa.Array[Any]]  # column id -> values of the logged rows

    def encode(self) -> bytes:
        arrays: list[pa.Array[Any]] = [
            pa.array(self.row, pa.int32()),
            pa.array(self.action, pa.int8()),
            pa.array(self.kind, pa.int8()),
            pa.array(self.store, pa.int64()),
            pa.array(self.dms, pa.int64()),
            pa.array(self.rowid, pa.int64()),
            pa.array(self.drop_immutable, pa.bool_()),
            self.keys,
        ]
        layout = []
        for cid, arr in sorted(self.columns.items()):
            arrays.append(arr)
            layout.append((cid, arr.type))
        schema, schema_bytes = _layout_schema(tuple(layout))
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        head = _HEAD.pack(self.ts, self.seq_base, self.n, len(schema_bytes))
        return head + schema_bytes + batch.serialize().to_pybytes()

    @classmethod
    def decode(cls, payload: bytes, path: str, offset: int) -> DecidedBatch:
        try:
            ts, seq_base, n, slen = _HEAD.unpack_from(payload, 0)
            buf = pa.py_buffer(payload)
            schema = pa.ipc.read_schema(buf.slice(_HEAD.size, slen))
            batch = pa.ipc.read_record_batch(buf.slice(_HEAD.size + slen), schema)
            cols = {
                int(name[1:]): batch.column(name)
                for name in batch.schema.names
                if name.startswith("c") and name[1:].isdigit()
            }

            def np_col(name: str, dtype: Any) -> np.ndarray:
                return np.asarray(batch.column(name).to_numpy(zero_copy_only=False), dtype=dtype)

            return cls(
                ts,
                seq_base,
                n,
                np_col("row", np.int64),
                np_col("action", np.int8),
                np_col("kind", np.int8),
                np_col("store", np.int64),
                np_col("dms", np.int64),
                np_col("rowid", np.int64),
                np_col("drop_immutable", bool),
                batch.column("key"),
                cols,
            )
        except (pa.ArrowException, KeyError, ValueError, struct.error) as e:
            raise CorruptionError(path, offset, f"undecodable WAL record: {e}") from e


_FIXED_FIELDS = (
    pa.field("row", pa.int32()),
    pa.field("action", pa.int8()),
    pa.field("kind", pa.int8()),
    pa.field("store", pa.int64()),
    pa.field("dms", pa.int64()),
    pa.field("rowid", pa.int64()),
    pa.field("drop_immutable", pa.bool_()),
    pa.field("key", pa.binary()),
)


@functools.lru_cache(maxsize=256)
def _layout_schema(layout: tuple[tuple[int, pa.DataType], ...]) -> tuple[pa.Schema, bytes]:
    """The Arrow schema of a record with these value columns, and its serialized form
    (a table has few distinct layouts, so both are cached)."""
    fields: list[pa.Field[Any]] = [*_FIXED_FIELDS, *(pa.field(f"c{cid}", t) for cid, t in layout)]
    schema = pa.schema(fields)
    return schema, bytes(schema.serialize().to_pybytes())


# -- the compact layout (row path) ------------------------------------------------------------
# DO NOT CHANGE: on-disk. After the 24-byte header (schema length 0): u16 column count C,
# C x u32 column ids, u32 logged rows R, then per row _ROW + key + C tagged values.
_ROW = struct.Struct("<IbbqqqBI")
_NCOLS = struct.Struct("<H")
_NROWS = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
T_NULL, T_INT, T_FLOAT, T_STR, T_BYTES, T_FALSE, T_TRUE, T_DATE, T_TIMESTAMP, T_DECIMAL = range(10)
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_EPOCH = datetime.datetime(1970, 1, 1)
_ONE_US = datetime.timedelta(microseconds=1)


def _enc_int(v: int) -> bytes:
    return b"\x01" + _I64.pack(v)


def _enc_float(v: float) -> bytes:
    return b"\x02" + _F64.pack(v)


def _enc_str(v: str) -> bytes:
    b = v.encode()
    return b"\x03" + _U32.pack(len(b)) + b


def _enc_bytes(v: bytes) -> bytes:
    return b"\x04" + _U32.pack(len(v)) + v


def _enc_bool(v: bool) -> bytes:
    return b"\x06" if v else b"\x05"


def _enc_date(v: datetime.date) -> bytes:
    return b"\x07" + _I32.pack(v.toordinal() - _EPOCH_ORDINAL)


def _enc_timestamp(v: datetime.datetime) -> bytes:
    return b"\x08" + _I64.pack((v - _EPOCH) // _ONE_US)


def _enc_decimal(v: decimal.Decimal) -> bytes:
    b = str(v).encode()
    return b"\x09" + _U32.pack(len(b)) + b


def _enc_null(v: None) -> bytes:
    return b"\x00"


_ENCODERS: dict[type, Any] = {
    int: _enc_int,
    float: _enc_float,
    str: _enc_str,
    bytes: _enc_bytes,
    bool: _enc_bool,
    datetime.date: _enc_date,
    datetime.datetime: _enc_timestamp,
    decimal.Decimal: _enc_decimal,
    type(None): _enc_null,
}


_COL_HEADERS: dict[tuple[int, ...], bytes] = {}


def encode_rows(
    ts: int,
    seq_base: int,
    n: int,
    col_ids: Sequence[int],
    rows: Sequence[tuple[int, int, int, int, int, int, bool, bytes, Sequence[Any]]],
    encode_values: Any = None,
) -> bytes:
    """The compact payload: ``rows`` are (row, action, kind, store, dms, rowid,
    drop_immutable, key, values in ``col_ids`` order), values of the types the row path
    stores (int, float, str, bytes, bool, date, naive datetime, Decimal or None).
    ``encode_values`` (``values_encoder`` of the columns' types) skips the dispatch on
    each value's type."""
    enc = _ENCODERS
    cols = _COL_HEADERS.get(tuple(col_ids))
    if cols is None:
        cols = _NCOLS.pack(len(col_ids)) + struct.pack(f"<{len(col_ids)}I", *col_ids)
        if len(_COL_HEADERS) < 1024:
            _COL_HEADERS[tuple(col_ids)] = cols
    parts = [_HEAD.pack(ts, seq_base, n, 0), cols, _NROWS.pack(len(rows))]
    for row, action, kind, store, dms, rowid, drop, key, values in rows:
        parts.append(_ROW.pack(row, action, kind, store, dms, rowid, drop, len(key)))
        parts.append(key)
        if encode_values is None:
            parts.extend([enc[type(v)](v) for v in values])
        else:
            parts.append(encode_values(values))
    return b"".join(parts)


def one_row_encoder(col_ids: Sequence[int], encode_values: Any) -> Any:
    """``encode_rows`` of a record with exactly one logged row, as one function of
    ``(ts, seq_base, n, row, action, kind, store, dms, rowid, drop_immutable, key,
    values)``: the header, the column ids and the row's fixed fields are one
    ``struct`` pack (same bytes)."""
    cols = _NCOLS.pack(len(col_ids)) + struct.pack(f"<{len(col_ids)}I", *col_ids)
    pack = struct.Struct(f"<QQII{len(cols)}sI{_ROW.format[1:]}").pack

    def encode(
        ts: int,
        seq_base: int,
        n: int,
        row: int,
        action: int,
        kind: int,
        store: int,
        dms: int,
        rowid: int,
        drop: bool,
        key: bytes,
        values: Sequence[Any],
    ) -> bytes:
        head = pack(
            ts, seq_base, n, 0, cols, 1, row, action, kind, store, dms, rowid, drop, len(key)
        )
        return head + key + encode_values(values)  # type: ignore[no-any-return]

    return encode


# Straight-line encodings of one non-NULL value ``a`` per Python type (same bytes as
# _ENCODERS): the generated encoder of a row inlines them.
_INLINE_ENC = {
    int: 'b"\\x01" + I64(a)',
    float: 'b"\\x02" + F64(a)',
    bool: 'b"\\x06" if a else b"\\x05"',
    datetime.date: 'b"\\x07" + I32(a.toordinal() - EPOCH_ORDINAL)',
}


def values_encoder(py_types: Sequence[type]) -> Any:
    """A function encoding a row of values of these Python types (or None) as the
    compact record's tagged values, generated as straight-line code."""
    env: dict[str, Any] = {
        "I64": _I64.pack,
        "F64": _F64.pack,
        "I32": _I32.pack,
        "EPOCH_ORDINAL": _EPOCH_ORDINAL,
    }
    env["U32"] = _U32.pack
    n = len(py_types)
    lines = ["def encode(values):"]
    if n:
        lines.append(f"    {', '.join(f'a{j}' for j in range(n))}{',' if n == 1 else ''} = values")
    outs = []
    for j, t in enumerate(py_types):
        a = f"a{j}"
        inline = _INLINE_ENC.get(t)
        if t is str:  # two statements: the UTF-8 bytes, then tag + length + bytes
            lines.append(f"    if {a} is None:")
            lines.append(f'        e{j} = b"\\x00"')
            lines.append("    else:")
            lines.append(f"        s = {a}.encode()")
            lines.append(f'        e{j} = b"\\x03" + U32(len(s)) + s')
            outs.append(f"e{j}")
            continue
        if inline is not None:
            expr = inline.replace("(a)", f"({a})").replace("if a ", f"if {a} ")
            expr = expr.replace("a.toordinal", f"{a}.toordinal")
        else:
            env[f"E{j}"] = _ENCODERS[t]
            expr = f"E{j}({a})"
        outs.append(f'(b"\\x00" if {a} is None else {expr})')
    lines.append(f"    return b''.join(({', '.join(outs)}{',' if n == 1 else ''}))")
    exec("\n".join(lines), env)
    return env["encode"]


@dataclass
class CompactBatch:
    """A decoded compact record: the logged rows with Python values."""

    ts: int
    seq_base: int
    n: int
    col_ids: tuple[int, ...]
    rows: list[tuple[int, int, int, int, int, int, bool, bytes, tuple[Any, ...]]]

    def to_decided(self, types: Mapping[int, pa.DataType]) -> DecidedBatch:
        """The record in the Arrow form replay applies (columns typed by ``types``, the
        current schema's Arrow type per column id; columns it lacks are left out)."""
        rows = self.rows
        columns = {}
        for j, cid in enumerate(self.col_ids):
            t = types.get(cid)
            if t is not None:
                columns[cid] = pa.array([r[8][j] for r in rows], type=t)

        def col(i: int, dtype: Any) -> np.ndarray:
            return np.array([r[i] for r in rows], dtype=dtype)

        return DecidedBatch(
            self.ts,
            self.seq_base,
            self.n,
            col(0, np.int64),
            col(1, np.int8),
            col(2, np.int8),
            col(3, np.int64),
            col(4, np.int64),
            col(5, np.int64),
            col(6, bool),
            pa.array([r[7] for r in rows], type=pa.binary()),
            columns,
        )


def _decode_compact(payload: bytes, ts: int, seq_base: int, n: int) -> CompactBatch:
    pos = _HEAD.size
    (c,) = _NCOLS.unpack_from(payload, pos)
    pos += _NCOLS.size
    col_ids = struct.unpack_from(f"<{c}I", payload, pos)
    pos += 4 * c
    (r,) = _NROWS.unpack_from(payload, pos)
    pos += _NROWS.size
    rows = []
    row_unpack, rsize = _ROW.unpack_from, _ROW.size
    i64, f64, u32 = _I64.unpack_from, _F64.unpack_from, _U32.unpack_from
    for _ in range(r):
        row, action, kind, store, dms, rowid, drop, klen = row_unpack(payload, pos)
        pos += rsize
        key = payload[pos : pos + klen]
        if len(key) != klen:
            raise ValueError("truncated key")
        pos += klen
        values = []
        for _j in range(c):
            tag = payload[pos]
            pos += 1
            v: Any
            if tag == T_INT:
                (v,) = i64(payload, pos)
                pos += 8
            elif tag in (T_STR, T_BYTES, T_DECIMAL):
                (ln,) = u32(payload, pos)
                pos += 4
                raw = payload[pos : pos + ln]
                if len(raw) != ln:
                    raise ValueError("truncated value")
                pos += ln
                if tag == T_STR:
                    v = raw.decode()
                else:
                    v = raw if tag == T_BYTES else decimal.Decimal(raw.decode())
            elif tag == T_NULL:
                v = None
            elif tag == T_FLOAT:
                (v,) = f64(payload, pos)
                pos += 8
            elif tag == T_DATE:
                (d,) = _I32.unpack_from(payload, pos)
                pos += 4
                v = _fromordinal(_EPOCH_ORDINAL + d)
            elif tag in (T_FALSE, T_TRUE):
                v = tag == T_TRUE
            elif tag == T_TIMESTAMP:
                (us,) = i64(payload, pos)
                pos += 8
                v = _EPOCH + datetime.timedelta(microseconds=us)
            else:
                raise ValueError(f"unknown value tag {tag}")
            values.append(v)
        rows.append((row, action, kind, store, dms, rowid, bool(drop), key, tuple(values)))
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} bytes after the last row")
    return CompactBatch(ts, seq_base, n, tuple(col_ids), rows)


_fromordinal = datetime.date.fromordinal


# -- transaction parts and their commit markers ------------------------------------------------
# DO NOT CHANGE: on-disk. A batch written as one part of a multi-tablet transaction is
# wrapped: the 24-byte header with schema length TXN_PART, then the batch's own payload
# (either layout above). A FINALIZE marker is the bare header with schema length
# TXN_FINALIZE. In both the header's timestamp is the transaction's.
TXN_PART = 0xFFFFFFFF
TXN_FINALIZE = 0xFFFFFFFE


def encode_txn_part(payload: bytes) -> bytes:
    """A batch record as a part of the transaction of its timestamp: replay applies it
    only once the transaction is known committed."""
    ts, seq_base, n, _ = _HEAD.unpack_from(payload, 0)
    return _HEAD.pack(ts, seq_base, n, TXN_PART) + payload


def encode_txn_finalize(ts: int, seq: int) -> bytes:
    """The marker that the transaction of ``ts`` committed (its part earlier in this log
    is to be applied whatever the database's commit log says)."""
    return _HEAD.pack(ts, seq, 1, TXN_FINALIZE)


def txn_envelope(payload: bytes) -> tuple[int, int, int, int, bytes | None] | None:
    """(kind, ts, seq_base, n, inner payload) of a transaction record (kind TXN_PART or
    TXN_FINALIZE; the inner payload None for a marker), or None for a plain batch."""
    if len(payload) < _HEAD.size:
        return None
    ts, seq_base, n, kind = _HEAD.unpack_from(payload, 0)
    if kind == TXN_PART:
        return kind, ts, seq_base, n, payload[_HEAD.size :]
    if kind == TXN_FINALIZE:
        return kind, ts, seq_base, n, None
    return None


def decode_record(payload: bytes, path: str, offset: int) -> DecidedBatch | CompactBatch:
    """A WAL payload in either layout (CorruptionError if it does not decode)."""
    try:
        ts, seq_base, n, slen = _HEAD.unpack_from(payload, 0)
        if slen == 0:
            return _decode_compact(payload, ts, seq_base, n)
    except (ValueError, struct.error, IndexError, OverflowError, UnicodeDecodeError) as e:
        raise CorruptionError(path, offset, f"undecodable WAL record: {e}") from e
    except decimal.InvalidOperation as e:
        raise CorruptionError(path, offset, f"undecodable WAL record: {e}") from e
    return DecidedBatch.decode(payload, path, offset)
