"""Tests for kudusql.common.arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kudusql.common.arrays import sorted_unique


@given(
    hnp.arrays(
        st.sampled_from([np.int64, np.int32, np.uint64, np.uint8, np.bool_, np.float64]),
        st.integers(0, 300),
        elements=None,
    )
)
def test_sorted_unique_is_np_unique(a: np.ndarray) -> None:
    got, want = sorted_unique(a), np.unique(a)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_sorted_unique_edges() -> None:
    assert sorted_unique(np.zeros(0, dtype=np.int64)).tolist() == []
    assert sorted_unique(np.array([7, 7, 7])).tolist() == [7]
    assert sorted_unique(np.array([3, -1, 3, 2**62, -1])).tolist() == [-1, 3, 2**62]
    floats = np.array([np.nan, 1.0, np.nan])  # NaNs count as one, as np.unique says
    assert np.isnan(sorted_unique(floats)[-1]) and len(sorted_unique(floats)) == 2
