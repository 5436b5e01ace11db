"""Delta resolution against plain per-event models: the last (or first) event of each row,
whether by a scatter over dense rowids or a sort over sparse ones, and the UNDO events a
rebase derives from a row's history (``undo_of_history``), whether from the shared row
grouping or the general search it falls back to."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

from kudusql.storage.tablet import compaction
from kudusql.storage.tablet.compaction import undo_of_history
from kudusql.storage.tablet.delta import (
    ColumnDelta,
    Deltas,
    MutationType,
    first_per_row,
    last_per_row,
    unique_rowids,
)

# Dense rowids take the scatter, sparse ones (a few rows of a huge span) the sort.
rowid_lists = st.one_of(
    st.lists(st.integers(0, 40), max_size=120),
    st.lists(st.integers(0, 10**9), max_size=30),
)


@given(rowid_lists)
@settings(max_examples=300, deadline=None)
def test_last_first_and_unique_rowids_match_a_loop(ids: list[int]) -> None:
    rowid = np.array(ids, dtype=np.int64)
    last: dict[int, int] = {}
    first: dict[int, int] = {}
    for i, r in enumerate(ids):
        last[r] = i
        first.setdefault(r, i)
    rows = sorted(last)
    got_rows, got_last = last_per_row(rowid)
    assert got_rows.tolist() == rows and got_last.tolist() == [last[r] for r in rows]
    got_rows, got_first = first_per_row(rowid)
    assert got_rows.tolist() == rows and got_first.tolist() == [first[r] for r in rows]
    assert unique_rowids(rowid).tolist() == rows
    assert got_rows.dtype == rowid.dtype


# One event: (row, op, value of column 1 or None when it does not set it, seq step).
events = st.lists(
    st.tuples(
        st.integers(0, 7),
        st.sampled_from([MutationType.UPDATE, MutationType.DELETE, MutationType.REINSERT]),
        st.one_of(st.none(), st.integers(0, 10**6)),
        st.integers(0, 2),
    ),
    max_size=60,
)


def history(evs: list[tuple[int, MutationType, int | None, int]]) -> Deltas:
    """Events in apply order; a seq step of 0 repeats the previous seq (a tie)."""
    seq, seqs = 0, []
    for _, _, _, step in evs:
        seq += step
        seqs.append(seq)
    sets = [i for i, e in enumerate(evs) if e[2] is not None or e[1] == MutationType.REINSERT]
    vals = [evs[i][2] if evs[i][2] is not None else -1 for i in sets]
    return Deltas(
        np.array([e[0] for e in evs], dtype=np.int64),
        np.array(seqs, dtype=np.uint64),
        np.array(seqs, dtype=np.int64),
        np.array([int(e[1]) for e in evs], dtype=np.uint8),
        {1: ColumnDelta(np.array(sets, dtype=np.int64), pa.array(vals, pa.int64()))}
        if sets
        else {},
    )


def model_previous(hist: Deltas, base: list[int], base_seq: list[int]) -> dict[int, int]:
    """For each query event (an UPDATE of column 1, any DELETE): the value column 1 had
    before it (the last setter of its row with a smaller seq, else the base)."""
    cd = hist.cols.get(1)
    setter = {} if cd is None else dict(zip(cd.pos.tolist(), cd.values.to_pylist(), strict=True))
    out = {}
    for i in range(len(hist)):
        op, row = int(hist.op[i]), int(hist.rowid[i])
        if not (op == MutationType.DELETE or (op == MutationType.UPDATE and i in setter)):
            continue
        value, best = base[row], base_seq[row]
        for j in range(len(hist)):  # of setters with one seq, the last in apply order
            sj = int(hist.seq[j])
            if j in setter and int(hist.rowid[j]) == row and best <= sj < int(hist.seq[i]):
                value, best = setter[j], sj
        out[i] = value
    return out


@pytest.mark.parametrize("grouped", [True, False])
@given(events, st.booleans())
@settings(max_examples=200, deadline=None)
def test_undo_of_history_carries_each_previous_value(
    grouped: bool, evs: list[Any], with_ties: bool
) -> None:
    if not with_ties:
        evs = [(r, op, v, max(step, 1)) for r, op, v, step in evs]
    hist = history(evs)
    base = [1000 + r for r in range(8)]
    base_seq = [-1] * 8
    real = compaction._row_groups
    if not grouped:  # the general search the grouping falls back to
        compaction._row_groups = lambda *_: None  # type: ignore[assignment]
    try:
        undo = undo_of_history(
            {1: pa.array(base, pa.int64())}, np.array(base_seq, dtype=np.int64), hist
        )
    finally:
        compaction._row_groups = real
    expected = model_previous(hist, base, base_seq)
    cd = undo.cols.get(1)
    got = {} if cd is None else dict(zip(cd.pos.tolist(), cd.values.to_pylist(), strict=True))
    assert got == expected
    assert undo.rowid.tolist() == hist.rowid.tolist()


def test_row_grouping_is_used_only_where_apply_order_is_seq_order() -> None:
    """The shared grouping stands for "the last setter with a smaller seq" only where a
    row's events follow its base in strictly ascending seq; elsewhere the general
    search decides (and ``test_undo_of_history_carries_each_previous_value`` checks both
    against the model)."""
    base_seq = np.array([-1, -1, 5], dtype=np.int64)

    def groups(rowid: list[int], seq: list[int]) -> Any:
        n = len(rowid)
        hist = Deltas(
            np.array(rowid, dtype=np.int64),
            np.array(seq, dtype=np.uint64),
            np.array(seq, dtype=np.int64),
            np.full(n, int(MutationType.UPDATE), dtype=np.uint8),
            {},
        )
        return compaction._row_groups(hist, base_seq)

    got = groups([1, 0, 1, 0], [1, 2, 3, 4])
    assert got is not None
    order, inverse, row_start = got
    assert order.tolist() == [1, 3, 0, 2]  # row 0's events, then row 1's, apply order kept
    assert inverse.tolist() == [2, 0, 3, 1] and row_start.tolist() == [0, 0, 2, 2]
    assert groups([0, 0], [3, 3]) is None  # a tie within a row
    assert groups([1, 0, 1], [4, 2, 3]) is None  # a row's seqs going down
    assert groups([2, 1], [5, 6]) is None  # row 2's event not after its base (seq 5)
    assert groups([2, 1], [6, 7]) is not None
