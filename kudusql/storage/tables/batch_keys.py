"""Vectorized work on arrays of encoded keys, for routing whole batches to partitions.

This module owns two batch primitives that partitioning needs and that loop over
columns, blocks or bounds but never over rows:

* ``murmur2_64_keys``: Kudu's MurmurHash64A of every key of a binary array, whatever the
  mix of key lengths (``kudusql.common.murmur`` hashes equal-length matrices);
* ``locate_in_ranges``: which of a list of sorted, disjoint ``[lower, upper)`` key ranges
  holds each key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.keys import (
    ArrowArray,
    all_lengths_equal,
    binary_layout,
    keys_as_fixed,
    single_array,
)
from kudusql.common.murmur import murmur2_64_fixed

__all__ = ["locate_in_ranges", "murmur2_64_keys"]

_FEW_BOUNDS = 16  # up to this many bounds, count by comparisons rather than a sort
# MurmurHash64A's multiplier and shift, and masks keeping the low 0..7 bytes of a word.
_MURMUR_M = 0xC6A4A7935BD1E995
_MURMUR_R = 47
_TAIL_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)], dtype=np.uint64)


def locate_in_ranges(
    keys: ArrowArray,
    lowers: Sequence[bytes],
    uppers: Sequence[bytes | None],
    width: int | None = None,
) -> np.ndarray:
    """For each encoded key, the index of the range ``[lowers[i], uppers[i])`` holding
    it, or -1 (int64 array).

    The ranges must be sorted and disjoint; a lower bound ``b""`` and an upper bound None
    are unbounded. ``width``, when every key has that fixed length (and every bound too,
    or is empty), enables numpy binary searches. The candidate for a key is the last
    range whose lower bound is <= the key, and the key is inside it iff exactly that many
    upper bounds are <= the key."""
    arr = single_array(keys)
    lows = list(lowers)
    ups = [u for u in uppers if u is not None]
    if width is not None:
        # Fixed width: numpy binary searches (every bound is full width, or b"" = lowest).
        mat = keys_as_fixed(arr, width).view(np.uint8).reshape(len(arr), width)
        keys_s = _fixed_sort_keys(mat)
        pos = np.searchsorted(_fixed_sort_keys(_bound_matrix(lows, width)), keys_s, "right") - 1
        above = np.searchsorted(_fixed_sort_keys(_bound_matrix(ups, width)), keys_s, "right")
    else:
        pos = _count_le(lows, arr) - 1
        above = _count_le(ups, arr)
    out: np.ndarray = np.where((pos >= 0) & (above == pos), pos, -1).astype(np.int64)
    return out


def _bound_matrix(bounds: list[bytes], width: int) -> np.ndarray:
    joined = b"".join(b.ljust(width, b"\x00") for b in bounds)
    return np.frombuffer(joined, dtype=np.uint8).reshape(len(bounds), width)


def _fixed_sort_keys(mat: np.ndarray) -> np.ndarray:
    """The rows of an (n, w) uint8 matrix as numpy values that sort like the bytes:
    zero-padded big-endian uint64 up to 8 bytes, byte strings beyond."""
    n, w = mat.shape
    if w <= 8:
        pad = np.zeros((n, 8), dtype=np.uint8)
        pad[:, :w] = mat
        return pad.view(">u8").reshape(n)
    return np.ascontiguousarray(mat).view(f"S{w}").reshape(n)


def _count_le(bounds: list[bytes], arr: pa.Array[Any]) -> np.ndarray:
    """For each key of ``arr``, how many of the sorted ``bounds`` are <= it.

    A few bounds: one Arrow comparison pass per bound. Many: one stable Arrow sort of
    bounds and keys together, bounds first, so a bound equal to a key sorts before it."""
    n, m = len(arr), len(bounds)
    out = np.zeros(n, dtype=np.int64)
    if m == 0 or n == 0:
        return out
    if m <= _FEW_BOUNDS:
        for bound in bounds:
            ge = pc.greater_equal(arr, pa.scalar(bound, arr.type))
            out += np.asarray(ge.to_numpy(zero_copy_only=False), dtype=np.int64)
        return out
    combined = pa.concat_arrays([pa.array(bounds, type=arr.type), arr])
    order = np.asarray(pc.sort_indices(combined), dtype=np.int64)
    is_bound = order < m
    seen = np.cumsum(is_bound)
    is_key = ~is_bound
    out[order[is_key] - m] = seen[is_key]
    return out


def murmur2_64_keys(keys: ArrowArray, seed: int = 0) -> np.ndarray:
    """MurmurHash64A (``murmur2_64``) of each binary key as uint64, keys of any lengths.

    Equal lengths hash straight from the Arrow buffer. Otherwise the bytes are read
    through a view of every (unaligned) 8-byte window of a zero-padded copy, so block
    ``b`` of every key that has one is a single gather; the loop runs over block numbers,
    not rows."""
    arr = single_array(keys)
    n = len(arr)
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    raw_offsets, values = binary_layout(arr)
    offsets = raw_offsets.astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    width = int(offsets[1]) - lo
    if all_lengths_equal(offsets, width):
        return murmur2_64_fixed(values[lo : lo + n * width].reshape(n, width), seed)
    buf = np.zeros(hi - lo + 8, dtype=np.uint8)
    buf[: hi - lo] = values[lo:hi]
    words = np.ndarray(shape=(hi - lo + 1,), dtype="<u8", buffer=buf.data, strides=(1,))
    starts = offsets[:-1] - lo
    lengths = np.diff(offsets)
    m = np.uint64(_MURMUR_M)
    r = np.uint64(_MURMUR_R)
    h = np.uint64(seed) ^ (lengths.astype(np.uint64) * m)
    nblocks = lengths >> 3
    for b in range(int(nblocks.max())):
        rows = np.flatnonzero(nblocks > b)
        k = words[starts[rows] + 8 * b] * m
        k ^= k >> r
        k *= m
        h[rows] = (h[rows] ^ k) * m
    rem = lengths & 7
    rows = np.flatnonzero(rem)
    tail = words[starts[rows] + 8 * nblocks[rows]] & _TAIL_MASKS[rem[rows]]
    h[rows] = (h[rows] ^ tail) * m
    h ^= h >> r
    h *= m
    h ^= h >> r
    return h
