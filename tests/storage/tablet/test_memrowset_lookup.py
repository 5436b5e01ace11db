"""``MemRowSet.lookup`` (the write path's probe of the MemRowSet) finds every key's slot
whatever mix of Arrow batches, row-path tails, views (which merge the chunks) and key
widths came before: fixed-width keys through the sorted runs, others through the dict
or the hash join. Checked against a plain dict of what was inserted."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
from hypothesis import given, settings

from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.memrowset import MemRowSet

SCHEMA = Schema.build(
    [
        ColumnSchema("k", DataType.parse("INT64"), nullable=False),
        ColumnSchema("v", DataType.parse("INT64")),
    ],
    ["k"],
)

# One step: ("batch", n) Arrow insert of n new keys, ("rows", n) a row-path insert of n
# new keys, ("view",) a consistent view (merges the chunks), ("probe", n) a lookup of
# n keys, half of them held.
step_st = st.one_of(
    st.tuples(st.just("batch"), st.integers(1, 40)),
    st.tuples(st.just("rows"), st.integers(1, 6)),
    st.tuples(st.just("view")),
    st.tuples(st.just("probe"), st.integers(1, 80)),
)


class _SmallTail(MemRowSet):
    PENDING_ROWS = 8  # row-path tails become Arrow chunks often


def _rows(n: int, first: int) -> pa.RecordBatch:
    ks = np.arange(first, first + n, dtype=np.int64)
    return pa.RecordBatch.from_arrays(
        [pa.array(ks), pa.array(ks * 2)], schema=SCHEMA.arrow_schema()
    )


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(step_st, min_size=1, max_size=25),
    widths=st.sampled_from([(8,), (4,), (3,), (8, 8, 5), (1, 2, 3)]),
    data=st.data(),
)
def test_lookup_equals_a_dict_of_what_was_inserted(
    steps: list[Any], widths: tuple[int, ...], data: Any
) -> None:
    m = _SmallTail(1, SCHEMA)
    model: dict[bytes, int] = {}
    key_st = st.sampled_from(widths).flatmap(lambda w: st.binary(min_size=w, max_size=w))

    def new_keys(n: int) -> list[bytes]:
        ks = data.draw(st.lists(key_st, min_size=n, max_size=n, unique=True))
        return [k for k in ks if k not in model]

    for step in steps:
        if step[0] == "batch":
            ks = new_keys(step[1])
            if ks:
                first = m.num_slots
                m.insert(_rows(len(ks), first), pa.array(ks, pa.binary()), 10, np.arange(len(ks)))
                model.update({k: first + i for i, k in enumerate(ks)})
        elif step[0] == "rows":
            ks = new_keys(step[1])
            if ks:
                first = m.num_slots
                rows = [(first + i, 0) for i in range(len(ks))]
                m.insert_rows(rows, ks, 10, list(range(len(ks))), 16 * len(ks))
                model.update({k: first + i for i, k in enumerate(ks)})
        elif step[0] == "view":
            assert m.view().keys.to_pylist() == sorted(model, key=model.__getitem__)
        else:
            held = (
                data.draw(st.lists(st.sampled_from(sorted(model)), max_size=step[1] // 2))
                if model
                else []
            )
            probes = held + data.draw(st.lists(key_st, min_size=1, max_size=step[1]))
            got = m.lookup(pa.array(probes, pa.binary())).tolist()
            assert got == [model.get(k, -1) for k in probes]
            for k in probes[:3]:
                assert m.lookup_one(k) == model.get(k, -1)


def test_fixed_width_keys_are_probed_through_sorted_runs() -> None:
    """A batch of 8-byte keys never fills the per-key dict, and the runs stay few."""
    m = MemRowSet(1, SCHEMA)
    rng = np.random.default_rng(3)
    every = pa.array([], pa.binary())
    for b in range(64):
        raw = rng.integers(0, 1 << 62, 500, dtype=np.int64).astype(">u8").tobytes()
        ks = [raw[i : i + 8] for i in range(0, len(raw), 8)]
        m.insert(_rows(500, b * 500), pa.array(ks, pa.binary()), 10, np.arange(500))
        assert m.lookup(pa.array(ks[:100], pa.binary())).tolist() == list(
            range(b * 500, b * 500 + 100)
        )
        every = pa.concat_arrays([every, pa.array(ks, pa.binary())])
    assert m.lookup(every).tolist() == list(range(64 * 500))
    runs, _ = m._key_runs()
    assert runs is not None and runs.slots == 64 * 500
    assert len(runs.runs) <= 7  # a binary counter of 64 batches: at most log2 + 1 runs
    assert not m._index
