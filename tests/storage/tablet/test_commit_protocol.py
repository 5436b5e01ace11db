"""The tablet's one commit protocol (``Tablet._commit``): every logged write, on the row
path or the batch path, is logged before it is applied, and a failure to apply marks
the tablet failed, so the next write reloads it from disk, where the logged batch is
replayed whole."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet import write_path
from kudusql.storage.tablet.memrowset import MemRowSet
from kudusql.storage.tablet.tablet import Tablet

SCHEMA = Schema.build(
    [
        ColumnSchema("k", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("v", DataType.parse("STRING")),
    ],
    ["k"],
)
OPTS = TabletOptions(sync=False, file_grace_s=0)


def rows(t: Tablet) -> list[tuple[int, str]]:
    return sorted((r["k"], r["v"]) for r in t.scan().read_all().to_pylist())


def _break(monkeypatch: Any, path: str) -> None:
    """Make the first apply of a write on ``path`` (the row path's MemRowSet append, or
    the batch path's ``write_path.apply``) raise, once."""
    calls = {"n": 0}
    if path == "rows":
        target, name = MemRowSet, "insert_row"
    else:
        target, name = write_path, "apply"
    real = getattr(target, name)

    def broken(*a: Any, **kw: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("injected apply failure")
        return real(*a, **kw)

    monkeypatch.setattr(target, name, broken)


@pytest.mark.parametrize("path", ["rows", "batch"])
def test_a_failed_apply_fails_the_tablet_and_the_reload_replays_the_logged_batch(
    tmp_path: Any, monkeypatch: Any, path: str
) -> None:
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, OPTS)
    t.write_rows(["k", "v"], [[1, "a"]], "INSERT")
    _break(monkeypatch, path)
    with pytest.raises(OSError, match="injected"):
        if path == "rows":
            t.write_rows(["k", "v"], [[2, "b"]], "INSERT")  # one row: the row path
        else:
            data = pa.table({"k": pa.array([2], pa.int64()), "v": ["b"], "op": ["INSERT"]})
            t.write(data, op_column="op")  # an operation column: the batch path
    assert t.failed
    # The batch was logged before it was applied: the reload replays it whole.
    t.write_rows(["k", "v"], [[3, "c"]], "INSERT")
    assert not t.failed
    assert rows(t) == [(1, "a"), (2, "b"), (3, "c")]
    t.abandon()
    t = Tablet.open(str(tmp_path / "t"), OPTS)
    assert rows(t) == [(1, "a"), (2, "b"), (3, "c")]
    t.close()


def test_the_row_paths_fallback_gives_the_batch_paths_result_in_one_write(
    tmp_path: Any,
) -> None:
    """An UPSERT of a present key and an INSERT over a deleted MemRowSet row are decided
    by the batch path (the row path's one fallback), within the same write."""
    t = Tablet.create(str(tmp_path / "t"), SCHEMA, OPTS)
    t.write_rows(["k", "v"], [[1, "a"], [2, "b"]], "INSERT")
    res = t.write_rows(["k", "v"], [[1, "A"], [5, "e"]], "UPSERT")
    assert (res.applied, res.errors) == (2, [])
    t.delete(pa.table({"k": pa.array([2], pa.int64())}))
    res = t.write_rows(["k", "v"], [[2, "B"]], "INSERT")
    assert (res.applied, res.errors) == (1, [])
    assert rows(t) == [(1, "A"), (2, "B"), (5, "e")]
    t.abandon()
    t = Tablet.open(str(tmp_path / "t"), OPTS)
    assert rows(t) == [(1, "A"), (2, "B"), (5, "e")]
    t.close()
