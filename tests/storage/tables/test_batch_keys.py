"""Tests for kudusql.storage.tables.batch_keys: batch hashing and range location."""

from __future__ import annotations

import itertools

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

import kudusql.storage.tables.batch_keys as bk
from kudusql.common.murmur import murmur2_64


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=40), st.integers(0, 2**64 - 1), st.booleans())
def test_murmur2_64_keys_equals_scalar(keys: list[bytes], seed: int, sliced: bool) -> None:
    padded = pa.array([b"pad", *keys], pa.binary())
    arr = padded.slice(1) if sliced else pa.array(keys, pa.binary())
    got = bk.murmur2_64_keys(arr, seed).tolist()
    assert got == [murmur2_64(k, seed) for k in keys]


def brute_force(keys: list[bytes], ranges: list[tuple[bytes, bytes | None]]) -> list[int]:
    out = []
    for k in keys:
        hit = [i for i, (lo, hi) in enumerate(ranges) if lo <= k and (hi is None or k < hi)]
        out.append(hit[0] if hit else -1)
    return out


@st.composite
def disjoint_ranges(draw: st.DrawFn, width: int | None) -> list[tuple[bytes, bytes | None]]:
    """Sorted, disjoint ranges between sorted points, with gaps, maybe unbounded ends."""
    size = st.binary(min_size=width, max_size=width) if width else st.binary(max_size=3)
    points = sorted(set(draw(st.lists(size, max_size=40))))
    if not points:
        return [(b"", None)] if draw(st.booleans()) else []
    ranges: list[tuple[bytes, bytes | None]] = [
        (lo, hi) for lo, hi in itertools.pairwise(points) if draw(st.booleans())
    ]
    if points[0] and draw(st.booleans()):
        ranges.insert(0, (b"", points[0]))
    if draw(st.booleans()):
        ranges.append((points[-1], None))
    return ranges


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([None, 1, 3, 8, 9]), st.data(), st.sampled_from([0, 16, 10**9]))
def test_locate_in_ranges(width: int | None, data: st.DataObject, few: int) -> None:
    ranges = data.draw(disjoint_ranges(width))
    size = st.binary(min_size=width, max_size=width) if width else st.binary(max_size=4)
    keys = data.draw(st.lists(size, max_size=30))
    old = bk._FEW_BOUNDS
    bk._FEW_BOUNDS = few  # both the comparison loop and the sort
    try:
        got = bk.locate_in_ranges(
            pa.array(keys, pa.binary()), [r[0] for r in ranges], [r[1] for r in ranges], width
        )
    finally:
        bk._FEW_BOUNDS = old
    assert got.tolist() == brute_force(keys, ranges)
