"""Tests for kudusql.common.murmur: Kudu golden buckets, vectorized == scalar, == mmh3."""

from __future__ import annotations

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.common.keys import encode_key, encode_keys, keys_as_fixed
from kudusql.common.murmur import murmur2_64, murmur2_64_fixed, murmur3_x64_64, murmur3_x64_128
from kudusql.common.types import DataType, TypeKind

I32 = DataType(TypeKind.INT32)
I64 = DataType(TypeKind.INT64)
STR = DataType(TypeKind.STRING)

# partition-test PartitionKeyEncoding: (a INT32, b STRING, c STRING),
# HASH(a,b) 32, HASH(c) 32 SEED 42.
GOLDEN = [
    ((0, "", ""), (0, 20)),
    ((1, "", ""), (5, 20)),
    ((0, "b", "c"), (26, 29)),
    ((1, "b", "c"), (0, 29)),
]


@pytest.mark.parametrize(("row", "buckets"), GOLDEN)
def test_kudu_golden_buckets(row: tuple[int, str, str], buckets: tuple[int, int]) -> None:
    ab = encode_key(row[:2], [I32, STR])  # b is the last column of its dimension: raw
    c = encode_key(row[2:], [STR])
    assert (murmur2_64(ab, 0) % 32, murmur2_64(c, 42) % 32) == buckets


def test_kudu_golden_buckets_vectorized_keys() -> None:
    a = pa.array([r[0] for r, _ in GOLDEN], pa.int32())
    b = pa.array([r[1] for r, _ in GOLDEN])
    c = pa.array([r[2] for r, _ in GOLDEN])
    ab = encode_keys([a, b], [I32, STR]).to_pylist()
    cc = encode_keys([c], [STR]).to_pylist()
    got = [(murmur2_64(x) % 32, murmur2_64(y, 42) % 32) for x, y in zip(ab, cc, strict=True)]
    assert got == [bk for _, bk in GOLDEN]


def test_murmur2_known_values() -> None:
    # Empty input: h = seed; fmix only.
    assert murmur2_64(b"") == 0
    assert 0 <= murmur2_64(b"\xff" * 100, 2**64 - 1) < 2**64


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 40), st.integers(1, 20), st.integers(0, 2**64 - 1), st.randoms())
def test_murmur2_fixed_equals_scalar(w: int, n: int, seed: int, rnd: object) -> None:
    rng = np.random.default_rng(rnd.getrandbits(32))  # type: ignore[attr-defined]
    mat = rng.integers(0, 256, (n, w), dtype=np.uint8)
    got = murmur2_64_fixed(mat, seed)
    assert got.dtype == np.uint64
    assert got.tolist() == [murmur2_64(mat[i].tobytes(), seed) for i in range(n)]


def test_murmur2_fixed_on_encoded_int_keys() -> None:
    vals = np.arange(-50, 50, dtype=np.int64)
    keys = encode_keys([pa.array(vals)], [I64])
    view = keys_as_fixed(keys, 8)
    mat = view.view(np.uint8).reshape(-1, 8)
    got = murmur2_64_fixed(mat, 7)
    assert got.tolist() == [murmur2_64(encode_key([int(v)], [I64]), 7) for v in vals]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=100), min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_murmur3_equals_mmh3(keys: list[bytes], seed: int) -> None:
    arr = pa.array(keys, pa.binary())
    h1, h2 = murmur3_x64_128(arr, seed)
    expected = [mmh3.hash64(k, seed, signed=False) for k in keys]
    assert list(zip(h1.tolist(), h2.tolist(), strict=True)) == expected
    assert murmur3_x64_64(arr, seed).tolist() == [e[0] for e in expected]


def test_murmur3_all_lengths_and_layouts() -> None:
    rng = np.random.default_rng(5)
    keys = [rng.bytes(int(n)) for n in rng.integers(0, 101, 500)]
    keys += [bytes(range(n)) for n in range(101)]
    expected = [mmh3.hash64(k, 3, signed=False)[0] for k in keys]
    arr = pa.array(keys, pa.binary())
    assert murmur3_x64_64(arr, 3).tolist() == expected
    assert murmur3_x64_64(pa.array(keys, pa.large_binary()), 3).tolist() == expected
    assert murmur3_x64_64(arr.slice(7, 100), 3).tolist() == expected[7:107]
    chunked = pa.chunked_array([arr.slice(0, 10), arr.slice(10)])
    assert murmur3_x64_64(chunked, 3).tolist() == expected
    # Equal-length (fast path), sliced.
    fixed = pa.array([rng.bytes(12) for _ in range(50)], pa.binary())
    exp_fixed = [mmh3.hash64(k, 0, signed=False)[0] for k in fixed.to_pylist()]
    assert murmur3_x64_64(fixed.slice(3, 40)).tolist() == exp_fixed[3:43]
    # Strings hash as their UTF-8 bytes.
    s = pa.array(["", "é", "hello world, this is long"])
    assert murmur3_x64_64(s).tolist() == [
        mmh3.hash64(x.encode(), 0, signed=False)[0] for x in s.to_pylist()
    ]
    assert len(murmur3_x64_64(pa.array([], pa.binary()))) == 0
    with pytest.raises(ValueError):
        murmur3_x64_128(arr, -1)


@pytest.mark.parametrize("width", [8, 24, 40])
@pytest.mark.parametrize("start", [0, 1, 3])
def test_murmur3_a_one_word_tail_is_read_in_place(width: int, start: int) -> None:
    """Keys whose length leaves a tail of exactly 8 bytes (every encoded INT64 key) are
    hashed without padding, also from a slice that starts off an 8-byte boundary."""
    rng = np.random.default_rng(width + start)
    keys = [rng.bytes(width) for _ in range(3000)]
    arr = pa.array(keys, pa.binary()).slice(start)
    h1, h2 = murmur3_x64_128(arr, 11)
    expected = [mmh3.hash64(k, 11, signed=False) for k in keys[start:]]
    assert list(zip(h1.tolist(), h2.tolist(), strict=True)) == expected
    mixed = pa.array(keys[:50] + [b"", b"abc", rng.bytes(17)] * 5, pa.binary())  # by length
    m1, m2 = murmur3_x64_128(mixed, 11)
    want = [mmh3.hash64(k, 11, signed=False) for k in mixed.to_pylist()]
    assert list(zip(m1.tolist(), m2.tolist(), strict=True)) == want
