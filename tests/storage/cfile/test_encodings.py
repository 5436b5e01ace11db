"""Page encodings: round trips of every type x encoding x compression, auto choice, errors."""

from __future__ import annotations

import datetime
import decimal
import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.common.errors import CorruptionError, ProgrammingError
from kudusql.storage.cfile import (
    Compression,
    Encoding,
    decode_page,
    encode_page,
    parse_compression,
    parse_encoding,
)
from kudusql.storage.cfile.page import HEADER_SIZE, PAGE_HEADER


def assert_same(got: pa.Array[Any], want: pa.Array[Any]) -> None:
    """Equality that treats NaN as equal to NaN."""
    assert got.type == want.type
    assert len(got) == len(want)
    assert got.null_count == want.null_count
    if pa.types.is_temporal(got.type):  # extreme timestamps do not fit datetime
        it = pa.int64() if got.type.bit_width == 64 else pa.int32()
        got, want = got.view(it), want.view(it)
    g = got.to_pylist()
    w = want.to_pylist()
    for a, b in zip(g, w, strict=True):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
            assert math.isnan(b)
        else:
            assert a == b, (a, b)
    assert got.validate(full=True) is None


def header(page: bytes) -> tuple[int, ...]:
    return tuple(PAGE_HEADER.unpack_from(page, 0))


D = decimal.Decimal
INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]


def int_extremes(t: pa.DataType) -> list[int | None]:
    bits = t.bit_width
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return [lo, hi, 0, None, -1, 1, lo, lo + 1, hi - 1, hi]


CASES: list[pa.Array[Any]] = [
    pa.array([True, False, None, True, True, True, False] * 13),
    pa.array([True] * 300),
    *[pa.array(int_extremes(t), type=t) for t in INT_TYPES],
    *[pa.array(list(range(-50, 250)), type=t) for t in [pa.int16(), pa.int32(), pa.int64()]],
    pa.array(np.repeat(np.arange(10, dtype=np.int64) * 1000, 37)),
    pa.array([1.5, float("nan"), None, float("inf"), float("-inf"), -0.0, 0.0], pa.float64()),
    pa.array([1.5, float("nan"), None, float("inf"), 3.25], pa.float32()),
    pa.array(
        [D("9" * 38), D("-" + "9" * 38), None, D(0), D(-1), D(1)],
        pa.decimal128(38, 0),
    ),
    pa.array([D("-123.45"), D("0.01"), None, D("99999.99")], pa.decimal128(7, 2)),
    pa.array(["a", "", None, "héllo", "a\x00b", "a" * 1000] * 5),
    pa.array([b"\x00", b"", None, b"\x00\x00", b"\xff" * 10], pa.binary()),
    pa.array(["x" * 100_000, "y", None, "z" * 100_000]),
    pa.array([f"v{i % 3}" for i in range(500)]),
    pa.array([datetime.date(1970, 1, 1), None, datetime.date(2024, 2, 29)] * 10, pa.date32()),
    pa.array([0, None, -(2**63), 2**63 - 1, 1_700_000_000_000_000], pa.timestamp("us")),
    pa.array(np.arange(1_700_000_000_000_000, 1_700_000_000_000_000 + 999, 3), pa.timestamp("us")),
]
EMPTY_AND_NULL: list[pa.Array[Any]] = []
for _t in [
    pa.bool_(),
    *INT_TYPES,
    pa.float32(),
    pa.float64(),
    pa.decimal128(38, 10),
    pa.string(),
    pa.binary(),
    pa.date32(),
    pa.timestamp("us"),
]:
    EMPTY_AND_NULL.extend([pa.array([], _t), pa.nulls(17, _t), pa.nulls(1, _t)])

ALL = CASES + EMPTY_AND_NULL


@pytest.mark.parametrize("compression", list(Compression))
@pytest.mark.parametrize("encoding", [None, *Encoding])
@pytest.mark.parametrize("arr", ALL, ids=lambda a: f"{a.type}-{len(a)}")
def test_round_trip(
    arr: pa.Array[Any], encoding: Encoding | None, compression: Compression
) -> None:
    page = encode_page(arr, encoding, compression)
    assert_same(decode_page(page, arr.type, "f", 0), arr)
    if len(arr) > 2:
        for sliced in (arr.slice(1), arr.slice(3, len(arr) - 4), arr.slice(len(arr) - 1)):
            page = encode_page(sliced, encoding, compression)
            assert_same(decode_page(page, arr.type, "f", 0), sliced)


@pytest.mark.parametrize("offset", range(9))
def test_sliced_bitmaps(offset: int) -> None:
    vals = [None if i % 5 == 0 else bool(i % 3) for i in range(70)]
    arr = pa.array(vals).slice(offset, 50)
    for enc in (Encoding.PLAIN, Encoding.RLE):
        assert_same(decode_page(encode_page(arr, enc, Compression.NONE), arr.type, "f", 0), arr)


def test_decode_accepts_bytes_memoryview_buffer() -> None:
    arr = pa.array([1, 2, None])
    page = encode_page(arr, None, Compression.NONE)
    for data in (page, memoryview(page), pa.py_buffer(page)):
        assert_same(decode_page(data, arr.type, "f", 0), arr)


def test_plain_uncompressed_is_zero_copy() -> None:
    arr = pa.array(np.arange(10_000, dtype=np.int64) * 7919 % 1_000_003)
    buf = pa.py_buffer(encode_page(arr, Encoding.PLAIN, Compression.NONE))
    out = decode_page(buf, arr.type, "f", 0)
    data = out.buffers()[1]
    assert data is not None
    assert buf.address <= data.address < buf.address + buf.size


@pytest.mark.parametrize(
    ("arr", "expected"),
    [
        (pa.array(np.repeat(np.arange(20, dtype=np.int64), 500)), Encoding.RLE),
        (pa.array(np.arange(10_000, dtype=np.int64) % 1000), Encoding.BITPACK),
        (pa.array(np.random.default_rng(0).integers(-(2**62), 2**62, 10_000)), Encoding.PLAIN),
        (pa.array([f"city-{i % 10}" for i in range(5000)]), Encoding.DICT),
        (pa.array([f"unique-{i}" for i in range(5000)]), Encoding.PLAIN),
        (pa.array([True] * 5000 + [False] * 5000), Encoding.RLE),
        (pa.array(np.random.default_rng(0).random(1000) > 0.5), Encoding.PLAIN),
        (pa.array(np.arange(1000, dtype=np.float64)), Encoding.PLAIN),
    ],
)
def test_auto_encoding(arr: pa.Array[Any], expected: Encoding) -> None:
    page = encode_page(arr, None, Compression.NONE)
    assert header(page)[0] == expected
    assert_same(decode_page(page, arr.type, "f", 0), arr)


def test_inapplicable_encoding_falls_back_to_plain() -> None:
    for arr, enc in [
        (pa.array([1.5, 2.5]), Encoding.BITPACK),
        (pa.array([1.5, 2.5]), Encoding.RLE),
        (pa.array([1, 2]), Encoding.DICT),
        (pa.array(["a"]), Encoding.RLE),
        (pa.array([True]), Encoding.BITPACK),
        (pa.array([D(1)], pa.decimal128(5, 0)), Encoding.DICT),
    ]:
        page = encode_page(arr, enc, Compression.NONE)
        assert header(page)[0] == Encoding.PLAIN
        assert_same(decode_page(page, arr.type, "f", 0), arr)


@pytest.mark.parametrize("bits", [*range(0, 58), 60, 63, 64])
def test_bitpack_every_width(bits: int) -> None:
    rng = np.random.default_rng(bits)
    hi = (1 << bits) - 1 if bits < 63 else 2**63 - 1
    base = -(2**62) if bits <= 62 else -(2**63)
    vals = base + rng.integers(0, hi, 1001, endpoint=True, dtype=np.int64) if bits else None
    arr = pa.array(vals if vals is not None else np.full(1001, 42, dtype=np.int64))
    if bits and bits < 63:
        arr = pa.concat_arrays([arr, pa.array([base, base + hi])])
    page = encode_page(arr, Encoding.BITPACK, Compression.NONE)
    assert header(page)[0] == Encoding.BITPACK
    stored_b = struct.unpack_from("<QII", page, HEADER_SIZE)[1]
    assert stored_b == (64 if bits > 56 else bits)
    assert_same(decode_page(page, arr.type, "f", 0), arr)


def test_compression_kept_only_when_it_pays() -> None:
    rng = np.random.default_rng(1)
    noise = pa.array(rng.integers(-(2**63), 2**63 - 1, 4096, dtype=np.int64))
    page = encode_page(noise, Encoding.PLAIN, Compression.LZ4)
    assert header(page)[1] == Compression.NONE
    zeros = pa.array(np.zeros(4096, dtype=np.int64))
    for comp in (Compression.LZ4, Compression.ZSTD):
        page = encode_page(zeros, Encoding.PLAIN, comp)
        assert header(page)[1] == comp
        assert len(page) < 4096
        assert_same(decode_page(page, zeros.type, "f", 0), zeros)


def test_parse_names() -> None:
    assert parse_encoding(None) is None
    assert parse_encoding("AUTO") is None
    assert parse_encoding("default") is None
    assert parse_encoding("plain") is Encoding.PLAIN
    assert parse_encoding("Dict") is Encoding.DICT
    assert parse_encoding("rle") is Encoding.RLE
    assert parse_encoding("bit_shuffle") is Encoding.BIT_SHUFFLE
    assert parse_encoding("BITSHUFFLE") is Encoding.BIT_SHUFFLE
    assert parse_encoding("bitpack") is Encoding.BITPACK
    assert parse_compression(None) is Compression.LZ4
    assert parse_compression("default") is Compression.LZ4
    assert parse_compression("NO_COMPRESSION") is Compression.NONE
    assert parse_compression("none") is Compression.NONE
    assert parse_compression("zstd") is Compression.ZSTD
    with pytest.raises(ProgrammingError):
        parse_encoding("prefix_foo")
    with pytest.raises(ProgrammingError):
        parse_compression("snappy2")


def test_on_disk_enum_values() -> None:
    assert [int(e) for e in Encoding] == [1, 2, 3, 4, 5]
    assert [int(c) for c in Compression] == [0, 1, 2]


def test_unsupported_type() -> None:
    with pytest.raises(ProgrammingError):
        encode_page(pa.array([[1]]), None, Compression.NONE)


@pytest.mark.parametrize(
    "arr",
    [
        pa.array(np.arange(1000, dtype=np.int64)),
        pa.array(["abc", None, "de"] * 100),
        pa.array([f"k{i % 4}" for i in range(400)]),
        pa.array([True, None] * 100),
    ],
)
@pytest.mark.parametrize("compression", list(Compression))
def test_any_flipped_byte_is_corruption(arr: pa.Array[Any], compression: Compression) -> None:
    page = encode_page(arr, None, compression)
    rng = np.random.default_rng(len(page))
    for pos in [0, 1, 4, 12, 16, 20, HEADER_SIZE, len(page) // 2, len(page) - 1]:
        pos = min(pos, len(page) - 1)
        bad = bytearray(page)
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        with pytest.raises(CorruptionError) as ei:
            decode_page(bytes(bad), arr.type, "/d/col.cfile", 4096)
        assert ei.value.path == "/d/col.cfile"
        assert ei.value.offset == 4096
        assert "/d/col.cfile" in str(ei.value)
    for cut in (0, 5, HEADER_SIZE, len(page) - 1):
        with pytest.raises(CorruptionError):
            decode_page(page[:cut], arr.type, "f", 0)


def test_bad_structure_with_valid_crc_is_corruption() -> None:
    """A page whose checksum matches but whose contents lie still fails cleanly."""
    import zlib

    arr = pa.array(["a", "bb"])
    page = bytearray(encode_page(arr, Encoding.PLAIN, Compression.NONE))
    # Claim more values than the body holds, then fix up the crc.
    struct.pack_into("<I", page, 4, 1000)
    struct.pack_into("<I", page, len(page) - 4, zlib.crc32(page[:-4]))
    with pytest.raises(CorruptionError):
        decode_page(bytes(page), arr.type, "f", 8)
    # Encoding not valid for the type.
    page2 = bytearray(encode_page(pa.array([1.0]), Encoding.PLAIN, Compression.NONE))
    page2[0] = Encoding.DICT
    struct.pack_into("<I", page2, len(page2) - 4, zlib.crc32(page2[:-4]))
    with pytest.raises(CorruptionError):
        decode_page(bytes(page2), pa.float64(), "f", 8)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=300),
    st.sampled_from([None, *Encoding]),
    st.sampled_from(list(Compression)),
    st.integers(0, 5),
)
def test_hypothesis_int64(
    vals: list[int | None], enc: Encoding | None, comp: Compression, cut: int
) -> None:
    arr = pa.array(vals, pa.int64()).slice(min(cut, len(vals)))
    assert_same(decode_page(encode_page(arr, enc, comp), arr.type, "f", 0), arr)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**15), 2**15 - 1)), max_size=300),
    st.sampled_from([None, *Encoding]),
)
def test_hypothesis_int16(vals: list[int | None], enc: Encoding | None) -> None:
    arr = pa.array(vals, pa.int16())
    assert_same(decode_page(encode_page(arr, enc, Compression.LZ4), arr.type, "f", 0), arr)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=12)), max_size=200),
    st.sampled_from([None, Encoding.PLAIN, Encoding.DICT]),
    st.sampled_from(list(Compression)),
    st.integers(0, 3),
)
def test_hypothesis_binary(
    vals: list[bytes | None], enc: Encoding | None, comp: Compression, cut: int
) -> None:
    arr = pa.array(vals, pa.binary()).slice(min(cut, len(vals)))
    assert_same(decode_page(encode_page(arr, enc, comp), arr.type, "f", 0), arr)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.booleans()), max_size=300),
    st.sampled_from([None, Encoding.PLAIN, Encoding.RLE]),
    st.integers(0, 9),
)
def test_hypothesis_bool(vals: list[bool | None], enc: Encoding | None, cut: int) -> None:
    arr = pa.array(vals, pa.bool_()).slice(min(cut, len(vals)))
    assert_same(decode_page(encode_page(arr, enc, Compression.NONE), arr.type, "f", 0), arr)


# --------------------------------------------------------------------------- fast writer paths


def _reference_bitpack(delta: np.ndarray, b: int) -> bytes:
    """The BITPACK stream by definition: bit i*b+k = bit k of delta i (LSB-first bytes)."""
    groups = (len(delta) + 7) // 8
    padded = np.zeros(groups * 8, dtype=np.uint64)
    padded[: len(delta)] = delta
    bits = (padded[:, None] >> np.arange(b, dtype=np.uint64)) & np.uint64(1)
    return np.packbits(bits.astype(np.uint8).reshape(-1), bitorder="little").tobytes()


@pytest.mark.parametrize("b", [*range(1, 65)])
def test_bitpack_stream_matches_definition(b: int) -> None:
    from kudusql.storage.cfile.encodings import encode_bitpack

    rng = np.random.default_rng(b)
    for n in (2, 7, 8, 9, 63, 64, 65, 1000):
        hi = (1 << b) - 1
        delta = rng.integers(0, hi, n, dtype=np.uint64, endpoint=True)
        delta[0], delta[-1] = hi, 0  # the full width is used
        lo = -(1 << 63) if b == 64 else -(1 << 62)
        vals = (delta + np.uint64(lo & 0xFFFFFFFFFFFFFFFF)).view(np.int64)
        body = b"".join(bytes(memoryview(c)) for c in encode_bitpack(vals))
        lo64, width, zero = struct.unpack_from("<QII", body, 0)
        assert (lo64, zero) == (lo & 0xFFFFFFFFFFFFFFFF, 0)
        stored = 64 if b > 56 else b
        assert width == stored
        assert body[16:-8] == _reference_bitpack(delta, stored)
        assert body[-8:] == b"\x00" * 8
        arr = pa.array(vals)
        page = encode_page(arr, Encoding.BITPACK, Compression.NONE)
        assert_same(decode_page(page, arr.type, "f", 0), arr)


NARROW_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(),
                pa.uint64(), pa.date32(), pa.timestamp("us")]  # fmt: skip


@pytest.mark.parametrize("t", NARROW_TYPES)
def test_bitpack_narrow_types_with_nulls(t: pa.DataType) -> None:
    rng = np.random.default_rng(7)
    if pa.types.is_integer(t):
        sign = "u" if pa.types.is_unsigned_integer(t) else ""
        dtype = np.dtype(f"{sign}int{t.bit_width}")
    else:
        dtype = np.dtype(f"i{t.bit_width // 8}")
    info = np.iinfo(dtype)
    for lo, hi in ((info.min, info.max), (info.min, info.min + 255), (0, 300), (-5, 70000)):
        lo, hi = max(lo, info.min), min(hi, info.max)
        vals = rng.integers(lo, hi, 777, dtype=dtype, endpoint=True)
        mask = rng.random(777) < 0.1
        arr = pa.array(vals, mask=mask).view(t)
        for enc in (Encoding.BITPACK, None):
            for sl in (arr, arr.slice(3, 500)):
                assert_same(decode_page(encode_page(sl, enc, Compression.NONE), t, "f", 0), sl)


def test_dict_sample_skips_high_cardinality() -> None:
    from kudusql.storage.cfile.encodings import dict_unlikely

    rng = np.random.default_rng(3)
    n = 32768
    unique = pa.array([f"comment {i} {rng.integers(1 << 40)}" for i in range(n)])
    assert dict_unlikely(unique)
    assert header(encode_page(unique, None, Compression.NONE))[0] == Encoding.PLAIN
    few = pa.array([["AIR", "MAIL", "SHIP", "TRUCK"][i % 4] for i in range(n)])
    assert not dict_unlikely(few)
    assert header(encode_page(few, None, Compression.NONE))[0] == Encoding.DICT
    # every value four times, in clustered runs: the sample looks mostly distinct but
    # DICT still wins, so it must be decided exactly
    rep = pa.array([f"a fairly long repeated value number {i // 4:08d}" for i in range(n)])
    assert not dict_unlikely(rep)
    assert header(encode_page(rep, None, Compression.NONE))[0] == Encoding.DICT
    shuffled = rep.take(pa.array(rng.permutation(n)))
    assert header(encode_page(shuffled, None, Compression.NONE))[0] == Encoding.DICT
    assert not dict_unlikely(unique.slice(0, 1000))  # small pages: always exact
    nulls = pa.array([None] * (n - 10) + [f"v{i}" for i in range(10)])
    assert not dict_unlikely(nulls)
    for arr in (unique, few, rep, shuffled, nulls):
        assert_same(decode_page(encode_page(arr, None, Compression.LZ4), arr.type, "f", 0), arr)


def test_encode_page_dict_returns_dictionary() -> None:
    from kudusql.storage.cfile.page import encode_page_dict

    arr = pa.array(["b", None, "a", "b", "c", None] * 100)
    page, dictionary = encode_page_dict(arr, None, Compression.NONE)
    assert header(page)[0] == Encoding.DICT
    assert dictionary is not None and sorted(dictionary.to_pylist()) == ["a", "b", "c"]
    assert page == encode_page(arr, None, Compression.NONE)
    page, dictionary = encode_page_dict(arr, Encoding.DICT, Compression.LZ4)
    assert dictionary is not None and sorted(dictionary.to_pylist()) == ["a", "b", "c"]
    _, none = encode_page_dict(arr, Encoding.PLAIN, Compression.NONE)
    assert none is None


# The bitshuffle library's transform (0.5.2, ``bitshuffle.bitshuffle(v, block_size=n)``)
# of two small arrays: the layout BIT_SHUFFLE pages use.
BITSHUFFLE_LIBRARY = [
    (np.array([1, 2, 3, 4, 5, 6, 7, 0x8001], "<u2"), "d5667800000000000000000000000080"),
    (
        np.array([-1, 0, 1, 2, 3, 4, 5, 6] * 2, "<i4"),
        "55559999e1e1" + "01" * 58,
    ),
]


def bitshuffle_by_definition(values: bytes, n: int, width: int) -> bytes:
    """Bit k of byte j of value i at bit i of plane (j, k), planes in (j, k) order."""
    bits = np.unpackbits(np.frombuffer(values, np.uint8).reshape(n, width, 1), axis=2,
                         bitorder="little")  # fmt: skip
    return np.packbits(bits.transpose(1, 2, 0), axis=2, bitorder="little").tobytes()


def test_bitshuffle_layout_is_the_bitshuffle_librarys() -> None:
    from kudusql.storage.cfile.encodings import bitshuffle, bitunshuffle

    for values, want in BITSHUFFLE_LIBRARY:
        raw = values.tobytes()
        assert bitshuffle(raw, len(values), values.itemsize).hex() == want
        assert bitunshuffle(bytes.fromhex(want), len(values), values.itemsize).tobytes() == raw
    rng = np.random.default_rng(5)
    for width in (1, 2, 4, 8, 16, 32):
        for n in (8, 16, 4096, 65536 + 8):
            raw = rng.integers(0, 256, n * width, dtype=np.uint8).tobytes()
            shuffled = bitshuffle(raw, n, width)
            assert shuffled == bitshuffle_by_definition(raw, n, width), (width, n)
            assert bitunshuffle(shuffled, n, width).tobytes() == raw


@pytest.mark.parametrize(
    "arr",
    [
        pa.array(np.arange(70_000, dtype=np.int64) * 3),
        pa.array([None, 1, None, 2**62, -7], pa.int64()),
        pa.array(np.linspace(-1, 1, 1001, dtype=np.float32)),
        pa.array([1.5, None, float("nan")] * 7, pa.float64()),
        pa.array([D("1.25"), None, D("-3")] * 3, pa.decimal128(20, 2)),
        pa.array([D("1.25"), None], pa.decimal256(50, 2)),
        pa.array([datetime.date(2024, 1, 1), None] * 5, pa.date32()),
        pa.array([1, None, 3], pa.uint16()),
    ],
    ids=lambda a: f"{a.type}-{len(a)}",
)
def test_bit_shuffle_pages(arr: pa.Array[Any]) -> None:
    """A BIT_SHUFFLE page says so, is LZ4-compressed even when no compression is asked
    for (bitshuffle's LZ4 is part of the encoding, as in Kudu), and reads back."""
    for compression in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
        page = encode_page(arr, Encoding.BIT_SHUFFLE, compression)
        enc, comp = header(page)[:2]
        assert enc == Encoding.BIT_SHUFFLE
        if len(arr) > 100:
            assert comp == (Compression.LZ4 if compression is Compression.NONE else compression)
        assert_same(decode_page(page, arr.type, "f", 0), arr)


def test_bit_shuffle_applies_to_fixed_width_types_only() -> None:
    for arr in (pa.array(["a", "b"]), pa.array([True, False])):
        assert header(encode_page(arr, Encoding.BIT_SHUFFLE, Compression.NONE))[0] == Encoding.PLAIN


@pytest.mark.parametrize(
    ("arr", "expected"),
    [
        # Sorted ids: the high bit planes are constant, LZ4 makes them nothing.
        (pa.array(np.arange(1, 65537, dtype=np.int64)), Encoding.BIT_SHUFFLE),
        # Small values with a few huge ones: frame of reference needs 63 bits each.
        (
            pa.array(np.where(np.arange(65536) % 5000 == 0, 2**62, np.arange(65536) % 1000)),
            Encoding.BIT_SHUFFLE,
        ),
        # Uniform random ints: bit-packing is as small and decodes several times faster.
        (pa.array(np.random.default_rng(1).integers(0, 10**6, 65536)), Encoding.BITPACK),
        # Few distinct floats: PLAIN's LZ4 finds the repeats, bit planes hide them.
        (pa.array((np.random.default_rng(2).random(65536) * 100).round(2)), Encoding.PLAIN),
        (pa.array(np.random.default_rng(3).random(65536)), Encoding.PLAIN),
    ],
    ids=["ids", "outliers", "uniform", "prices", "random-floats"],
)
def test_auto_takes_bit_shuffle_when_it_halves_the_page(
    arr: pa.Array[Any], expected: Encoding
) -> None:
    page = encode_page(arr, None, Compression.LZ4)
    assert header(page)[0] == expected
    assert_same(decode_page(page, arr.type, "f", 0), arr)


def test_bad_bit_shuffle_header_is_corruption() -> None:
    import zlib

    arr = pa.array(np.arange(100, dtype=np.int64))
    page = bytearray(encode_page(arr, Encoding.BIT_SHUFFLE, Compression.NONE))
    assert header(bytes(page))[1] == Compression.LZ4
    for claim in (4, 9):  # values of 4 bytes in an int64 page; a count that is not 100
        body = bytearray(lz4_body(page))
        struct.pack_into("<I", body, 4 if claim == 4 else 0, claim * 100 if claim == 9 else 4)
        bad = repack(page, bytes(body))
        with pytest.raises(CorruptionError, match="bad BIT_SHUFFLE header"):
            decode_page(bad, arr.type, "/d/c.cfile", 64)
    short = repack(page, lz4_body(page)[:-8])
    with pytest.raises(CorruptionError, match="BIT_SHUFFLE planes runs past the end"):
        decode_page(short, arr.type, "/d/c.cfile", 64)
    del zlib


def lz4_body(page: bytes | bytearray) -> bytes:
    import lz4.block

    usize, ssize = header(bytes(page))[6:8]
    return bytes(lz4.block.decompress(bytes(page[HEADER_SIZE : HEADER_SIZE + ssize]),
                                      uncompressed_size=usize))  # fmt: skip


def repack(page: bytes | bytearray, body: bytes) -> bytes:
    """``page`` with ``body`` stored raw (compression 0) and a valid checksum."""
    import zlib

    h = list(header(bytes(page)))
    h[1], h[6], h[7] = 0, len(body), len(body)
    out = PAGE_HEADER.pack(*h) + body
    return out + (zlib.crc32(out) & 0xFFFFFFFF).to_bytes(4, "little")
