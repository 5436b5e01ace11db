"""Kudu's order-preserving ("comparable") primary-key encoding.

This module owns the byte format of encoded keys. ``memcmp`` order of two encodings
equals the tuple order of the key values they encode, so encoded keys are what the
MemRowSet index, the DiskRowSet key index, bloom filters, rowset bounds, scan bounds and
range partition keys compare.

Per column (composite key = plain concatenation of the columns' encodings):

* INT8/16/32/64, DATE (int32 days), TIMESTAMP (int64 microseconds): two's complement
  with the sign bit flipped, big-endian; 1/2/4/8 bytes. ``int32 0 -> 80000000``.
* DECIMAL(p, s): the unscaled value as a 16-byte big-endian two's complement int128 with
  the sign bit flipped, **whatever the precision**. (Kudu uses 4/8/16 bytes for
  DECIMAL32/64/128 depending on the precision; we always use 16 bytes, so decimal keys are
  not byte-compatible with Kudu's but sort the same way. Every decimal key column is
  16 bytes wide, matching ``DataType.key_width``.)
* STRING, BINARY, VARCHAR: if this is the last key column, the raw bytes (UTF-8 for
  strings). Otherwise every ``\\x00`` is escaped as ``\\x00\\x01`` and ``\\x00\\x00`` is
  appended, so that ``"a" < "a\\0" < "ab"`` survives concatenation.

``encode_keys`` is the vectorized (all rows at once, no Python loop per row) path used
for batches; ``encode_key`` / ``decode_key`` are the scalar paths for single rows, and
they produce byte-identical output. ``binary_layout``, ``all_lengths_equal`` and
``single_array`` are small zero-copy Arrow/numpy helpers shared with ``murmur``.
"""

from __future__ import annotations

import datetime
import decimal
import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import DataError, ProgrammingError
from kudusql.common.types import DataType, TypeKind

__all__ = [
    "ArrowArray",
    "all_lengths_equal",
    "binary_layout",
    "decode_key",
    "encode_key",
    "encode_key_prefix",
    "encode_keys",
    "fixed_key_width",
    "keys_as_fixed",
    "prefix_successor",
    "single_array",
]

ArrowArray: TypeAlias = "pa.Array[Any] | pa.ChunkedArray[Any]"

_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH_DT = datetime.datetime(1970, 1, 1)
_EPOCH_DT_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_INT32_MAX = 2**31 - 1
# Widths of the integer-like kinds, by the numpy dtype used to read them.
_INT_LIKE: dict[TypeKind, tuple[int, str]] = {
    TypeKind.INT8: (1, "i1"),
    TypeKind.INT16: (2, "i2"),
    TypeKind.INT32: (4, "i4"),
    TypeKind.INT64: (8, "i8"),
    TypeKind.DATE: (4, "i4"),
    TypeKind.TIMESTAMP: (8, "i8"),
}


# ------------------------------------------------------------------------------------------
# Small helpers
# ------------------------------------------------------------------------------------------
def fixed_key_width(types: Sequence[DataType]) -> int | None:
    """Total encoded width if every key type is fixed width, else None."""
    total = 0
    for t in types:
        w = t.key_width
        if w is None:
            return None
        total += w
    return total


def prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``.

    Trailing ``0xff`` bytes are stripped and the last remaining byte incremented. Returns
    None when there is no such string (``prefix`` is empty or all ``0xff``), meaning
    "unbounded above".
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


def keys_as_fixed(keys: ArrowArray, width: int) -> np.ndarray:
    """A numpy ``S{width}`` view of fixed-width encoded keys (zero-copy for a plain array).

    Usable with ``np.sort``/``np.searchsorted``/comparisons, which compare ``S`` items as
    unsigned bytes over the full width. Caveat: numpy strips trailing NUL bytes when an
    item is converted to a Python ``bytes`` (``view[i]``); use ``view[i:i+1].tobytes()``
    or ``view[i].ljust(width, b"\\0")`` to get the exact key back.
    The view is read-only (it aliases the Arrow buffer): ``np.sort`` it, do not sort it in
    place. Raises ProgrammingError if some key is not ``width`` bytes long.
    """
    if width <= 0:
        raise ProgrammingError(f"fixed key width must be positive, got {width}")
    arr = single_array(keys)
    n = len(arr)
    if n == 0:
        return np.empty(0, dtype=f"S{width}")
    offsets, values = binary_layout(arr)
    if not all_lengths_equal(offsets, width):
        raise ProgrammingError(f"keys_as_fixed: not every key is {width} bytes long")
    start = int(offsets[0])
    return values[start : start + n * width].view(f"S{width}")


def single_array(col: ArrowArray) -> pa.Array[Any]:
    """One contiguous array (chunked arrays are combined; a single chunk is not copied)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)  # type: ignore[return-value]
        return col.combine_chunks()  # type: ignore[return-value]  # an Array at runtime
    return col


def _buffer_view(buf: pa.Buffer | None, dtype: str, count: int, offset: int) -> np.ndarray:
    """Zero-copy numpy view of ``count`` items of an Arrow buffer from byte ``offset``."""
    if buf is None or count == 0:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(memoryview(buf), dtype=dtype, count=count, offset=offset)


def all_lengths_equal(offsets: np.ndarray, width: int) -> bool:
    """True if every value delimited by ``offsets`` (n+1 entries) is ``width`` bytes long.

    Works in bounded chunks, so checking millions of keys allocates almost nothing."""
    n = len(offsets) - 1
    if n <= 0:
        return True
    if int(offsets[-1]) - int(offsets[0]) != n * width:
        return False
    step = 1 << 20
    for s in range(0, n, step):
        e = min(n, s + step)
        if not bool(np.all((offsets[s + 1 : e + 1] - offsets[s:e]) == width)):
            return False
    return True


def binary_layout(arr: pa.Array[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int32/int64[n+1], values uint8[...]) of a binary/string array (any offset
    width, sliced or not; other types are cast to large_binary). Both are zero-copy views:
    row i is ``values[offsets[i]:offsets[i+1]]``. Offsets keep the array's own width, so
    convert them to int64 before doing arithmetic that could overflow int32."""
    t = arr.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        odt = "<i8"
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        odt = "<i4"
    else:
        arr = arr.cast(pa.large_binary())
        odt = "<i8"
    bufs = arr.buffers()
    n = len(arr)
    size = np.dtype(odt).itemsize
    if bufs[1] is None:  # an empty array may have no offsets buffer
        return np.zeros(n + 1, dtype=odt), np.zeros(0, dtype=np.uint8)
    offsets = _buffer_view(bufs[1], odt, n + 1, arr.offset * size)
    return offsets, _buffer_view(bufs[2], "u1", -1, 0)


def _wrap_binary(data: np.ndarray, offsets: np.ndarray) -> pa.Array[Any]:
    """A binary array over ``data`` (uint8) with ``offsets`` (int64, len n+1)."""
    n = len(offsets) - 1
    typ: pa.DataType = pa.binary()
    odt = "<i4"
    if int(offsets[-1]) > _INT32_MAX:
        typ, odt = pa.large_binary(), "<i8"
    off_buf = pa.py_buffer(offsets.astype(odt).data)
    data_buf = pa.py_buffer(np.ascontiguousarray(data).data)
    return pa.Array.from_buffers(typ, n, [None, off_buf, data_buf])


# ------------------------------------------------------------------------------------------
# Vectorized encoding
# ------------------------------------------------------------------------------------------
def _as_array(col: ArrowArray, dtype: DataType) -> pa.Array[Any]:
    arr = single_array(col)
    target = dtype.arrow_type()
    if dtype.is_varlen:
        # Keep string vs binary flexible; only the bytes matter.
        t = arr.type
        if not (pa.types.is_string(t) or pa.types.is_binary(t)):
            arr = arr.cast(pa.binary() if pa.types.is_binary(target) else pa.string())
    elif arr.type != target:
        arr = arr.cast(target)
    if arr.null_count:
        raise ProgrammingError("encode_keys: key columns must not contain nulls")
    return arr


def _fixed_matrix(col: pa.Array[Any], dtype: DataType) -> np.ndarray:
    """The (n, width) uint8 big-endian, sign-flipped encoding of a fixed-width column."""
    n = len(col)
    buf = col.buffers()[1]
    if dtype.kind is TypeKind.DECIMAL:
        raw = _buffer_view(buf, "u1", 16 * n, 16 * col.offset)
        m = raw.reshape(n, 16)[:, ::-1].copy()
        m[:, 0] ^= 0x80
        return m
    width, idt = _INT_LIKE[dtype.kind]
    vals = _buffer_view(buf, "<" + idt, n, width * col.offset)
    udt = np.dtype(f"<u{width}")
    flipped = vals.view(udt) ^ udt.type(1 << (8 * width - 1))
    be: np.ndarray = flipped.astype(udt.newbyteorder(">"), copy=False)
    return be.view(np.uint8).reshape(n, width)


def _varlen_parts(col: pa.Array[Any], last: bool) -> tuple[np.ndarray, np.ndarray]:
    """(source offsets int64[n+1], values uint8) of a string column's encoding, without
    the terminator (the caller leaves 2 zero bytes after non-last columns)."""
    offsets, values = binary_layout(col)
    if not last:
        lo, hi = int(offsets[0]), int(offsets[-1])
        if bool(np.any(values[lo:hi] == 0)):
            esc = pc.replace_substring(col.cast(pa.binary()), b"\x00", b"\x00\x01")  # type: ignore[type-var]
            offsets, values = binary_layout(esc)
    return offsets.astype(np.int64), values


def encode_keys(columns: Sequence[ArrowArray], types: Sequence[DataType]) -> pa.BinaryArray:
    """Encode every row of the key columns; returns a ``pa.BinaryArray`` of n keys.

    ``columns`` must have no nulls (they are cast to the types' Arrow types if needed).
    The last of ``columns`` is treated as the last key column (raw strings), so passing a
    hash dimension's columns gives that dimension's encoding. Fully vectorized. In the
    (unlikely) case that the n keys total more than 2 GiB the result is a
    ``pa.LargeBinaryArray`` instead.
    """
    if len(columns) != len(types) or not types:
        raise ProgrammingError("encode_keys: need one type per column and at least one column")
    arrays = [_as_array(c, t) for c, t in zip(columns, types, strict=True)]
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ProgrammingError("encode_keys: key columns differ in length")
    width = fixed_key_width(types)
    if width is not None:
        out = np.empty((n, width), dtype=np.uint8)
        pos = 0
        for a, t in zip(arrays, types, strict=True):
            m = _fixed_matrix(a, t)
            out[:, pos : pos + m.shape[1]] = m
            pos += m.shape[1]
        offsets = np.arange(n + 1, dtype=np.int64) * width
        return _wrap_binary(out.reshape(-1), offsets)  # type: ignore[return-value]

    # Mixed / variable width: compute each row's length, then scatter every column's
    # bytes to its place with fancy indexing (terminators come from the zero fill).
    last_i = len(types) - 1
    fixed: dict[int, np.ndarray] = {}
    varlen: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    segs: list[np.ndarray] = []
    row_len = np.zeros(n, dtype=np.int64)
    for i, (a, t) in enumerate(zip(arrays, types, strict=True)):
        if t.is_varlen:
            src_off, values = _varlen_parts(a, i == last_i)
            varlen[i] = (src_off, values)
            seg = np.diff(src_off) if i == last_i else np.diff(src_off) + 2
        else:
            fixed[i] = _fixed_matrix(a, t)
            seg = np.full(n, fixed[i].shape[1], dtype=np.int64)
        row_len += seg
        segs.append(seg)
    out_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_len, out=out_off[1:])
    flat = np.zeros(int(out_off[-1]), dtype=np.uint8)
    start = out_off[:-1].copy()
    for i, seg in enumerate(segs):
        if i in fixed:
            m = fixed[i]
            flat[start[:, None] + np.arange(m.shape[1], dtype=np.int64)] = m
        else:
            src_off, values = varlen[i]
            lo, hi = int(src_off[0]), int(src_off[-1])
            if hi > lo:
                shift = np.repeat(start - src_off[:-1], np.diff(src_off))
                flat[np.arange(lo, hi, dtype=np.int64) + shift] = values[lo:hi]
        start += seg
    return _wrap_binary(flat, out_off)  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------
# Scalar encoding
# ------------------------------------------------------------------------------------------
def _int_value(v: object) -> int:
    if isinstance(v, bool):
        raise DataError(f"boolean {v!r} is not a valid key value")
    if isinstance(v, int):
        return v
    if isinstance(v, np.integer):
        return int(v)
    raise DataError(f"{v!r} is not an integer")


def _date_value(v: object) -> int:
    if isinstance(v, datetime.datetime):
        raise DataError(f"{v!r} is a datetime, not a date")
    if isinstance(v, datetime.date):
        return (v - _EPOCH_DATE).days
    if isinstance(v, np.datetime64):
        return int(v.astype("datetime64[D]").astype(np.int64))
    return _int_value(v)


def _timestamp_value(v: object) -> int:
    if isinstance(v, datetime.datetime):
        d = v - (_EPOCH_DT_UTC if v.tzinfo is not None else _EPOCH_DT)
        return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(v, np.datetime64):
        return int(v.astype("datetime64[us]").astype(np.int64))
    return _int_value(v)


def _make_int_encoder(width: int, conv: Callable[[object], int]) -> Callable[[object], bytes]:
    bias = 1 << (8 * width - 1)
    limit = 1 << (8 * width)

    def enc(v: object) -> bytes:
        x = conv(v) + bias
        if not 0 <= x < limit:
            raise DataError(f"value {v!r} out of range for a {8 * width}-bit key column")
        return x.to_bytes(width, "big")

    return enc


def _make_decimal_encoder(dtype: DataType) -> Callable[[object], bytes]:
    precision, scale = dtype.precision, dtype.scale
    assert precision is not None and scale is not None
    bound = 10**precision
    bias = 1 << 127

    def enc(v: object) -> bytes:
        if isinstance(v, decimal.Decimal):
            if not v.is_finite():
                raise DataError(f"{v!r} is not a valid {dtype}")
            scaled = v.scaleb(scale, context=decimal.Context(prec=80))
            unscaled = int(scaled)
            if unscaled != scaled:
                raise DataError(f"{v!r} has more than {scale} fractional digits for {dtype}")
        else:
            unscaled = _int_value(v) * 10**scale
        if not -bound < unscaled < bound:
            raise DataError(f"{v!r} out of range for {dtype}")
        return (unscaled + bias).to_bytes(16, "big")

    return enc


def _raw_bytes(v: object) -> bytes:
    if isinstance(v, str):
        return _utf8(v)
    if isinstance(v, bytes):
        return v
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    if isinstance(v, np.str_):
        return _utf8(str(v))
    raise DataError(f"{v!r} is not a string or bytes value")


def _utf8(v: str) -> bytes:
    try:
        return v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise DataError(
            f"{v!r} is not valid text: UTF-8 cannot hold {v[e.start : e.end]!r} at position "
            f"{e.start} (a lone surrogate)"
        ) from None


def _enc_string_last(v: object) -> bytes:
    return _raw_bytes(v)


def _enc_string_mid(v: object) -> bytes:
    return _raw_bytes(v).replace(b"\x00", b"\x00\x01") + b"\x00\x00"


def _column_encoder(dtype: DataType, last: bool) -> Callable[[object], bytes]:
    kind = dtype.kind
    if kind in (TypeKind.INT8, TypeKind.INT16, TypeKind.INT32, TypeKind.INT64):
        return _make_int_encoder(_INT_LIKE[kind][0], _int_value)
    if kind is TypeKind.DATE:
        return _make_int_encoder(4, _date_value)
    if kind is TypeKind.TIMESTAMP:
        return _make_int_encoder(8, _timestamp_value)
    if kind is TypeKind.DECIMAL:
        return _make_decimal_encoder(dtype)
    if dtype.is_varlen:
        return _enc_string_last if last else _enc_string_mid
    raise ProgrammingError(f"type {dtype} cannot be a key column")


@functools.lru_cache(maxsize=1024)
def _encoders(
    types: tuple[DataType, ...], num_key_columns: int
) -> tuple[Callable[[object], bytes], ...]:
    return tuple(_column_encoder(t, i == num_key_columns - 1) for i, t in enumerate(types))


def encode_key(values: Sequence[object], types: Sequence[DataType]) -> bytes:
    """Encode one row of Python values; byte-identical to ``encode_keys`` for that row.

    Accepts int, str, bytes, Decimal, datetime.date, datetime.datetime (naive = UTC) and
    numpy scalars. Raises DataError for values that do not fit the type.
    """
    encs = _encoders(tuple(types), len(types))
    if len(values) != len(encs):
        raise ProgrammingError(f"encode_key: {len(values)} values for {len(encs)} key columns")
    if len(encs) == 1:
        return encs[0](values[0])
    return b"".join([e(v) for e, v in zip(encs, values, strict=True)])


def key_encoder(types: Sequence[DataType]) -> Callable[[Sequence[object]], bytes]:
    """``encode_key`` bound to ``types``: the per-row encoder of the write row path."""
    encs = _encoders(tuple(types), len(types))
    if len(encs) == 1:
        (one,) = encs

        def encode_one(values: Sequence[object]) -> bytes:
            return one(values[0])

        return encode_one

    def encode(values: Sequence[object]) -> bytes:
        return b"".join([e(v) for e, v in zip(encs, values, strict=True)])

    return encode


def encode_key_prefix(
    values: Sequence[object], types: Sequence[DataType], num_key_columns: int
) -> bytes:
    """Encode the first ``len(values)`` columns of a ``num_key_columns``-column key.

    ``types`` lists (at least) the types of those columns. A string column uses the
    non-last (escaped, terminated) form unless it really is the last key column, so every
    full key whose leading columns equal ``values`` sorts ``>=`` the result and ``<``
    ``prefix_successor(result)``. Used for scan bounds.
    """
    k = len(values)
    if k > num_key_columns or k > len(types):
        raise ProgrammingError("encode_key_prefix: more values than key columns")
    if k == 0:
        return b""
    encs = _encoders(tuple(types[:k]), num_key_columns)
    return b"".join([e(v) for e, v in zip(encs, values, strict=True)])


# ------------------------------------------------------------------------------------------
# Decoding
# ------------------------------------------------------------------------------------------
def decode_key(key: bytes, types: Sequence[DataType]) -> tuple[object, ...]:
    """Inverse of ``encode_key``: Python values as pyarrow's ``.as_py()`` gives them
    (int, Decimal with the column's scale, date, naive datetime, str, bytes)."""
    out: list[object] = []
    pos = 0
    n = len(key)
    last_i = len(types) - 1
    for i, t in enumerate(types):
        kind = t.kind
        if t.is_varlen:
            if i == last_i:
                raw = key[pos:]
                pos = n
            else:
                j = pos
                while True:
                    z = key.find(b"\x00", j)
                    if z < 0 or z + 1 >= n:
                        raise DataError("malformed encoded key: unterminated string column")
                    nxt = key[z + 1]
                    if nxt == 0:
                        break
                    if nxt != 1:
                        raise DataError("malformed encoded key: bad escape in string column")
                    j = z + 2
                raw = key[pos:z].replace(b"\x00\x01", b"\x00")
                pos = z + 2
            if kind is TypeKind.BINARY:
                out.append(raw)
            else:
                try:
                    out.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise DataError("malformed encoded key: invalid UTF-8") from None
            continue
        w = t.key_width
        if w is None or pos + w > n:
            raise DataError("malformed encoded key: too short")
        x = int.from_bytes(key[pos : pos + w], "big") - (1 << (8 * w - 1))
        pos += w
        if kind is TypeKind.DATE:
            out.append(_EPOCH_DATE + datetime.timedelta(days=x))
        elif kind is TypeKind.TIMESTAMP:
            out.append(_EPOCH_DT + datetime.timedelta(microseconds=x))
        elif kind is TypeKind.DECIMAL:
            assert t.scale is not None
            out.append(decimal.Decimal(x).scaleb(-t.scale, context=decimal.Context(prec=80)))
        else:
            out.append(x)
    if pos != n:
        raise DataError("malformed encoded key: trailing bytes")
    return tuple(out)


# -- ordering of encoded keys ----------------------------------------------------------------


def uniform_width(keys: ArrowArray) -> int | None:
    """The common length of every key, or None when lengths differ (or no keys)."""
    arr = single_array(keys)
    n = len(arr)
    if n == 0:
        return None
    offsets, _ = binary_layout(arr)
    w = (int(offsets[-1]) - int(offsets[0])) // n
    return w if w > 0 and all_lengths_equal(offsets, w) else None


def _sortable(keys: ArrowArray) -> np.ndarray | None:
    """A numpy array whose element order is the keys' memcmp order (fixed width only):
    big-endian uint64 for keys up to 8 bytes, ``S{w}`` beyond."""
    w = uniform_width(keys)
    if w is None:
        return None
    view = keys_as_fixed(keys, w)
    if w == 8:
        return view.view(">u8")
    if w < 8:
        m = np.zeros((len(view), 8), dtype=np.uint8)
        m[:, :w] = view.view(np.uint8).reshape(-1, w)
        return m.view(">u8").reshape(-1)
    return view


def strictly_increasing(keys: ArrowArray) -> bool:
    """True if every key is greater than the one before (sorted and unique)."""
    arr = single_array(keys)
    n = len(arr)
    if n < 2:
        return True
    s = _sortable(arr)
    if s is not None:
        return bool(np.all(s[1:] > s[:-1]))
    return bool(pc.all(pc.greater(arr.slice(1), arr.slice(0, n - 1))).as_py())


def sort_order(keys: ArrowArray) -> np.ndarray:
    """A stable permutation that sorts the keys in memcmp order."""
    arr = single_array(keys)
    n = len(arr)
    if strictly_increasing(arr):
        return np.arange(n, dtype=np.int64)
    s = _sortable(arr)
    if s is not None:
        return np.argsort(s, kind="stable").astype(np.int64)
    return np.asarray(pc.sort_indices(arr).to_numpy(), dtype=np.int64)


def equal_to_previous(keys: ArrowArray, order: np.ndarray) -> np.ndarray:
    """For keys taken in ``order``: True where a key equals the one before it."""
    arr = single_array(keys)
    n = len(order)
    same = np.zeros(n, dtype=bool)
    if n < 2:
        return same
    s = _sortable(arr)
    if s is not None:
        so = s[order]
        same[1:] = so[1:] == so[:-1]
        return same
    sk = arr.take(pa.array(order))
    same[1:] = np.asarray(
        pc.equal(sk.slice(1), sk.slice(0, n - 1)).to_numpy(zero_copy_only=False), dtype=bool
    )
    return same
