"""Tests for kudusql.storage.cfile.bloom: no false negatives, fp rate, serialization."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.common.errors import CorruptionError, ProgrammingError
from kudusql.storage.cfile.bloom import BloomFilter


def _random_keys(n: int, width: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, n * width, dtype=np.uint8)
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=60), st.sampled_from([0.5, 0.01, 0.001]))
def test_no_false_negatives(keys: list[bytes], fp: float) -> None:
    arr = pa.array(keys, pa.binary())
    bf = BloomFilter.build(arr, fp)
    assert bool(np.all(bf.may_contain(arr)))
    assert all(bf.may_contain_one(k) for k in keys)


def test_fp_rate_near_target() -> None:
    n = 100_000
    keys = _random_keys(n, 12, 1)
    for target in (0.01, 0.001):
        bf = BloomFilter.build(keys, target)
        assert bool(np.all(bf.may_contain(keys)))
        others = _random_keys(n, 12, 2)
        rate = float(np.mean(bf.may_contain(others)))
        assert rate < 2 * target, (target, rate)
        assert rate > target / 4, (target, rate)


def test_sizing() -> None:
    bf = BloomFilter.build(_random_keys(1000, 8, 3), 0.001)
    assert bf.num_bits % 64 == 0
    assert 14_000 < bf.num_bits < 14_500  # 1000 * 1.44 * log2(1000)
    assert bf.num_hashes == 10
    empty = BloomFilter.build(pa.array([], pa.binary()))
    assert empty.num_bits == 64
    assert not empty.may_contain_one(b"x")
    assert empty.may_contain(pa.array([b"x"])).tolist() == [False]
    with pytest.raises(ProgrammingError):
        BloomFilter.build(pa.array([b"a"]), 0.0)


def test_vectorized_equals_scalar() -> None:
    keys = _random_keys(2000, 9, 4)
    bf = BloomFilter.build(keys, 0.2)
    rng = np.random.default_rng(5)
    probes = [rng.bytes(int(n)) for n in rng.integers(0, 30, 3000)]
    arr = pa.array(probes, pa.binary())
    vec = bf.may_contain(arr).tolist()
    assert vec == [bf.may_contain_one(p) for p in probes]
    assert any(vec) and not all(vec)
    # Sliced and chunked probe arrays.
    assert bf.may_contain(arr.slice(10, 50)).tolist() == vec[10:60]
    assert bf.may_contain(pa.chunked_array([arr.slice(0, 5), arr.slice(5)])).tolist() == vec


def test_round_trip() -> None:
    keys = _random_keys(500, 16, 6)
    bf = BloomFilter.build(keys, 0.01)
    data = bf.to_bytes()
    assert data[:8] == b"KSQBLOOM"
    assert len(data) == 24 + bf.num_bits // 8 + 4
    bf2 = BloomFilter.from_bytes(data, "rs1.bloom")
    assert (bf2.num_bits, bf2.num_hashes) == (bf.num_bits, bf.num_hashes)
    assert bf2.to_bytes() == data
    probes = _random_keys(1000, 16, 7)
    assert bf2.may_contain(probes).tolist() == bf.may_contain(probes).tolist()
    assert BloomFilter.from_bytes(memoryview(data), "x").to_bytes() == data  # type: ignore[arg-type]


def test_corruption_detected() -> None:
    data = BloomFilter.build(_random_keys(300, 8, 8), 0.01).to_bytes()
    for i in range(0, len(data), 7):
        bad = bytearray(data)
        bad[i] ^= 0x10
        with pytest.raises(CorruptionError) as ei:
            BloomFilter.from_bytes(bytes(bad), "/tmp/t/rs7.bloom")
        assert ei.value.path == "/tmp/t/rs7.bloom"
        assert "rs7.bloom" in str(ei.value)
    for cut in (0, 5, 27, len(data) - 1):
        with pytest.raises(CorruptionError, match=r"rs7\.bloom"):
            BloomFilter.from_bytes(data[:cut], "rs7.bloom")
    with pytest.raises(CorruptionError) as ei:
        BloomFilter.from_bytes(data + b"\x00", "f", base_offset=100)
    assert ei.value.offset >= 100


def test_chunked_processing_matches_scalar(monkeypatch: pytest.MonkeyPatch) -> None:
    from kudusql.storage.cfile import bloom

    monkeypatch.setattr(bloom, "_CHUNK_KEYS", 37)
    keys = _random_keys(1000, 6, 9)
    bf = BloomFilter.build(keys, 0.3)
    assert bool(np.all(bf.may_contain(keys)))
    probes = _random_keys(1000, 6, 10)
    vec = bf.may_contain(probes).tolist()
    assert vec == [bf.may_contain_one(p) for p in probes.to_pylist()]
    monkeypatch.setattr(bloom, "_CHUNK_KEYS", 1 << 18)
    assert BloomFilter.build(keys, 0.3).to_bytes() == bf.to_bytes()
