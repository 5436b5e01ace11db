"""Tests for kudusql.common.keys: order preservation, vectorized == scalar, round trips."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.common.errors import DataError, ProgrammingError
from kudusql.common.keys import (
    decode_key,
    encode_key,
    encode_key_prefix,
    encode_keys,
    fixed_key_width,
    keys_as_fixed,
    prefix_successor,
)
from kudusql.common.types import DataType, TypeKind

I8 = DataType(TypeKind.INT8)
I16 = DataType(TypeKind.INT16)
I32 = DataType(TypeKind.INT32)
I64 = DataType(TypeKind.INT64)
DATE = DataType(TypeKind.DATE)
TS = DataType(TypeKind.TIMESTAMP)
STR = DataType(TypeKind.STRING)
BIN = DataType(TypeKind.BINARY)
VARCHAR = DataType(TypeKind.VARCHAR, length=50)

_CTX = decimal.Context(prec=80)
_INT_RANGES = {I8: 8, I16: 16, I32: 32, I64: 64}

key_types = st.one_of(
    st.sampled_from([I8, I16, I32, I64, DATE, TS, STR, BIN, VARCHAR]),
    st.integers(1, 38).flatmap(
        lambda p: st.integers(0, p).map(lambda s: DataType(TypeKind.DECIMAL, precision=p, scale=s))
    ),
)

# Few distinct characters, so that equal values and prefixes of each other are common.
_small_text = st.text(
    alphabet=st.sampled_from(["a", "b", "\x00", "\x01", "é", "\uffff"]), max_size=5
)
_small_bytes = st.lists(st.sampled_from([0, 1, 0x61, 0xFF]), max_size=5).map(bytes)


def values_for(t: DataType) -> st.SearchStrategy[Any]:
    if t in _INT_RANGES:
        bits = _INT_RANGES[t]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if t.kind is TypeKind.DATE:
        return st.dates()
    if t.kind is TypeKind.TIMESTAMP:
        return st.datetimes()
    if t.kind is TypeKind.DECIMAL:
        assert t.precision is not None and t.scale is not None
        bound = 10**t.precision - 1
        scale = t.scale
        return st.integers(-bound, bound).map(lambda u: decimal.Decimal(u).scaleb(-scale, _CTX))
    if t.kind is TypeKind.BINARY:
        return st.one_of(_small_bytes, st.binary(max_size=20))
    return st.one_of(_small_text, st.text(max_size=10))


@st.composite
def key_rows(draw: st.DrawFn) -> tuple[list[DataType], list[tuple[Any, ...]]]:
    types = draw(st.lists(key_types, min_size=1, max_size=4))
    row = st.tuples(*[values_for(t) for t in types])
    rows = draw(st.lists(row, min_size=1, max_size=25))
    return types, rows


def _columns(types: list[DataType], rows: list[tuple[Any, ...]]) -> list[pa.Array]:
    return [pa.array([r[i] for r in rows], type=t.arrow_type()) for i, t in enumerate(types)]


@settings(max_examples=200, deadline=None)
@given(key_rows())
def test_memcmp_order_equals_tuple_order(
    data: tuple[list[DataType], list[tuple[Any, ...]]],
) -> None:
    types, rows = data
    encoded = [encode_key(r, types) for r in rows]
    by_bytes = [r for _, r in sorted(zip(encoded, rows, strict=True), key=lambda p: p[0])]
    assert by_bytes == sorted(rows)
    for a, ea in zip(rows, encoded, strict=True):
        for b, eb in zip(rows, encoded, strict=True):
            assert (ea < eb) == (a < b)
            assert (ea == eb) == (a == b)


@settings(max_examples=200, deadline=None)
@given(key_rows())
def test_vectorized_equals_scalar_and_round_trip(
    data: tuple[list[DataType], list[tuple[Any, ...]]],
) -> None:
    types, rows = data
    expected = [encode_key(r, types) for r in rows]
    cols = _columns(types, rows)
    assert encode_keys(cols, types).to_pylist() == expected
    # Sliced inputs.
    if len(rows) > 2:
        sl = [c.slice(1, len(rows) - 2) for c in cols]
        assert encode_keys(sl, types).to_pylist() == expected[1:-1]
    # Chunked inputs.
    half = len(rows) // 2
    chunked = [pa.chunked_array([c.slice(0, half), c.slice(half)], type=c.type) for c in cols]
    assert encode_keys(chunked, types).to_pylist() == expected
    # Decoding gives back exactly what pyarrow's as_py gives.
    for i, key in enumerate(expected):
        assert decode_key(key, types) == tuple(c[i].as_py() for c in cols)
        assert decode_key(key, types) == rows[i]


@settings(max_examples=200, deadline=None)
@given(key_rows(), st.data())
def test_prefix_bounds(
    data: tuple[list[DataType], list[tuple[Any, ...]]], d: st.DataObject
) -> None:
    types, rows = data
    ncols = len(types)
    probe = d.draw(st.sampled_from(rows))
    j = d.draw(st.integers(0, ncols))
    lower = encode_key_prefix(probe[:j], types, ncols)
    upper = prefix_successor(lower)
    for r in rows:
        full = encode_key(r, types)
        if j == ncols:
            assert (full == lower) == (r == probe)
            continue
        if r[:j] == probe[:j]:
            assert full >= lower
            assert upper is None or full < upper
        elif r[:j] < probe[:j]:
            assert full < lower
        else:
            assert upper is not None and full >= upper
    # The prefix form equals the full encoding's leading bytes when j < ncols.
    if j < ncols:
        assert encode_key(probe, types).startswith(lower)


def test_examples_from_kudu() -> None:
    assert encode_key([0], [I32]).hex() == "80000000"
    assert encode_key([0, "", ""], [I32, STR, STR]).hex() == "800000000000"
    assert encode_key([0, "b", "c"], [I32, STR, STR]).hex() == "8000000062000063"
    assert encode_key(["a\x00b", 1], [STR, I8]).hex() == "61000162000081"
    assert encode_key([-1], [I64]).hex() == "7fffffffffffffff"
    assert encode_key([-128], [I8]) == b"\x00"
    # "a" < "a\0" < "ab" as a non-last column.
    a, b, c = (encode_key([s, 0], [STR, I8]) for s in ("a", "a\x00", "ab"))
    assert a < b < c


def test_decimal_is_16_bytes_whatever_the_precision() -> None:
    d = DataType(TypeKind.DECIMAL, precision=5, scale=2)
    key = encode_key([decimal.Decimal("-1.50")], [d])
    assert len(key) == 16
    assert key == ((-150 + (1 << 127)).to_bytes(16, "big"))
    assert decode_key(key, [d]) == (decimal.Decimal("-1.50"),)
    assert str(decode_key(key, [d])[0]) == "-1.50"
    assert encode_key([3], [d]) == encode_key([decimal.Decimal("3.00")], [d])
    with pytest.raises(DataError):
        encode_key([decimal.Decimal("1.001")], [d])
    with pytest.raises(DataError):
        encode_key([decimal.Decimal("1000")], [d])


def test_scalar_inputs_numpy_and_tz() -> None:
    assert encode_key([np.int32(5)], [I32]) == encode_key([5], [I32])
    assert encode_key([np.int64(-5)], [I64]) == encode_key([-5], [I64])
    dt = datetime.datetime(2020, 1, 2, 3, 4, 5, 6)
    aware = dt.replace(tzinfo=datetime.UTC)
    assert encode_key([aware], [TS]) == encode_key([dt], [TS])
    assert encode_key([np.datetime64(dt, "us")], [TS]) == encode_key([dt], [TS])
    day = datetime.date(1969, 12, 31)
    assert encode_key([day], [DATE]) == encode_key([-1], [DATE])
    assert encode_key([np.datetime64("1969-12-31")], [DATE]) == encode_key([-1], [DATE])
    assert encode_key([np.str_("x"), b"y"], [STR, BIN]) == b"x\x00\x00y"


def test_out_of_range_and_bad_values() -> None:
    with pytest.raises(DataError):
        encode_key([128], [I8])
    with pytest.raises(DataError):
        encode_key([-(2**63) - 1], [I64])
    with pytest.raises(DataError):
        encode_key(["x"], [I32])
    with pytest.raises(DataError):
        encode_key([1], [STR])
    with pytest.raises(ProgrammingError):
        encode_key([1, 2], [I32])
    with pytest.raises(ProgrammingError):
        encode_key([1.0], [DataType(TypeKind.DOUBLE)])
    with pytest.raises(DataError):
        decode_key(b"\x80\x00", [I32])
    with pytest.raises(DataError):
        decode_key(b"ab\x00", [STR, I8])
    with pytest.raises(DataError):
        decode_key(b"\x80\x00\x00\x00\x01", [I32])


def test_prefix_successor() -> None:
    assert prefix_successor(b"") is None
    assert prefix_successor(b"\xff\xff") is None
    assert prefix_successor(b"a") == b"b"
    assert prefix_successor(b"a\xff\xff") == b"b"
    assert prefix_successor(b"\x00\x00") == b"\x00\x01"


def test_encode_key_prefix_forms() -> None:
    types = [I32, STR, STR]
    assert encode_key_prefix([], types, 3) == b""
    assert encode_key_prefix([1, "b"], types, 3) == encode_key([1], [I32]) + b"b\x00\x00"
    assert encode_key_prefix([1, "b", "c"], types, 3) == encode_key([1, "b", "c"], types)
    # The prefix types may be given alone.
    assert encode_key_prefix([1, "b"], [I32, STR], 3) == encode_key_prefix([1, "b"], types, 3)
    with pytest.raises(ProgrammingError):
        encode_key_prefix([1, "b", "c", "d"], types, 3)


def test_fixed_width_and_keys_as_fixed() -> None:
    assert fixed_key_width([I32, I64, DATE, TS]) == 24
    assert fixed_key_width([DataType(TypeKind.DECIMAL, precision=3, scale=0)]) == 16
    assert fixed_key_width([I32, STR]) is None
    vals = np.array([5, -3, 0, 2**31 - 1, -(2**31), 7], dtype=np.int32)
    keys = encode_keys([pa.array(vals)], [I32])
    assert keys.type == pa.binary()
    view = keys_as_fixed(keys, 4)
    assert view.dtype == np.dtype("S4")
    order = np.argsort(view, kind="stable")
    assert vals[order].tolist() == sorted(vals.tolist())
    # Sliced key arrays are viewed at the right place.
    sub = keys_as_fixed(keys.slice(2, 3), 4)
    assert [sub[i : i + 1].tobytes() for i in range(3)] == keys.slice(2, 3).to_pylist()
    srt = np.sort(view)
    probe = np.array([encode_key([0], [I32])], dtype="S4")
    assert int(np.searchsorted(srt, probe)[0]) == 2
    assert len(keys_as_fixed(pa.array([], pa.binary()), 4)) == 0
    chunked = pa.chunked_array([keys.slice(0, 2), keys.slice(2)])
    assert keys_as_fixed(chunked, 4).tolist() == view.tolist()
    with pytest.raises(ProgrammingError):
        keys_as_fixed(pa.array([b"abc", b"defgh"]), 4)


def test_encode_keys_edge_cases() -> None:
    assert len(encode_keys([pa.array([], pa.int32())], [I32])) == 0
    assert len(encode_keys([pa.array([], pa.int32()), pa.array([], pa.string())], [I32, STR])) == 0
    # Non-last strings with no NUL (fast path) and with NULs (escaping path).
    k = encode_keys(
        [pa.array(["", "a\x00", "\x00\x00"]), pa.array([1, 2, 3], pa.int8())], [STR, I8]
    )
    assert k.to_pylist() == [
        encode_key(r, [STR, I8]) for r in [("", 1), ("a\x00", 2), ("\x00\x00", 3)]
    ]
    # Large-string and uncast inputs are accepted.
    k2 = encode_keys([pa.array(["x", "y"], pa.large_string()), pa.array([1, 2])], [STR, I16])
    assert k2.to_pylist() == [b"x\x00\x00\x80\x01", b"y\x00\x00\x80\x02"]
    with pytest.raises(ProgrammingError):
        encode_keys([pa.array([1, None], pa.int32())], [I32])
    with pytest.raises(ProgrammingError):
        encode_keys([pa.array([1], pa.int32()), pa.array([1, 2], pa.int32())], [I32, I32])


def test_encode_keys_vectorized_1m() -> None:
    n = 1_000_000
    rng = np.random.default_rng(0)
    a = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    b = rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32)
    keys = encode_keys([pa.array(a), pa.array(b)], [I64, I32])
    assert len(keys) == n
    view = keys_as_fixed(keys, 12)
    for i in (0, 1, n // 2, n - 1):
        assert view[i : i + 1].tobytes() == encode_key([a[i], b[i]], [I64, I32])
