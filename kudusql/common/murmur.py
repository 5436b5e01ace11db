"""Hash functions: Kudu's MurmurHash64A and MurmurHash3_x64_128, scalar and vectorized.

* ``murmur2_64`` / ``murmur2_64_fixed``: MurmurHash64A (Austin Appleby's 64-bit
  MurmurHash2), which Kudu uses for hash partitioning: bucket =
  ``murmur2_64(encode_keys(dimension columns), seed) % num_buckets``. ``mmh3`` does not
  provide it. The vectorized form hashes an (n, w) uint8 matrix of equal-length inputs.
* ``murmur3_x64_128`` / ``murmur3_x64_64``: MurmurHash3_x64_128, bit-identical to
  ``mmh3.hash64(key, seed, signed=False)``; used by the bloom filters. Keys are grouped by
  length and each equal-length group is hashed as one numpy matrix.

All vectorized arithmetic is numpy uint64 with wrap-around (numpy does not warn on
array-integer overflow).
"""

from __future__ import annotations

import struct

import numpy as np

from kudusql.common.keys import ArrowArray, all_lengths_equal, binary_layout, single_array

__all__ = ["murmur2_64", "murmur2_64_fixed", "murmur3_x64_64", "murmur3_x64_128"]

_MASK64 = (1 << 64) - 1
_M2 = 0xC6A4A7935BD1E995
_R2 = 47

_U = np.uint64
_M2_U = _U(_M2)
_R2_U = _U(_R2)
_C1 = _U(0x87C37B91114253D5)
_C2 = _U(0x4CF5AD432745937F)
_F1 = _U(0xFF51AFD7ED558CCD)
_F2 = _U(0xC4CEB9FE1A85EC53)
_FIVE = _U(5)
_N1 = _U(0x52DCE729)
_N2 = _U(0x38495AB5)
_S33 = _U(33)


# ------------------------------------------------------------------------------------------
# MurmurHash64A
# ------------------------------------------------------------------------------------------
def murmur2_64(data: bytes, seed: int = 0) -> int:
    """Kudu's MurmurHash2_64 (MurmurHash64A) of ``data``; unsigned 64-bit result."""
    m = _M2
    n = len(data)
    h = (seed ^ (n * m)) & _MASK64
    nblocks = n >> 3
    if nblocks:
        for k in struct.unpack_from(f"<{nblocks}Q", data):
            k = (k * m) & _MASK64
            k ^= k >> _R2
            k = (k * m) & _MASK64
            h ^= k
            h = (h * m) & _MASK64
    tail = data[nblocks * 8 :]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * m) & _MASK64
    h ^= h >> _R2
    h = (h * m) & _MASK64
    h ^= h >> _R2
    return h


def murmur2_64_fixed(matrix: np.ndarray, seed: int = 0) -> np.ndarray:
    """``murmur2_64`` of every row of an (n, w) uint8 matrix; returns uint64[n]."""
    mat = np.asarray(matrix, dtype=np.uint8)
    if mat.ndim != 2:
        raise ValueError("murmur2_64_fixed expects an (n, w) uint8 matrix")
    n, w = mat.shape
    h = np.full(n, (seed ^ (w * _M2)) & _MASK64, dtype=np.uint64)
    nblocks = w >> 3
    if nblocks:
        words = np.ascontiguousarray(mat[:, : nblocks * 8]).view("<u8")
        for b in range(nblocks):
            k = words[:, b] * _M2_U
            k ^= k >> _R2_U
            k *= _M2_U
            h ^= k
            h *= _M2_U
    rem = w & 7
    if rem:
        pad = np.zeros((n, 8), dtype=np.uint8)
        pad[:, :rem] = mat[:, nblocks * 8 :]
        h ^= pad.view("<u8")[:, 0]
        h *= _M2_U
    h ^= h >> _R2_U
    h *= _M2_U
    h ^= h >> _R2_U
    return h.astype(np.uint64, copy=False)


# ------------------------------------------------------------------------------------------
# MurmurHash3_x64_128
# ------------------------------------------------------------------------------------------
_CHUNK_ROWS = 1 << 16  # rows hashed per numpy pass: keeps temporaries in cache


def _rotl(x: np.ndarray, r: int, scratch: np.ndarray) -> None:
    """In place: x = rotate_left(x, r) (64-bit)."""
    np.right_shift(x, _U(64 - r), out=scratch)
    np.left_shift(x, _U(r), out=x)
    x |= scratch


def _fmix(k: np.ndarray, scratch: np.ndarray) -> None:
    for mult in (_F1, _F2):
        np.right_shift(k, _S33, out=scratch)
        k ^= scratch
        k *= mult
    np.right_shift(k, _S33, out=scratch)
    k ^= scratch


def _mix_k(
    src: np.ndarray,
    ca: np.uint64,
    r: int,
    cb: np.uint64,
    h: np.ndarray,
    k: np.ndarray,
    t: np.ndarray,
) -> None:
    """h ^= rotl(src * ca, r) * cb, using k and t as scratch."""
    np.multiply(src, ca, out=k)
    _rotl(k, r, t)
    k *= cb
    h ^= k


def _murmur3_chunk(mat: np.ndarray, seed: int, h1: np.ndarray, h2: np.ndarray) -> None:
    """MurmurHash3_x64_128 of every row of an (n, L) uint8 matrix, into h1 and h2."""
    n, length = mat.shape
    h1.fill(seed)
    h2.fill(seed)
    k = np.empty(n, dtype=np.uint64)
    t = np.empty(n, dtype=np.uint64)

    nblocks = length >> 4
    if nblocks:
        body = mat[:, : nblocks * 16]
        if not body.flags.c_contiguous:
            body = np.ascontiguousarray(body)
        words = body.view("<u8")
        for b in range(nblocks):
            _mix_k(words[:, 2 * b], _C1, 31, _C2, h1, k, t)
            _rotl(h1, 27, t)
            h1 += h2
            h1 *= _FIVE
            h1 += _N1
            _mix_k(words[:, 2 * b + 1], _C2, 33, _C1, h2, k, t)
            _rotl(h2, 31, t)
            h2 += h1
            h2 *= _FIVE
            h2 += _N2
    rem = length & 15
    tail_bytes = mat[:, nblocks * 16 :]
    if rem == 8 and tail_bytes.strides[1] == 1:
        # A tail of exactly one word (every 8-byte key): read in place. Padding copied
        # 16 bytes a key, 40% of hashing 800k keys (a flush's or a merge's bloom filter).
        _mix_k(tail_bytes.view("<u8")[:, 0], _C1, 31, _C2, h1, k, t)
    elif rem:
        pad = np.zeros((n, 16), dtype=np.uint8)
        pad[:, :rem] = tail_bytes
        tail = pad.view("<u8")
        if rem > 8:
            _mix_k(tail[:, 1], _C2, 33, _C1, h2, k, t)
        _mix_k(tail[:, 0], _C1, 31, _C2, h1, k, t)
    ln = _U(length)
    h1 ^= ln
    h2 ^= ln
    h1 += h2
    h2 += h1
    _fmix(h1, t)
    _fmix(h2, t)
    h1 += h2
    h2 += h1


def _murmur3_matrix(mat: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """MurmurHash3_x64_128 of every row of an (n, L) uint8 matrix, in cache-sized chunks."""
    n = mat.shape[0]
    h1 = np.empty(n, dtype=np.uint64)
    h2 = np.empty(n, dtype=np.uint64)
    for s in range(0, n, _CHUNK_ROWS):
        e = min(n, s + _CHUNK_ROWS)
        _murmur3_chunk(mat[s:e], seed, h1[s:e], h2[s:e])
    return h1, h2


def murmur3_x64_128(keys: ArrowArray, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """MurmurHash3_x64_128 of each key as (h1, h2) uint64 arrays.

    Equal to ``mmh3.hash64(key, seed, signed=False)`` per key. ``keys`` is a binary or
    string array (any offset width, sliced or chunked, no nulls); ``seed`` is 0..2**32-1.
    """
    if not 0 <= seed <= 0xFFFFFFFF:
        raise ValueError(f"murmur3 seed must be a 32-bit unsigned int, got {seed}")
    arr = single_array(keys)
    n = len(arr)
    if n == 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64)
    offsets, values = binary_layout(arr)
    lo = int(offsets[0])
    first = int(offsets[1]) - lo
    if all_lengths_equal(offsets, first):
        # The common case: fixed-width keys, hashed straight from the Arrow buffer.
        mat = values[lo : lo + n * first].reshape(n, first)
        return _murmur3_matrix(mat, seed)
    h1 = np.empty(n, dtype=np.uint64)
    h2 = np.empty(n, dtype=np.uint64)
    lengths = np.diff(offsets)
    order = np.argsort(lengths, kind="stable")
    sorted_lens = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lens)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [n]))
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        idx = order[s:e]
        length = int(sorted_lens[s])
        if length:
            gather = offsets[idx][:, None] + np.arange(length, dtype=np.int64)
            mat = values[gather]
        else:
            mat = np.zeros((len(idx), 0), dtype=np.uint8)
        a, b = _murmur3_matrix(mat, seed)
        h1[idx] = a
        h2[idx] = b
    return h1, h2


def murmur3_x64_64(keys: ArrowArray, seed: int = 0) -> np.ndarray:
    """The first 64 bits of MurmurHash3_x64_128 of each key (``mmh3.hash64(...)[0]``)."""
    return murmur3_x64_128(keys, seed)[0]
