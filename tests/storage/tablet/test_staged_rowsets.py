"""Staged rowsets (the Spark INSERT path): DiskRowSets written outside a tablet, then
adopted by an empty tablet at one timestamp (``bulk_load.stage_rowsets``,
``Tablet.adopt_rowsets``, ``Table.adopt_staged``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kudusql.common.errors import IntegrityError
from kudusql.common.options import TabletOptions
from kudusql.common.row_operations import WriteOp
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema
from kudusql.storage.tablet.bulk_load import stage_rowsets, staged_duplicates
from kudusql.storage.tablet.diskrowset import DiskRowSet, RowSetMeta, rowset_dir
from kudusql.storage.tablet.rowset_writer import RowSetWriteOptions
from kudusql.storage.tablet.tablet import Tablet
from kudusql.storage.tablet.write_ops import prepare

SCH = Schema(
    (
        ColumnSchema("id", DataType.parse("BIGINT"), nullable=False),
        ColumnSchema("v", DataType.parse("STRING")),
    ),
    1,
)
OPTS = TabletOptions(sync=True)
SMALL = RowSetWriteOptions(target_rowset_bytes=4096, rows_per_page=256)


def rows(ids: Any, tag: str = "v") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]})


def stage(d: Path, data: pa.Table) -> tuple[list[tuple[str, RowSetMeta]], np.ndarray]:
    pb = prepare(SCH, data, np.full(data.num_rows, WriteOp.INSERT, dtype=np.uint8))
    assert not pb.err.any()
    cols = [pb.columns[0], pb.columns[1]]
    metas, dups = stage_rowsets(str(d), SCH, cols, pb.keys, SMALL)
    return [(str(d), m) for m in metas], dups


def scan(t: Tablet, **kw: Any) -> list[dict[str, Any]]:
    return sorted(t.scan(**kw).read_all().to_pylist(), key=lambda r: r["id"])


def test_adopted_rows_read_like_inserted_rows(tmp_path: Path) -> None:
    t = Tablet.create(str(tmp_path / "t"), SCH, OPTS)
    before = t.latest_timestamp()
    staged, dups = stage(tmp_path / "s1", rows(np.random.default_rng(1).permutation(3000)))
    more, _ = stage(tmp_path / "s2", rows(range(5000, 5100)))
    assert len(dups) == 0 and len(staged) > 1  # rolled at the small target size
    ts = t.mvcc.clock.now()
    assert t.adopt_rowsets(staged + more, ts) == 3100
    assert not os.path.exists(tmp_path / "s1" / "rowsets" / "00000000")  # moved, not copied
    assert scan(t) == sorted(
        rows(range(3000)).to_pylist() + rows(range(5000, 5100)).to_pylist(), key=lambda r: r["id"]
    )
    assert scan(t, snapshot=before) == []  # time travel before the adoption: nothing
    # the adopted rows take updates, deletes and re-inserts like any other
    t.update(pa.table({"id": [7], "v": ["seven"]}))
    t.delete(pa.table({"id": [8]}))
    res = t.insert(rows([8, 9]))
    assert [e.status for e in res.errors] == ["AlreadyPresent"]
    t.close()
    t = Tablet.open(str(tmp_path / "t"), OPTS)  # durable without any WAL record
    got = {r["id"]: r["v"] for r in scan(t)}
    assert got[7] == "seven" and got[8] == "v8" and len(got) == 3100
    t.close()


def test_only_an_empty_tablet_adopts(tmp_path: Path) -> None:
    t = Tablet.create(str(tmp_path / "t"), SCH, OPTS)
    t.insert(rows([1]))
    staged, _ = stage(tmp_path / "s", rows(range(10, 20)))
    with pytest.raises(IntegrityError, match="received rows"):
        t.adopt_rowsets(staged, t.mvcc.clock.now())
    assert os.path.isdir(os.path.join(staged[0][0], "rowsets", "00000000"))  # untouched
    t.delete(pa.table({"id": [1]}))
    t.flush()  # a rowset of deleted rows still holds the key: not empty
    with pytest.raises(IntegrityError):
        t.adopt_rowsets(staged, t.mvcc.clock.now())
    t.close()


def test_a_failed_superblock_swap_publishes_nothing(tmp_path: Path) -> None:
    t = Tablet.create(str(tmp_path / "t"), SCH, OPTS)
    staged, _ = stage(tmp_path / "s", rows(range(100)))

    def fail() -> None:
        raise OSError(28, "No space left on device")

    real = t._save_meta
    t._save_meta = fail  # type: ignore[method-assign]
    with pytest.raises(OSError, match="No space"):
        t.adopt_rowsets(staged, t.mvcc.clock.now())
    t._save_meta = real  # type: ignore[method-assign]
    assert scan(t) == [] and t.is_empty()
    assert os.path.isdir(os.path.join(staged[0][0], "rowsets", "00000000"))  # moved back
    assert t.adopt_rowsets(staged, t.mvcc.clock.now()) == 100  # and can be retried
    t.close()


def test_duplicates_within_and_across_staged_rowsets(tmp_path: Path) -> None:
    _, dups = stage(tmp_path / "a", rows([5, 1, 5, 2, 1]))
    assert sorted(dups.tolist()) == [2, 4]  # the later occurrences, in the given order
    assert not os.path.exists(tmp_path / "a" / "rowsets")  # nothing written
    s1, _ = stage(tmp_path / "b", rows(range(0, 50)))
    s2, _ = stage(tmp_path / "c", rows(range(40, 60)))
    keys = [
        DiskRowSet(d, m, None).key_reader().read_range(0, m.num_rows).combine_chunks()
        for d, m in s1 + s2
    ]
    assert len(staged_duplicates(keys)) == 10


def test_a_table_adopts_across_tablets_at_one_timestamp(tmp_path: Path) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        ps = PartitionSchema((HashDimension(("id",), 3),))
        table = db.create_table("t", SCH, ps)
        data = rows(range(1000))
        pb = prepare(SCH, data, np.full(1000, WriteOp.INSERT, dtype=np.uint8))
        from kudusql.storage.tables.partition import partition_for_batch

        slots = np.asarray(partition_for_batch(ps, SCH, data.select(["id"])))
        staged = {}
        for slot in range(3):
            idx = pa.array(np.flatnonzero(slots == slot))
            metas, _ = stage_rowsets(
                str(tmp_path / f"s{slot}"),
                SCH,
                [pb.columns[0].take(idx), pb.columns[1].take(idx)],
                pb.keys.take(idx),
                SMALL,
            )
            staged[table.meta.tablets[slot].id] = [(str(tmp_path / f"s{slot}"), m) for m in metas]
        res = table.adopt_staged(staged)
        assert res.applied == 1000
        assert table.count_rows() == 1000
        assert table.count_rows(snapshot=res.timestamp - 1) == 0
        assert table.count_rows(snapshot=res.timestamp + 1) == 1000
        assert table.lookup((123,)) is not None
        with pytest.raises(IntegrityError, match="received rows"):
            table.adopt_staged(staged)


def test_a_crash_before_the_swap_leaves_only_orphans(tmp_path: Path) -> None:
    """The state a SIGKILL between the renames and the superblock swap leaves: rowset
    directories the superblock does not list. The next open removes them."""
    path = str(tmp_path / "t")
    t = Tablet.create(path, SCH, OPTS)
    nxt = t.meta.next_rowset_id
    t.close()
    staged, _ = stage(tmp_path / "s", rows(range(50)))
    for i, (d, m) in enumerate(staged):
        os.rename(rowset_dir(d, m.id), rowset_dir(path, nxt + i))
    t = Tablet.open(path, OPTS)
    assert scan(t) == [] and t.is_empty()
    assert not os.path.exists(rowset_dir(path, nxt))
    t.close()
