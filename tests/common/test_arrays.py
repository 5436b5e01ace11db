"""Tests for kudusql.common.arrays."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from kudusql.common.arrays import sorted_unique


@given(
    hnp.arrays(
        st.sampled_from([np.int64, np.int32, np.uint64, np.uint8, np.bool_]),
        hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=40),
    ),
    st.integers(1, 3),
)
def test_sorted_unique_is_np_unique(a: np.ndarray, stride: int) -> None:
    """Integers and booleans of any shape (flattened, as np.unique does), strided too."""
    for x in (a, a.reshape(-1)[::stride]):
        got, want = sorted_unique(x), np.unique(x)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_sorted_unique_edges() -> None:
    assert sorted_unique(np.zeros(0, dtype=np.int64)).tolist() == []
    assert sorted_unique(np.array([7, 7, 7])).tolist() == [7]
    assert sorted_unique(np.array([3, -1, 3, 2**62, -1])).tolist() == [-1, 3, 2**62]
    # other dtypes go to np.unique, which counts NaNs as one
    floats = sorted_unique(np.array([np.nan, 1.0, np.nan]))
    assert len(floats) == 2 and floats[0] == 1.0 and np.isnan(floats[1])
