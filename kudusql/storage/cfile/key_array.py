"""A sorted fixed-width key file as one numpy array, for lookups of many keys at once.

``CFileReader.find_keys`` looks keys up page by page through the page index: right for a
few keys, but a batch of random keys touches every page of a large rowset, and then the
per-page work (a search structure per page, a numpy search per page) grows with the
file, not with the batch. When every value of a sorted, NULL-free binary file has the
same width (the primary-key file of any table whose key columns are fixed-width), the
whole file fits one sorted numpy array: one ``searchsorted`` answers a whole batch.

Representation: widths 8 and 4 become native ``uint64`` / ``uint32`` (read big-endian,
so numeric order is memcmp order, and searches compare machine words); other widths
are ``S{w}`` (with one width, numpy's NUL-stripping order is memcmp order). The array
lives in the block cache like a page (charged its bytes, evicted by the same LRU), so
its memory is bounded by the cache, not held per reader.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from kudusql.storage.cfile.encodings import np_buffer, var_parts

#: The block-cache "page number" the whole-file array is kept under.
WHOLE_FILE_ENTRY = -1
#: Key widths held as native unsigned machine words (``sortable``).
WORD_WIDTHS = (4, 8)


def fixed_width(arr: pa.Array[Any]) -> int:
    """The common width of the values of a binary array, or -1 if they differ (or none)."""
    n = len(arr)
    if n == 0:
        return -1
    offs, _ = var_parts(arr)
    w = int(offs[-1]) // n
    if w <= 0 or int(offs[-1]) != n * w or not bool(np.all(np.diff(offs) == w)):
        return -1
    return w


def sortable(data: Any, width: int, count: int) -> np.ndarray:
    """``count`` values of ``width`` bytes each, as an array whose order is memcmp order."""
    if width == 8:
        return np.frombuffer(data, dtype=">u8", count=count).astype(np.uint64)
    if width == 4:
        return np.frombuffer(data, dtype=">u4", count=count).astype(np.uint32)
    return np.frombuffer(data, dtype=f"S{width}", count=count)


def to_raw(values: np.ndarray, width: int) -> np.ndarray:
    """Inverse of ``sortable``: the values as ``S{width}`` strings of their bytes."""
    if width in WORD_WIDTHS:
        return np.ascontiguousarray(values, dtype=f">u{width}").view(f"S{width}")
    return values


def as_binary(values: np.ndarray, width: int) -> pa.Array[Any]:
    """Inverse of ``sortable`` as a (variable-width) binary Arrow array: each value as
    its ``width`` encoded bytes, the form key columns take in a rowset."""
    raw = to_raw(values, width)
    offsets = np.arange(0, (len(raw) + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), len(raw), [None, np_buffer(offsets), np_buffer(raw)])


def _bound(key: bytes, width: int) -> Any:
    """A key of exactly ``width`` bytes in the representation of ``sortable``."""
    if width == 8:
        return np.uint64(int.from_bytes(key, "big"))
    if width == 4:
        return np.uint32(int.from_bytes(key, "big"))
    return np.array(key, dtype=f"S{width}")


def first_at_least(keys: np.ndarray, width: int, lo: bytes) -> int:
    """Index of the first of the sorted ``width``-byte ``keys`` that is >= ``lo`` in
    memcmp order (``lo`` may have any length)."""
    if len(lo) > width:  # a key equal to lo[:width] is a proper prefix of lo: smaller
        return int(np.searchsorted(keys, _bound(lo[:width], width), "right"))
    # lo padded with NULs is the smallest width-byte string >= lo
    return int(np.searchsorted(keys, _bound(lo.ljust(width, b"\x00"), width), "left"))


def first_above(keys: np.ndarray, width: int, hi: bytes) -> int:
    """Index of the first of the sorted ``width``-byte ``keys`` that is > ``hi``."""
    if len(hi) >= width:  # k <= hi  <=>  k <= hi[:width]
        return int(np.searchsorted(keys, _bound(hi[:width], width), "right"))
    # k <= hi  <=>  k < hi padded with NULs (a longer string with prefix hi is larger)
    return int(np.searchsorted(keys, _bound(hi.ljust(width, b"\x00"), width), "left"))


def build(pages: list[pa.Array[Any]]) -> tuple[np.ndarray, int] | None:
    """(sorted array, width) of the values of a key file's pages, or None when they do
    not all have one width."""
    widths = {fixed_width(p) for p in pages if len(p)}
    if len(widths) != 1 or -1 in widths:
        return None
    (w,) = widths
    parts = [sortable(var_parts(p)[1], w, len(p)) for p in pages if len(p)]
    return np.concatenate(parts), w


def to_arrow(keys: np.ndarray, width: int) -> pa.Array[Any]:
    """The array as an Arrow array (zero-copy), so the block cache can hold and charge it."""
    if width in (4, 8):
        out: pa.Array[Any] = pa.array(keys)
        return out
    buf = pa.py_buffer(np.ascontiguousarray(keys).tobytes())
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(keys), [None, buf])


def from_arrow(arr: pa.Array[Any]) -> tuple[np.ndarray, int]:
    """Inverse of ``to_arrow``."""
    if pa.types.is_fixed_size_binary(arr.type):
        w = arr.type.byte_width
        data = arr.buffers()[1]
        assert data is not None
        return np.frombuffer(memoryview(data), f"S{w}", len(arr), arr.offset * w), w
    return arr.to_numpy(zero_copy_only=True), arr.type.bit_width // 8


def search(whole: np.ndarray, probes: np.ndarray) -> np.ndarray:
    """Position of each probe in the sorted ``whole``, -1 where it is absent."""
    n = len(whole)
    pos = np.searchsorted(whole, probes, "left")
    if n == 0:
        return np.full(len(probes), -1, dtype=np.int64)
    ok = pos < n
    ok &= whole[np.minimum(pos, n - 1)] == probes
    return np.where(ok, pos, -1).astype(np.int64, copy=False)


def search_segments(
    buf: np.ndarray, lo: np.ndarray, n: np.ndarray, probes: np.ndarray
) -> np.ndarray:
    """Per probe j, its position (into ``buf``) in the sorted segment
    ``buf[lo[j] : lo[j] + n[j]]``, -1 where it is absent.

    Many segments searched at once, where ``searchsorted`` takes one sorted array: each
    probe finds the last of its segment's values below it by binary lifting (steps of
    halving powers of two, one numpy pass per step for all probes), so the numpy calls
    grow with the log of the longest segment, not with the number of segments. A step's
    candidate is clamped to the segment's last value: past the end it compares as that
    value, which is below the probe only if every value is, and then the probe is absent
    however far it moves."""
    out = np.full(len(probes), -1, dtype=np.int64)
    longest = int(n.max(initial=0))
    if not len(buf) or longest == 0:
        return out
    lo = lo.astype(np.int64, copy=False)
    last = lo + n.astype(np.int64, copy=False) - 1  # the segment's last value (lo - 1: empty)
    at = lo - 1  # the last value known to be below the probe (lo - 1: none yet)
    cand = np.empty_like(at)
    step = 1 << (longest.bit_length() - 1)
    while step:
        np.add(at, step, out=cand)
        np.minimum(cand, last, out=cand)
        below = buf.take(cand, mode="clip") < probes
        # at = cand where below, by arithmetic: a masked copy mispredicts a branch per
        # probe (its mask is random), 60% slower in all
        cand -= at
        cand *= below
        at += cand
        step >>= 1
    at += 1  # the first value not below the probe
    found = at <= last
    found &= buf.take(at, mode="clip") == probes
    out[found] = at[found]
    return out
