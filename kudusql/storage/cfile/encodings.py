"""Value encodings of a CFile page body: the Encoding/Compression enums and the codecs.

This module owns how the values of one page become bytes and back (the *body* of a
page before compression; page.py adds the header, compression and checksum):

* PLAIN   - every type. Fixed width: little-endian values (bool: LSB-first bitmap).
            string/binary: int32 offsets (rebased to 0) + the data bytes.
* DICT    - string/binary. A per-page dictionary (PLAIN string layout) + narrow codes
            (uint8/uint16/uint32).
* RLE     - bool and integer-like types (ints, date, timestamp, time, duration): run
            values + run lengths (uint8/uint16/uint32); decoded with np.repeat.
* BITPACK - integer-like types: frame of reference (the page minimum) + true bit-packing
            of ``v - min`` in ``b`` bits, ``b`` = bit length of ``max - min``.
* BIT_SHUFFLE - fixed-width types (Kudu's BIT_SHUFFLE): the bitshuffle transform, bit k
            of byte j of every value gathered into one bit plane, planes in (j, k) order,
            so that the page's LZ4 compresses the planes that hardly vary to almost
            nothing. Vectorized as 8x8 bit-matrix transposes of uint64 words.

The byte layouts are specified in FORMAT.md. Null slots are described by the validity
bitmap (stored by page.py); encoders may store any value in a null slot.

Decode speed of whole 64k-row pages through decode_page (CRC check + decompress +
decode), measured on the 2-core dev box with ``python -m benchmarks.page_decode``;
MB/s of decoded Arrow bytes,
best of three runs (the box was shared; busy runs were ~35% slower):

    case                      MB/s   Mvalues/s  us/page  stored/raw
    int64 PLAIN none          3300      416       158      100%   zero-copy; CRC-bound
    int64 PLAIN lz4           1800      228       287       59%   random 0..1e6
    int64 PLAIN zstd           500       63      1040       43%
    int64 BITPACK 20 bits     1600      205       320       31%
    int64 BITPACK 8 bits      7500      936        70       13%   byte widths: direct view
    int64 RLE runs of 64      8200     1029        64        2%
    int32 BITPACK 13 bits      840      209       314       41%
    float64 PLAIN lz4         1800      222       295       47%
    bool RLE runs of 16        210     1716        38       50%
    string PLAIN lz4 (20 B)   3300      137       477       38%
    string DICT lz4 (100 dist)3400      140       469        0%   take() materializes

BIT_SHUFFLE decodes a 64k-row int64 page in 1-2 ms (``python -m benchmarks.bitshuffle``
compares it with BITPACK and PLAIN on the same data).

Re-run ``_bench`` (bottom of this file) after changing a codec.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import ProgrammingError


class Encoding(enum.IntEnum):
    """Value encoding of a page (on-disk values: never renumber)."""

    PLAIN = 1
    DICT = 2
    RLE = 3
    BITPACK = 4
    BIT_SHUFFLE = 5


class Compression(enum.IntEnum):
    """Compression codec of a page body (on-disk values: never renumber)."""

    NONE = 0
    LZ4 = 1
    ZSTD = 2


_ENCODING_NAMES: dict[str, Encoding | None] = {
    "plain": Encoding.PLAIN,
    "plain_encoding": Encoding.PLAIN,
    "dict": Encoding.DICT,
    "dict_encoding": Encoding.DICT,
    "dictionary": Encoding.DICT,
    "rle": Encoding.RLE,
    "bitpack": Encoding.BITPACK,
    "bit_shuffle": Encoding.BIT_SHUFFLE,
    "bitshuffle": Encoding.BIT_SHUFFLE,
    "auto": None,
    "auto_encoding": None,
    "default": None,
    # Kudu's encodings this format does not have: pages choose their encoding.
    "prefix": None,
    "prefix_encoding": None,
    "group_varint": None,
}

_COMPRESSION_NAMES: dict[str, Compression] = {
    "lz4": Compression.LZ4,
    "default": Compression.LZ4,
    "default_compression": Compression.LZ4,
    "none": Compression.NONE,
    "no_compression": Compression.NONE,
    "zstd": Compression.ZSTD,
    # Kudu's codecs this format does not have: the nearest one (speed, ratio).
    "snappy": Compression.LZ4,
    "zlib": Compression.ZSTD,
}


def parse_encoding(name: str | None) -> Encoding | None:
    """Encoding named in DDL (case-insensitive); None means "choose per page"."""
    if name is None:
        return None
    key = name.strip().lower()
    if key not in _ENCODING_NAMES:
        raise ProgrammingError(
            f"unknown encoding {name!r} (expected one of plain, dict, rle, bitpack, "
            "bit_shuffle, auto)"
        )
    return _ENCODING_NAMES[key]


def parse_compression(name: str | None) -> Compression:
    """Compression named in DDL (case-insensitive); None and "default" mean LZ4."""
    if name is None:
        return Compression.LZ4
    key = name.strip().lower()
    if key not in _COMPRESSION_NAMES:
        raise ProgrammingError(
            f"unknown compression {name!r} (expected one of lz4, zstd, none, default)"
        )
    return _COMPRESSION_NAMES[key]


# --------------------------------------------------------------------------- type kinds


class Kind(enum.Enum):
    """How a type is laid out: a bitmap, fixed-width values, or offsets + data."""

    BOOL = "bool"
    FIXED = "fixed"
    VAR = "var"


@dataclass(frozen=True)
class TypeInfo:
    """Physical description of a supported Arrow type."""

    kind: Kind
    width: int  # bytes per value (FIXED); 0 otherwise
    int_dtype: np.dtype[Any] | None  # numpy dtype when values are integer-like (RLE/BITPACK)


_INFO_CACHE: dict[pa.DataType, TypeInfo] = {}


def type_info(t: pa.DataType) -> TypeInfo:
    """Classify ``t``; raise ProgrammingError for types a CFile cannot store."""
    info = _INFO_CACHE.get(t)
    if info is not None:
        return info
    if pa.types.is_boolean(t):
        info = TypeInfo(Kind.BOOL, 0, None)
    elif pa.types.is_string(t) or pa.types.is_binary(t):
        info = TypeInfo(Kind.VAR, 0, None)
    elif pa.types.is_integer(t):
        # Built from the width and sign, not ``to_pandas_dtype`` (which imports pandas
        # on older pyarrow).
        sign = "i" if pa.types.is_signed_integer(t) else "u"
        info = TypeInfo(Kind.FIXED, t.bit_width // 8, np.dtype(f"<{sign}{t.bit_width // 8}"))
    elif (
        pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    ):
        width = t.bit_width // 8
        info = TypeInfo(Kind.FIXED, width, np.dtype(f"<i{width}"))
    elif (pa.types.is_floating(t) and t.bit_width in (32, 64)) or (
        pa.types.is_decimal(t) and t.bit_width in (128, 256)
    ):
        info = TypeInfo(Kind.FIXED, t.bit_width // 8, None)
    else:
        raise ProgrammingError(f"a CFile cannot store values of type {t}")
    _INFO_CACHE[t] = info
    return info


def applicable(encoding: Encoding, info: TypeInfo) -> bool:
    """Whether ``encoding`` can encode values described by ``info``."""
    if encoding is Encoding.PLAIN:
        return True
    if encoding is Encoding.DICT:
        return info.kind is Kind.VAR
    if encoding is Encoding.RLE:
        return info.kind is Kind.BOOL or info.int_dtype is not None
    if encoding is Encoding.BIT_SHUFFLE:
        return info.kind is Kind.FIXED
    return info.int_dtype is not None  # BITPACK


# --------------------------------------------------------------------------- helpers

U8 = np.dtype("<u1")
I32 = np.dtype("<i4")
U64 = np.dtype("<u8")
_HDR8 = struct.Struct("<II")  # two u32 (DICT header)
_RLE_HDR = struct.Struct("<IBBH")  # num_runs, value_width, length_width, zero
_BP_HDR = struct.Struct("<QII")  # min (u64 bit pattern), bit width, zero
_BS_HDR = struct.Struct("<II")  # padded value count, value width in bytes (BIT_SHUFFLE)

Bytesish = bytes | bytearray | memoryview


def np_view(buf: Any, dtype: Any, count: int = -1, offset: int = 0) -> np.ndarray[Any, Any]:
    """Zero-copy numpy view of any buffer-protocol object (pa.Buffer, memoryview, bytes)."""
    return np.frombuffer(buf, dtype=dtype, count=count, offset=offset)


def np_buffer(a: np.ndarray[Any, Any]) -> pa.Buffer:
    """Zero-copy pa.Buffer over a contiguous numpy array."""
    obj: Any = a
    return pa.py_buffer(obj)


def pad8(n: int) -> int:
    """``n`` rounded up to a multiple of 8."""
    return (n + 7) & ~7


def _zeros(n: int) -> bytes:
    return b"\x00" * n


def _padded(chunks: list[Bytesish]) -> list[Bytesish]:
    """Chunks each followed by zero padding to a multiple of 8 bytes."""
    out: list[Bytesish] = []
    for c in chunks:
        out.append(c)
        n = memoryview(c).nbytes
        if n & 7:
            out.append(_zeros(8 - (n & 7)))
    return out


def bitmap_bytes(buf: pa.Buffer, offset: int, n: int) -> Bytesish:
    """The ``n`` bits starting at bit ``offset`` of ``buf`` as a bitmap starting at bit 0."""
    nbytes = (n + 7) // 8
    if offset % 8 == 0:
        start = offset // 8
        return memoryview(buf)[start : start + nbytes]
    bits = np.unpackbits(np_view(buf, dtype=U8), bitorder="little")[offset : offset + n]
    return np.packbits(bits, bitorder="little").tobytes()


def _narrow_width(max_value: int) -> int:
    """Smallest of 1/2/4 bytes that holds ``max_value`` unsigned."""
    if max_value < 1 << 8:
        return 1
    if max_value < 1 << 16:
        return 2
    return 4


def _uint_dtype(width: int) -> np.dtype[Any]:
    return np.dtype(f"<u{width}")


def fixed_values(arr: pa.Array[Any], info: TypeInfo) -> memoryview:
    """The value bytes of a fixed-width array (honouring its offset), zero-copy."""
    n = len(arr)
    buf = arr.buffers()[1]
    start = arr.offset * info.width
    if buf is None:
        return memoryview(b"")
    return memoryview(buf)[start : start + n * info.width]


def var_parts(arr: pa.Array[Any]) -> tuple[npt.NDArray[np.int32], memoryview]:
    """(offsets rebased to 0, data bytes) of a string/binary array, honouring its offset."""
    n = len(arr)
    bufs = arr.buffers()
    offs_buf = bufs[1]
    if offs_buf is None or n == 0:
        return np.zeros(1, dtype=I32), memoryview(b"")
    offs = np_view(offs_buf, dtype=I32, count=n + 1, offset=arr.offset * 4)
    first = int(offs[0])
    last = int(offs[-1])
    data = memoryview(bufs[2])[first:last] if bufs[2] is not None else memoryview(b"")
    if first != 0:
        offs = offs - np.int32(first)
    return offs, data


def int_values(
    arr: pa.Array[Any], info: TypeInfo, valid: npt.NDArray[np.bool_] | None
) -> np.ndarray:
    """Integer-like values as numpy (null slots replaced by the smallest valid value)."""
    assert info.int_dtype is not None
    vals = np_view(fixed_values(arr, info), dtype=info.int_dtype)
    if valid is not None:
        fill = vals[valid].min() if valid.any() else info.int_dtype.type(0)
        vals = np.where(valid, vals, fill)
    return vals


def bool_values(arr: pa.Array[Any]) -> npt.NDArray[np.uint8]:
    """Bool values as a uint8 0/1 numpy array."""
    n = len(arr)
    buf = arr.buffers()[1]
    if n == 0 or buf is None:
        return np.zeros(0, dtype=U8)
    bits = np.unpackbits(np_view(buf, dtype=U8), bitorder="little")
    return bits[arr.offset : arr.offset + n]


# --------------------------------------------------------------------------- encoders
# Each encoder returns a list of byte chunks (concatenated by page.py).


def encode_plain(arr: pa.Array[Any], info: TypeInfo) -> list[Bytesish]:
    """PLAIN: raw little-endian values / bitmap / offsets + data."""
    n = len(arr)
    if info.kind is Kind.BOOL:
        buf = arr.buffers()[1]
        if n == 0 or buf is None:
            return []
        return [bitmap_bytes(buf, arr.offset, n)]
    if info.kind is Kind.FIXED:
        return [fixed_values(arr, info)]
    offs, data = var_parts(arr)
    return [*_padded([np_buffer(np.ascontiguousarray(offs)).to_pybytes()]), data]


def dict_sizes(arr: pa.Array[Any]) -> tuple[int, int, pa.DictionaryArray[Any, Any] | None]:
    """(PLAIN size, DICT size, the dictionary-encoded array) of a string/binary array."""
    n = len(arr)
    _, data = var_parts(arr)
    plain = 4 * (n + 1) + len(data)
    if n == 0:
        return plain, plain + 8, None
    denc = arr.dictionary_encode()
    dictionary = denc.dictionary
    k = len(dictionary)
    _, ddata = var_parts(dictionary)
    size = 8 + pad8(4 * (k + 1)) + pad8(len(ddata)) + n * _narrow_width(max(k - 1, 0))
    return plain, size, denc


# DICT pre-check on a sample: pages above this many values are sampled first.
DICT_SAMPLE = 2048
# Sample positions per page size: a fixed-seed uniform sample without replacement, so
# the choice (and hence the file) is deterministic, and clustered duplicates (runs of a
# repeated value) are seen as often as scattered ones - a strided or stratified sample
# would land in a different run every time and take them for distinct values.
_SAMPLE_IDX: dict[int, pa.Array[Any]] = {}
_SAMPLE_SEED = 0x6B756475


def _sample_positions(n: int) -> pa.Array[Any]:
    idx = _SAMPLE_IDX.get(n)
    if idx is None:
        rng = np.random.default_rng(_SAMPLE_SEED)
        pos = np.sort(rng.choice(n, DICT_SAMPLE, replace=False)).astype(np.int64)
        idx = pa.array(pos)
        if len(_SAMPLE_IDX) >= 64:
            _SAMPLE_IDX.clear()
        _SAMPLE_IDX[n] = idx
    return idx


# Skip DICT without dictionary-encoding the page when the estimated DICT size is above
# this fraction of PLAIN (above the 0.7 acceptance ratio, so borderline pages are still
# decided exactly).
_DICT_SKIP_RATIO = 0.85


def _estimate_distinct(sample_distinct: int, sample_size: int, n: int) -> float:
    """Distinct values in ``n`` rows estimated from a uniform sample (inf: all distinct).

    Models the page as k equally frequent values: a sample of s rows then shows
    k * (1 - exp(-s/k)) distinct values on average; solve that for k (it increases with k).
    """
    d, s = sample_distinct, sample_size
    if d >= s:
        return float("inf")
    lo, hi = float(d), float(n)
    if hi * -np.expm1(-s / hi) <= d:
        return hi
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if mid * -np.expm1(-s / mid) < d:
            lo = mid
        else:
            hi = mid
    return hi


def dict_unlikely(arr: pa.Array[Any]) -> bool:
    """Whether a sample shows DICT cannot pay off for this string/binary page.

    Dictionary-encoding a whole page costs far more than encoding it PLAIN, so the
    automatic choice first counts distinct values on a fixed random sample of
    DICT_SAMPLE rows, estimates the page's distinct count and the DICT size from it,
    and skips the exact computation (dict_sizes) when DICT is clearly too big.
    Small pages are never skipped.
    """
    n = len(arr)
    if n <= 2 * DICT_SAMPLE:
        return False
    sample = arr.take(_sample_positions(n))
    valid = len(sample) - sample.null_count
    if valid < DICT_SAMPLE // 2:
        return False  # mostly NULL: decide exactly
    distinct = int(pc.count_distinct(sample).as_py())
    k = _estimate_distinct(distinct, valid, n)
    if k == float("inf"):
        return True
    _, data = var_parts(arr)
    plain = 4 * (n + 1) + len(data)
    avg = len(data) / n
    est = 8 + 4 * (k + 1) + k * avg + n * _narrow_width(int(k))
    return est > _DICT_SKIP_RATIO * plain


def encode_dict(
    arr: pa.Array[Any], denc: pa.DictionaryArray[Any, Any] | None = None
) -> list[Bytesish]:
    """DICT: u32 k, u32 code width, dictionary offsets + data, codes."""
    if denc is None:
        denc = arr.dictionary_encode() if len(arr) else None
    if denc is None:
        return [_HDR8.pack(0, 1), np.zeros(1, dtype=I32).tobytes()]
    dictionary = denc.dictionary
    k = len(dictionary)
    width = _narrow_width(max(k - 1, 0))
    idx = denc.indices
    codes = np_view(idx.buffers()[1], dtype=I32, count=len(idx), offset=idx.offset * 4)
    if idx.null_count:
        codes = np.where(idx.is_valid().to_numpy(zero_copy_only=False), codes, 0)
    doffs, ddata = var_parts(dictionary)
    return [
        _HDR8.pack(k, width),
        *_padded([doffs.tobytes(), ddata]),
        codes.astype(_uint_dtype(width)).tobytes(),
    ]


def _runs(vals: np.ndarray) -> tuple[np.ndarray, npt.NDArray[np.int64]]:
    """(run values, run lengths) of ``vals``."""
    n = len(vals)
    if n == 0:
        return vals[:0], np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(vals[1:] != vals[:-1]) + 1
    starts = np.concatenate(([0], starts))
    lengths = np.diff(np.append(starts, n))
    return vals[starts], lengths


def count_runs(vals: np.ndarray) -> int:
    """Number of runs of equal adjacent values."""
    if len(vals) == 0:
        return 0
    return int(np.count_nonzero(vals[1:] != vals[:-1])) + 1


def encode_rle(vals: np.ndarray) -> list[Bytesish]:
    """RLE: u32 runs, u8 value width, u8 length width, u16 0; values; lengths."""
    run_vals, lengths = _runs(vals)
    vwidth = vals.dtype.itemsize
    lwidth = _narrow_width(int(lengths.max()) if len(lengths) else 0)
    return [
        _RLE_HDR.pack(len(run_vals), vwidth, lwidth, 0),
        *_padded([run_vals.astype(vals.dtype.newbyteorder("<")).tobytes()]),
        lengths.astype(_uint_dtype(lwidth)).tobytes(),
    ]


def _to_u64(vals: np.ndarray) -> npt.NDArray[np.uint64]:
    """Values widened to 64 bits (sign-extended for signed types) as uint64 bit patterns."""
    if vals.dtype.kind == "u":
        return vals.astype(U64)
    return vals.astype(np.int64).view(U64)


def bit_width_of_range(vals: np.ndarray) -> tuple[int, int]:
    """(min as a u64 bit pattern, bits needed for max - min) of integer values."""
    if len(vals) == 0:
        return 0, 0
    lo = vals.min()
    hi = vals.max()
    lo64 = int(_to_u64(np.array([lo], dtype=vals.dtype))[0])
    hi64 = int(_to_u64(np.array([hi], dtype=vals.dtype))[0])
    span = (hi64 - lo64) & 0xFFFFFFFFFFFFFFFF
    return lo64, span.bit_length()


def stored_bit_width(b: int) -> int:
    """The bit width actually used: widths above 56 are stored as 64 (decoder limit)."""
    return 64 if b > 56 else b


def bitpack_size(n: int, b: int) -> int:
    """Encoded size of BITPACK for ``n`` values of ``b`` bits."""
    b = stored_bit_width(b)
    return _BP_HDR.size + ((n + 7) // 8) * b + 8


_PackPlan = tuple[
    npt.NDArray[np.uint64], npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp],
    npt.NDArray[np.uint64],
]  # fmt: skip
_PACK_PLANS: dict[int, _PackPlan] = {}


def _pack_plan(b: int) -> _PackPlan:
    """How 64 values of ``b`` bits land in ``b`` little-endian u64 words (cached per b).

    Value j starts at stream bit j*b: word ``(j*b) >> 6``, shift ``(j*b) & 63``. Every
    word holds the start of at least one value (b <= 64), so OR-reducing the shifted
    values over each word's run of j gives the low parts; a value that straddles a word
    boundary (shift + b > 64) spills its top bits into the next word.
    """
    plan = _PACK_PLANS.get(b)
    if plan is None:
        j = np.arange(64)
        start = j * b
        word = start >> 6
        shift = (start & 63).astype(U64)
        first = np.searchsorted(word, np.arange(b)).astype(np.intp)  # first value per word
        prev = first[1:] - 1  # the last value starting in word w-1, for w >= 1
        spills = (start[prev] & 63) + b > 64
        spill_j = prev[spills].astype(np.intp)
        spill_w = (np.flatnonzero(spills) + 1).astype(np.intp)
        spill_shift = (64 - (start[spill_j] & 63)).astype(U64)
        plan = (shift.reshape(1, 64), first, spill_j, spill_w, spill_shift.reshape(1, -1))
        _PACK_PLANS[b] = plan
    return plan


def _pack_bits(delta: npt.NDArray[np.uint64], b: int, nbytes: int) -> bytes:
    """The LSB-first ``b``-bit stream of ``delta`` (each < 2**b), cut to ``nbytes``.

    Vectorized over blocks of 64 values (64 values of b bits = b u64 words): one shift
    of the (blocks, 64) matrix, one OR-reduceat per word and one fix-up for values that
    straddle two words - no per-bit expansion of the input.
    """
    n = len(delta)
    blocks = (n + 63) // 64
    if n != blocks * 64:
        padded = np.zeros(blocks * 64, dtype=U64)
        padded[:n] = delta
        delta = padded
    shift, first, spill_j, spill_w, spill_shift = _pack_plan(b)
    mat = delta.reshape(blocks, 64)
    words = np.bitwise_or.reduceat(mat << shift, first, axis=1)  # (blocks, b)
    if len(spill_j):
        words[:, spill_w] |= mat[:, spill_j] >> spill_shift
    return words.tobytes()[:nbytes]


def _byte_deltas(vals: np.ndarray, lo64: int, width: int, count: int) -> bytes:
    """``(v - min) mod 2**(8*width)`` as ``count`` little-endian u<width> (zero padded).

    The deltas fit in ``width`` bytes, so truncating the values and the minimum to that
    width before subtracting (wrapping) gives the same result without widening to 64 bits.
    """
    udt = _uint_dtype(width)
    src = vals.view(_uint_dtype(vals.dtype.itemsize))
    out = np.zeros(count, dtype=udt)
    np.subtract(src[: len(vals)], udt.type(lo64 & ((1 << (8 * width)) - 1)), out=out[: len(vals)],
                casting="unsafe")  # fmt: skip
    return out.tobytes()


def encode_bitpack(vals: np.ndarray, lo_bits: tuple[int, int] | None = None) -> list[Bytesish]:
    """BITPACK: u64 min, u32 b, u32 0; ceil(n/8)*b bytes of LSB-first bits; 8 zero bytes.

    ``lo_bits`` is ``bit_width_of_range(vals)`` when the caller already computed it.
    """
    n = len(vals)
    lo64, b = lo_bits if lo_bits is not None else bit_width_of_range(vals)
    b = stored_bit_width(b)
    groups = (n + 7) // 8
    packed: Bytesish
    if b == 0 or n == 0:
        packed = b""
    elif b in (8, 16, 32, 64) and b // 8 <= vals.dtype.itemsize:
        packed = _byte_deltas(vals, lo64, b // 8, groups * 8)
    else:
        delta = _to_u64(vals)
        delta -= np.uint64(lo64)
        if b in (8, 16, 32, 64):  # pragma: no cover - b never exceeds the value width
            padded = np.zeros(groups * 8, dtype=U64)
            padded[:n] = delta
            packed = padded.astype(_uint_dtype(b // 8)).tobytes()
        else:
            packed = _pack_bits(delta, b, groups * b)
    return [_BP_HDR.pack(lo64, b, 0), packed, _zeros(8)]


# Masks of the three exchange steps of an 8x8 bit-matrix transpose in a u64 word.
_T7 = np.uint64(0x00AA00AA00AA00AA)
_T14 = np.uint64(0x0000CCCC0000CCCC)
_T28 = np.uint64(0x00000000F0F0F0F0)


def _transpose_8x8(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Each word as an 8x8 bit matrix (byte r = row r, bit c = column c) transposed:
    bit c of byte r becomes bit r of byte c. Three exchanges of bit blocks, each one
    shift-xor-mask; the transpose is its own inverse. ``x`` is overwritten."""
    for shift, mask in ((7, _T7), (14, _T14), (28, _T28)):
        sh = np.uint64(shift)
        t = np.bitwise_xor(x, x >> sh)
        t &= mask
        x ^= t
        x ^= t << sh
    return x


def bitshuffle(values: Bytesish, n: int, width: int) -> bytes:
    """The bit planes of ``n`` values of ``width`` bytes (``n`` a multiple of 8): for
    byte j of a value, then for bit k of that byte, ``n/8`` bytes whose bit i (LSB
    first) is bit k of byte j of value i. (The bitshuffle library's layout for one
    block of ``n`` values.)"""
    if n == 0:
        return b""
    rows = np_view(values, dtype=U8, count=n * width).reshape(n, width).T.copy()  # C order
    # A word of row j holds byte j of 8 consecutive values: transposed, its byte k holds
    # bit k of each (bit m from value m), which is one byte of bit plane (j, k).
    words = _transpose_8x8(rows.view(U64))
    planes = words.view(U8).reshape(width, n // 8, 8).transpose(0, 2, 1)
    return np.ascontiguousarray(planes).tobytes()


def bitunshuffle(planes: Any, n: int, width: int) -> npt.NDArray[np.uint8]:
    """Inverse of ``bitshuffle``: the ``n * width`` value bytes."""
    if n == 0:
        return np.zeros(0, dtype=U8)
    grid = np_view(planes, dtype=U8, count=n * width).reshape(width, 8, n // 8)
    words = grid.transpose(0, 2, 1).copy().view(U64)  # a C-ordered, writable copy
    rows = _transpose_8x8(words.reshape(width, n // 8)).view(U8).reshape(width, n)
    return np.ascontiguousarray(rows.T).reshape(-1)


def encode_bitshuffle(arr: pa.Array[Any], info: TypeInfo) -> list[Bytesish]:
    """BIT_SHUFFLE: u32 padded count, u32 value width; the bit planes of the values
    (zero values pad the count to a multiple of 8; null slots keep what Arrow holds)."""
    n = len(arr)
    padded = (n + 7) & ~7
    values = fixed_values(arr, info)
    if padded != n:
        values = memoryview(bytes(values) + _zeros((padded - n) * info.width))
    return [_BS_HDR.pack(padded, info.width), bitshuffle(values, padded, info.width)]


def bitshuffle_size(n: int, width: int) -> int:
    """Encoded size of BIT_SHUFFLE (before the page's compression)."""
    return _BS_HDR.size + ((n + 7) & ~7) * width


# --------------------------------------------------------------------------- decoders
# Each decoder gets the body buffer and the byte offset where the values start and
# returns the Arrow buffers after the validity bitmap (values / offsets + data).


class FormatError(ValueError):
    """A structural problem in an encoded body (page.py turns it into CorruptionError)."""


def _need(buf: pa.Buffer, start: int, length: int, what: str) -> None:
    if start < 0 or length < 0 or start + length > buf.size:
        raise FormatError(f"{what} runs past the end of the page body")


def decode_plain(buf: pa.Buffer, pos: int, n: int, info: TypeInfo) -> list[pa.Buffer]:
    """Inverse of encode_plain: zero-copy slices of ``buf``."""
    if info.kind is Kind.BOOL:
        nbytes = (n + 7) // 8
        _need(buf, pos, nbytes, "bool bitmap")
        return [buf.slice(pos, nbytes)]
    if info.kind is Kind.FIXED:
        nbytes = n * info.width
        _need(buf, pos, nbytes, "values")
        return [buf.slice(pos, nbytes)]
    noffs = 4 * (n + 1)
    _need(buf, pos, noffs, "offsets")
    offs = np_view(buf, dtype=I32, count=n + 1, offset=pos)
    data_pos = pos + pad8(noffs)
    data_len = int(offs[-1])
    _need(buf, data_pos, data_len, "string data")
    _check_offsets(offs)
    return [buf.slice(pos, noffs), buf.slice(data_pos, data_len)]


def _check_offsets(offs: npt.NDArray[np.int32]) -> None:
    if offs[0] != 0 or (len(offs) > 1 and bool((offs[1:] < offs[:-1]).any())):
        raise FormatError("string offsets are not monotonic from 0")


def decode_dict(
    buf: pa.Buffer, pos: int, n: int, t: pa.DataType, validity: pa.Buffer | None
) -> pa.Array[Any]:
    """Inverse of encode_dict: the dictionary taken by the codes (a materialized array)."""
    _need(buf, pos, 8, "dictionary header")
    k, width = _HDR8.unpack_from(buf, pos)
    if width not in (1, 2, 4):
        raise FormatError(f"bad dictionary code width {width}")
    pos += 8
    noffs = 4 * (k + 1)
    _need(buf, pos, noffs, "dictionary offsets")
    doffs = np_view(buf, dtype=I32, count=k + 1, offset=pos)
    _check_offsets(doffs)
    dpos = pos + pad8(noffs)
    dlen = int(doffs[-1])
    _need(buf, dpos, dlen, "dictionary data")
    cpos = dpos + pad8(dlen)
    _need(buf, cpos, n * width, "dictionary codes")
    dictionary = pa.Array.from_buffers(t, k, [None, buf.slice(pos, noffs), buf.slice(dpos, dlen)])
    codes = pa.Array.from_buffers(
        pa.from_numpy_dtype(_uint_dtype(width)), n, [validity, buf.slice(cpos, n * width)]
    )
    return dictionary.take(codes)  # type: ignore[arg-type]


def decode_rle(buf: pa.Buffer, pos: int, n: int, info: TypeInfo) -> pa.Buffer:
    """Inverse of encode_rle: the values buffer (a bitmap for bool)."""
    _need(buf, pos, _RLE_HDR.size, "RLE header")
    nruns, vwidth, lwidth, _ = _RLE_HDR.unpack_from(buf, pos)
    want_vwidth = 1 if info.kind is Kind.BOOL else info.width
    if vwidth != want_vwidth or lwidth not in (1, 2, 4):
        raise FormatError(f"bad RLE widths (value {vwidth}, length {lwidth})")
    pos += _RLE_HDR.size
    vdtype = U8 if info.int_dtype is None else info.int_dtype.newbyteorder("<")
    _need(buf, pos, nruns * vwidth, "RLE run values")
    vals = np_view(buf, dtype=vdtype, count=nruns, offset=pos)
    lpos = pos + pad8(nruns * vwidth)
    _need(buf, lpos, nruns * lwidth, "RLE run lengths")
    lengths = np_view(buf, dtype=_uint_dtype(lwidth), count=nruns, offset=lpos)
    if int(lengths.sum(dtype=np.int64)) != n:
        raise FormatError(f"RLE run lengths add up to {int(lengths.sum())}, expected {n}")
    out = np.repeat(vals, lengths)
    if info.kind is Kind.BOOL:
        return np_buffer(np.packbits(out, bitorder="little"))
    return np_buffer(out)


def decode_bitpack(buf: pa.Buffer, pos: int, n: int, info: TypeInfo) -> pa.Buffer:
    """Inverse of encode_bitpack: the values buffer."""
    assert info.int_dtype is not None
    _need(buf, pos, _BP_HDR.size, "BITPACK header")
    lo64, b, _ = _BP_HDR.unpack_from(buf, pos)
    if b > 64 or 56 < b < 64:
        raise FormatError(f"bad BITPACK bit width {b}")
    pos += _BP_HDR.size
    groups = (n + 7) // 8
    _need(buf, pos, groups * b + 8, "BITPACK data")
    target = info.int_dtype.newbyteorder("<")
    lo = np.uint64(lo64)
    if b == 0:
        out = np.full(n, lo, dtype=U64)
    elif b in (8, 16, 32, 64):
        packed = np_view(buf, dtype=_uint_dtype(b // 8), count=n, offset=pos)
        if lo64 == 0 and b // 8 == target.itemsize:
            return np_buffer(packed.view(target))
        out = packed.astype(U64)
        out += lo
    else:
        out = np.empty(groups * 8, dtype=U64)
        mask = np.uint64((1 << b) - 1)
        base = np_view(buf, dtype=U8, count=groups * b + 8, offset=pos)
        for j in range(8):
            bit = j * b
            view = np.ndarray(
                shape=(groups,), dtype=U64, buffer=base, offset=bit >> 3, strides=(b,)
            )
            dst = out[j::8]
            np.right_shift(view, np.uint64(bit & 7), out=dst)
            dst &= mask
        out = out[:n]
        out += lo
    res: np.ndarray[Any, Any]
    if target.kind == "i":
        res = out.view(np.int64)
        if target.itemsize != 8:
            res = res.astype(target)
    else:
        res = out if target.itemsize == 8 else out.astype(target)
    return np_buffer(res)


def decode_bitshuffle(buf: pa.Buffer, pos: int, n: int, info: TypeInfo) -> pa.Buffer:
    """Inverse of encode_bitshuffle: the values buffer."""
    _need(buf, pos, _BS_HDR.size, "BIT_SHUFFLE header")
    padded, width = _BS_HDR.unpack_from(buf, pos)
    if padded != (n + 7) & ~7 or width != info.width:
        raise FormatError(
            f"bad BIT_SHUFFLE header ({padded} values of {width} bytes, expected "
            f"{(n + 7) & ~7} of {info.width})"
        )
    pos += _BS_HDR.size
    _need(buf, pos, padded * width, "BIT_SHUFFLE planes")
    values = bitunshuffle(memoryview(buf)[pos : pos + padded * width], padded, width)
    return np_buffer(values[: n * width])


# --------------------------------------------------------------------------- benchmark
