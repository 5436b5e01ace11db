"""Failures the state machine found, pinned as explicit op lists (as Kudu's fuzz-itest
does), so they stay fixed whatever the random search explores next."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kudusql.storage.tablet.tablet import Tablet
from tests.storage.tablet.test_tablet_model import OPTIONS, SCHEMA


def _ab(a: int, b: str, op: str) -> tuple[pa.Table, str]:
    return pa.table({"a": pa.array([a], pa.int32()), "b": [b]}), op


def test_flush_redo_file_is_not_overwritten_by_delta_flush(tmp_path: Any) -> None:
    """A flush writes a ghost's REDO DELETE to a DeltaFile; the next delta flush of the
    same rowset used the same file name and replaced it, resurrecting the row."""
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, OPTIONS)
    for data, op in (_ab(0, "", "INSERT"), _ab(2, "", "INSERT"), _ab(0, "", "DELETE")):
        t.write(data, op)
    t.flush()
    t.write(pa.table({"a": pa.array([2], pa.int32()), "b": [""], "c": [7]}), "UPDATE")
    t.flush_deltas()
    t.close()
    t = Tablet.open(str(tmp_path / "t"), OPTIONS)
    assert [(r["a"], r["b"], r["c"]) for r in t.scan().read_all().to_pylist()] == [(2, "", 7)]
    t.close()


def test_undo_of_update_keeps_the_old_value(tmp_path: Any) -> None:
    """The UNDO of an UPDATE must carry the value *before* it, not the update's own."""
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, OPTIONS)
    t1 = t.write(pa.table({"a": pa.array([1], pa.int32()), "b": ["x"], "c": [1]}), "INSERT")
    t.write(pa.table({"a": pa.array([1], pa.int32()), "b": ["x"], "c": [2]}), "UPDATE")
    t.write(pa.table({"a": pa.array([1], pa.int32()), "b": ["x"], "c": [3]}), "UPDATE")
    t.flush()
    got = t.scan(["c"], snapshot=t1.timestamp + 1).read_all().column("c").to_pylist()
    assert got == [1]
    t.close()
