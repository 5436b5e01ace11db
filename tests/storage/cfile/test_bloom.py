"""Tests for kudusql.storage.cfile.bloom: no false negatives, fp rate, serialization, in
both layouts (the word layout ``build`` writes, and the classic one files written before
it still hold)."""

from __future__ import annotations

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kudusql.common.errors import CorruptionError, ProgrammingError
from kudusql.common.murmur import murmur3_x64_128
from kudusql.storage.cfile.bloom import (
    BLOOM_CLASSIC,
    BLOOM_VERSION,
    BLOOM_WORD,
    BloomFilter,
    BloomFilterSet,
    _word_fpr,
)

LAYOUTS = [BLOOM_WORD, BLOOM_CLASSIC]


def _random_keys(n: int, width: int, seed: int) -> pa.Array:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, n * width, dtype=np.uint8)
    offsets = np.arange(n + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=40), max_size=60),
    st.sampled_from([0.5, 0.01, 0.001]),
    st.sampled_from(LAYOUTS),
)
def test_no_false_negatives(keys: list[bytes], fp: float, version: int) -> None:
    arr = pa.array(keys, pa.binary())
    bf = BloomFilter.build(arr, fp, version)
    assert bf.version == version
    assert bool(np.all(bf.may_contain(arr)))
    assert all(bf.may_contain_one(k) for k in keys)


@pytest.mark.parametrize("version", LAYOUTS)
def test_fp_rate_near_target(version: int) -> None:
    n = 100_000
    keys = _random_keys(n, 12, 1)
    for target in (0.01, 0.005, 0.001):
        bf = BloomFilter.build(keys, target, version)
        assert bool(np.all(bf.may_contain(keys)))
        others = _random_keys(n, 12, 2)
        rate = float(np.mean(bf.may_contain(others)))
        assert rate < 2 * target, (target, rate)
        assert rate > target / 4, (target, rate)


def test_word_layout_rate_model_matches_a_simulation() -> None:
    """The sizing's model of the word layout (Poisson keys per word) against filters
    built and probed: within 20% at the sizes the default rate picks."""
    n = 200_000
    keys = _random_keys(n, 10, 11)
    others = _random_keys(n, 10, 12)
    for bpk, k in ((15, 6), (12, 6), (24, 8)):
        num_bits = n * bpk // 64 * 64
        words = np.zeros(num_bits // 64, dtype=np.uint64)
        for key in keys.to_pylist()[:n]:
            h1, h2 = mmh3.hash64(key, 0, signed=False)
            words[h1 % len(words)] |= np.uint64(_mask(h2, k))
        bf = BloomFilter(words.astype("<u8").tobytes(), num_bits, k, 0, version=BLOOM_WORD)
        assert bool(np.all(bf.may_contain(keys)))
        measured = float(np.mean(bf.may_contain(others)))
        assert abs(measured - _word_fpr(bpk, k)) < 0.2 * _word_fpr(bpk, k), (bpk, k, measured)


def _mask(h2: int, k: int) -> int:
    return sum({1 << ((h2 >> (6 * i)) & 63) for i in range(k)})


def test_sizing() -> None:
    classic = BloomFilter.build(_random_keys(1000, 8, 3), 0.001, BLOOM_CLASSIC)
    assert classic.num_bits % 64 == 0
    assert 14_000 < classic.num_bits < 14_500  # 1000 * 1.44 * log2(1000)
    assert classic.num_hashes == 10
    word = BloomFilter.build(_random_keys(1000, 8, 3), 0.005)
    assert word.version == BLOOM_VERSION == BLOOM_WORD
    assert (word.num_bits, word.num_hashes) == (15_040, 6)  # 15 bits per key, 64-bit words
    for version in LAYOUTS:
        empty = BloomFilter.build(pa.array([], pa.binary()), 0.005, version)
        assert empty.num_bits == 64
        assert not empty.may_contain_one(b"x")
        assert empty.may_contain(pa.array([b"x"])).tolist() == [False]
        with pytest.raises(ProgrammingError):
            BloomFilter.build(pa.array([b"a"]), 0.0, version)
    # A rate the word layout cannot reach: its best at 64 bits per key.
    tiny = BloomFilter.build(_random_keys(100, 8, 3), 1e-9)
    assert tiny.num_bits == 6400 and 1 <= tiny.num_hashes <= 10
    with pytest.raises(ProgrammingError, match="version"):
        BloomFilter.build(pa.array([b"a"]), 0.01, 3)


def test_word_layout_bits_as_documented() -> None:
    """BLOOM_FORMAT.md's word layout, computed by hand: one key sets bits
    ``(h2 >> 6i) & 63`` of word ``h1 mod (m/64)``, nothing else."""
    key = b"\x00\x00\x00\x07kudu"
    bf = BloomFilter.build(pa.array([key] * 3 + [b"other"], pa.binary()), 0.5)
    h1, h2 = mmh3.hash64(key, 0, signed=False)
    words = np.frombuffer(bf.to_bytes()[24:-4], dtype="<u8")
    nwords = bf.num_bits // 64
    assert len(words) == nwords
    assert int(words[h1 % nwords]) & _mask(h2, bf.num_hashes) == _mask(h2, bf.num_hashes)
    o1, o2 = mmh3.hash64(b"other", 0, signed=False)
    expect = np.zeros(nwords, dtype=np.uint64)
    expect[h1 % nwords] |= np.uint64(_mask(h2, bf.num_hashes))
    expect[o1 % nwords] |= np.uint64(_mask(o2, bf.num_hashes))
    assert words.tolist() == expect.tolist()


@pytest.mark.parametrize("version", LAYOUTS)
def test_vectorized_equals_scalar(version: int) -> None:
    keys = _random_keys(2000, 9, 4)
    bf = BloomFilter.build(keys, 0.2, version)
    rng = np.random.default_rng(5)
    probes = [rng.bytes(int(n)) for n in rng.integers(0, 30, 3000)]
    arr = pa.array(probes, pa.binary())
    vec = bf.may_contain(arr).tolist()
    assert vec == [bf.may_contain_one(p) for p in probes]
    assert any(vec) and not all(vec)
    # Sliced and chunked probe arrays.
    assert bf.may_contain(arr.slice(10, 50)).tolist() == vec[10:60]
    assert bf.may_contain(pa.chunked_array([arr.slice(0, 5), arr.slice(5)])).tolist() == vec


@pytest.mark.parametrize("version", LAYOUTS)
def test_round_trip(version: int) -> None:
    keys = _random_keys(500, 16, 6)
    bf = BloomFilter.build(keys, 0.01, version)
    data = bf.to_bytes()
    assert data[:8] == b"KSQBLOOM"
    assert int.from_bytes(data[8:10], "little") == version
    assert len(data) == 24 + bf.num_bits // 8 + 4
    bf2 = BloomFilter.from_bytes(data, "rs1.bloom")
    assert (bf2.num_bits, bf2.num_hashes, bf2.version) == (bf.num_bits, bf.num_hashes, version)
    assert bf2.to_bytes() == data
    probes = _random_keys(1000, 16, 7)
    assert bf2.may_contain(probes).tolist() == bf.may_contain(probes).tolist()
    assert BloomFilter.from_bytes(memoryview(data), "x").to_bytes() == data  # type: ignore[arg-type]


@pytest.mark.parametrize("version", LAYOUTS)
def test_corruption_detected(version: int) -> None:
    data = BloomFilter.build(_random_keys(300, 8, 8), 0.01, version).to_bytes()
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


def _with_header(data: bytes, **fields: int) -> bytes:
    """``data`` with header fields replaced and the CRC made right again."""
    from kudusql.storage.cfile.bloom import _CRC, _HEADER
    from kudusql.storage.fs.checksum import crc32

    magic, version, algo, k, seed, num_bits = _HEADER.unpack_from(data, 0)
    vals = {"version": version, "k": k, "num_bits": num_bits} | fields
    head = _HEADER.pack(magic, vals["version"], algo, vals["k"], seed, vals["num_bits"])
    body = head + data[_HEADER.size : -_CRC.size]
    return body + _CRC.pack(crc32(body))


def test_header_checks_that_the_checksum_cannot_catch() -> None:
    """A header a writer got wrong (its CRC right) is still refused, naming the field."""
    word = BloomFilter.build(_random_keys(300, 8, 8), 0.01).to_bytes()
    for bad, what in (
        (_with_header(word, version=3), "version"),
        (_with_header(word, k=11), "num_hashes"),  # the word layout has 10 at most
        (_with_header(word, k=0), "num_hashes"),
    ):
        with pytest.raises(CorruptionError, match=what):
            BloomFilter.from_bytes(bad, "rs9.bloom")
    # A classic filter's bitmap may be any whole number of bytes; a word filter's not.
    classic = BloomFilter(b"\xff" * 3, 24, 2, 0, version=BLOOM_CLASSIC).to_bytes()
    assert BloomFilter.from_bytes(classic, "c").may_contain_one(b"x")
    with pytest.raises(CorruptionError, match="num_bits"):
        BloomFilter.from_bytes(_with_header(classic, version=BLOOM_WORD), "rs9.bloom")


@pytest.mark.parametrize("version", LAYOUTS)
def test_chunked_processing_matches_scalar(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from kudusql.storage.cfile import bloom

    monkeypatch.setattr(bloom, "_CHUNK_KEYS", 37)
    keys = _random_keys(1000, 6, 9)
    bf = BloomFilter.build(keys, 0.3, version)
    assert bool(np.all(bf.may_contain(keys)))
    probes = _random_keys(1000, 6, 10)
    vec = bf.may_contain(probes).tolist()
    assert vec == [bf.may_contain_one(p) for p in probes.to_pylist()]
    monkeypatch.setattr(bloom, "_CHUNK_KEYS", 1 << 18)
    assert BloomFilter.build(keys, 0.3, version).to_bytes() == bf.to_bytes()


_MIXED = [(0.01, BLOOM_WORD), (0.01, BLOOM_CLASSIC), (0.2, BLOOM_WORD), (0.001, BLOOM_WORD)]
_ONE_K = [(0.01, BLOOM_WORD)] * 3


@pytest.mark.parametrize(
    ("specs", "word_ks", "pairs"),
    [
        # A tablet written before the word layout and compacted in part holds both
        # layouts, and word filters of different k.
        (_MIXED, 3, 6000),
        # One k: few pairs mask only the keys they name, many mask every key once.
        (_ONE_K, 1, 40),
        (_ONE_K, 1, 6000),
    ],
)
def test_a_set_answers_each_pair_like_its_filter(
    specs: list[tuple[float, int]], word_ks: int, pairs: int
) -> None:
    """Random (key, filter) pairs over a batch of 4,000 keys, hashed per key or per
    pair: each pair gets the answer of its filter alone."""
    filters = [
        BloomFilter.build(_random_keys(500, 8, 20 + i), fp, version)
        for i, (fp, version) in enumerate(specs)
    ]
    assert len({f.num_hashes for f in filters if f.version == BLOOM_WORD}) == word_ks
    probes = pa.concat_arrays([_random_keys(500, 8, 20 + i) for i in range(len(specs))])
    probes = pa.concat_arrays([probes, _random_keys(4000 - len(probes), 8, 99)])
    h1, h2 = murmur3_x64_128(probes, 0)
    rng = np.random.default_rng(3)
    key = rng.integers(0, len(probes), pairs)
    which = rng.integers(0, len(filters), pairs)
    want = [
        bool(filters[w].may_contain(probes.slice(k, 1))[0]) for k, w in zip(key, which, strict=True)
    ]
    packed = BloomFilterSet(filters)
    assert packed.may_contain_hashes(which, h1, h2, key).tolist() == want
    assert packed.may_contain_hashes(which, h1[key], h2[key]).tolist() == want
    assert any(want) and not all(want)


def test_word_filters_packed_after_a_bitmap_of_odd_bytes_answer_like_each_filter() -> None:
    """A classic filter may be any whole number of bytes (24 bits here): packed before
    word filters, it must not move them off the 8-byte boundary their words are read
    at (without the padding, nearly every member key of the word filters was missed)."""
    from kudusql.storage.cfile.bloom import BloomArena

    odd = BloomFilter(b"\x5a" * 3, 24, 2, 0, version=BLOOM_CLASSIC)
    members = [_random_keys(300, 8, 40 + i) for i in range(3)]
    words = [BloomFilter.build(m, 0.01) for m in members]
    filters = [odd, *words, odd]
    probes = pa.concat_arrays(members)
    h1, h2 = murmur3_x64_128(probes, 0)
    n = len(probes)
    which = np.repeat(np.arange(len(filters), dtype=np.int64), n)
    key = np.tile(np.arange(n, dtype=np.int64), len(filters))
    want = np.concatenate([f.may_contain(probes) for f in filters]).tolist()
    for packed in (BloomFilterSet(filters), BloomFilterSet(filters, BloomArena(min_bytes=64))):
        assert packed.may_contain_hashes(which, h1, h2, key).tolist() == want
    assert all(want[n : 2 * n][:300]) and all(want[2 * n : 3 * n][300:600])
