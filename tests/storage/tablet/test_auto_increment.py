"""Non-unique primary keys (Kudu 1.17): the hidden ``auto_incrementing_id`` key column.

The tablet assigns the ids of INSERT rows (one ``arange`` per batch, under the write
lock); the other operations name rows by the full key. The counter survives a reopen
and a crash: it is the superblock's (saved with every flush) or the largest id replayed
from the log, so an id that was ever acknowledged is never handed out again, even once
its row is deleted, flushed and compacted away."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.errors import ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.common.schema import AUTO_INCREMENTING_COLUMN, ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema
from kudusql.storage.tablet.tablet import Tablet

AUTO = AUTO_INCREMENTING_COLUMN
NU = Schema.build(
    [ColumnSchema("id", DataType.parse("INT32")), ColumnSchema("v", DataType.parse("STRING"))],
    ["id"],
    key_unique=False,
)
OPTS = TabletOptions(sync=False, rows_per_page=16, history_max_age_s=0)


def ins(ids: list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int32()), "v": [v] * len(ids)})


def keyed(pairs: list[tuple[int, int]], **cols: list[Any]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([p[0] for p in pairs], pa.int32()),
            AUTO: pa.array([p[1] for p in pairs], pa.int64()),
            **cols,
        }
    )


def content(t: Tablet) -> list[tuple[int, int, str]]:
    got = t.scan(["id", AUTO, "v"], ordered=True).read_all().to_pylist()
    return [(r["id"], r[AUTO], r["v"]) for r in got]


def new(tmp_path: Path, options: TabletOptions = OPTS) -> Tablet:
    return Tablet.create(str(tmp_path / "t"), NU, options)


# ------------------------------------------------------------------------------------------
# The schema
# ------------------------------------------------------------------------------------------
def test_the_hidden_column_ends_the_key() -> None:
    assert NU.key_names == ["id", AUTO]
    assert NU.declared_key_names == ["id"]
    assert not NU.key_unique
    assert NU.auto_incrementing_index == 1
    col = NU.column(AUTO)
    assert col.auto_incrementing and not col.nullable and str(col.type) == "INT64"
    assert Schema.from_dict(NU.to_dict()) == NU
    assert Schema.build([ColumnSchema("id", DataType.parse("INT32"))], ["id"]).key_unique


@pytest.mark.parametrize("name", [AUTO, "Auto_Incrementing_ID"])
def test_the_name_is_reserved(name: str) -> None:
    cols = [
        ColumnSchema("id", DataType.parse("INT32")),
        ColumnSchema(name, DataType.parse("INT64")),
    ]
    with pytest.raises(ProgrammingError, match="reserved"):
        Schema.build(cols, ["id"])
    with pytest.raises(ProgrammingError, match=r"reserved|already exists"):
        NU.add_column(ColumnSchema(name, DataType.parse("INT64")))


def test_the_hidden_column_cannot_be_dropped_renamed_or_partition() -> None:
    with pytest.raises(ProgrammingError, match="auto-incrementing"):
        NU.drop_column(AUTO)
    with pytest.raises(ProgrammingError, match="auto-incrementing"):
        NU.rename_column(AUTO, "x")
    with pytest.raises(ProgrammingError, match="cannot partition"):
        PartitionSchema.create(NU, [HashDimension((AUTO,), 2)])


# ------------------------------------------------------------------------------------------
# Writes
# ------------------------------------------------------------------------------------------
def test_inserts_never_collide_and_get_increasing_ids(tmp_path: Path) -> None:
    t = new(tmp_path)
    r = t.insert(ins([1, 1, 2]))
    assert (r.applied, r.errors) == (3, [])
    r = t.insert(ins([1, 2], "y"))
    assert (r.applied, r.errors) == (2, [])
    assert content(t) == [(1, 1, "x"), (1, 2, "x"), (1, 4, "y"), (2, 3, "x"), (2, 5, "y")]
    t.close()


def test_other_operations_name_rows_by_the_full_key(tmp_path: Path) -> None:
    t = new(tmp_path)
    t.insert(ins([7, 7, 8]))
    assert t.update(keyed([(7, 2)], v=["upd"])).applied == 1
    assert t.delete(keyed([(7, 1)])).applied == 1
    assert content(t) == [(7, 2, "upd"), (8, 3, "x")]
    missing = t.delete(keyed([(7, 99)]))
    assert [e.status for e in missing.errors] == ["NotFound"]
    no_id = t.update(ins([8], "z"))
    assert "No value provided for key column 'auto_incrementing_id'" in no_id.errors[0].message
    upsert = t.upsert(ins([8], "z"))
    assert "should be set for UPSERT" in upsert.errors[0].message
    given = t.insert(keyed([(9, 5)], v=["g"]))
    assert "should not be set for INSERT" in given.errors[0].message
    # An UPSERT that names an id updates that row, or inserts it and moves the counter.
    assert t.upsert(keyed([(8, 3), (9, 10)], v=["u8", "u9"])).applied == 2
    t.insert(ins([9]))
    assert content(t)[-2:] == [(9, 10, "u9"), (9, 11, "x")]
    t.close()


def test_bulk_loaded_inserts_get_ids(tmp_path: Path) -> None:
    t = new(tmp_path, TabletOptions(sync=False, bulk_load_rows=10, history_max_age_s=0))
    t.insert(ins([3] * 25))
    t.insert(ins([3] * 5))
    assert [r[1] for r in content(t)] == list(range(1, 31))
    assert len(t._rowsets.drs) == 1
    t.close()


# ------------------------------------------------------------------------------------------
# The counter across reopens and crashes
# ------------------------------------------------------------------------------------------
def reopen(t: Tablet, crash: bool) -> Tablet:
    path, options = t.path, t.options
    if crash:
        t.abandon()
    else:
        t.close(flush=False)
    return Tablet.open(path, options)


@pytest.mark.parametrize("crash", [False, True])
def test_the_counter_comes_back_from_the_log(tmp_path: Path, crash: bool) -> None:
    t = new(tmp_path)
    t.insert(ins([1, 2, 3]))
    t.delete(keyed([(3, 3)]))
    t = reopen(t, crash)
    t.insert(ins([4]))
    assert content(t) == [(1, 1, "x"), (2, 2, "x"), (4, 4, "x")]
    t.close()


@pytest.mark.parametrize("crash", [False, True])
def test_the_counter_comes_back_from_the_superblock(tmp_path: Path, crash: bool) -> None:
    t = new(tmp_path, TabletOptions(sync=False, history_max_age_s=0, file_grace_s=0))
    t.insert(ins([1, 2, 3]))
    t.flush()
    t.delete(keyed([(3, 3), (2, 2)]))
    t.flush_deltas()
    t.compact()
    t.gc_deleted_rowsets()
    t = reopen(t, crash)
    t.insert(ins([5]))
    assert content(t) == [(1, 1, "x"), (5, 4, "x")]
    t.close()


@pytest.mark.parametrize("seed", range(6))
def test_ids_are_never_reused(tmp_path: Path, seed: int) -> None:
    """Random inserts, deletes, flushes, compactions, reopens and crashes: every id an
    acknowledged insert got is larger than every id before it, whatever happened."""
    r = random.Random(seed)
    t = new(tmp_path, TabletOptions(sync=False, history_max_age_s=0, file_grace_s=0))
    acknowledged: list[int] = []
    live: dict[int, int] = {}  # auto id -> id
    for _ in range(40):
        step = r.choice(["insert", "insert", "delete", "flush", "compact", "reopen", "crash"])
        if step == "insert":
            ids = [r.randrange(5) for _ in range(r.randrange(1, 6))]
            before = {row[1] for row in content(t)}
            assert t.insert(ins(ids)).applied == len(ids)
            new_ids = sorted({row[1] for row in content(t)} - before)
            assert len(new_ids) == len(ids)
            assert not acknowledged or new_ids[0] > max(acknowledged)
            acknowledged += new_ids
            live.update({a: i for a, i in zip(new_ids, sorted(ids), strict=False)})
        elif step == "delete" and live:
            gone = r.sample(sorted(live), r.randrange(1, len(live) + 1))
            pairs = [(row[0], row[1]) for row in content(t) if row[1] in gone]
            assert t.delete(keyed(pairs)).applied == len(pairs)
            for a in gone:
                live.pop(a)
        elif step == "flush":
            t.flush()
            t.flush_deltas()
        elif step == "compact":
            t.compact()
            t.gc_deleted_rowsets()
        elif step in ("reopen", "crash"):
            t = reopen(t, step == "crash")
        assert sorted(row[1] for row in content(t)) == sorted(live)
    t.close()


def test_table_tablets_count_their_own_ids(tmp_path: Path) -> None:
    ps = PartitionSchema.create(NU, [HashDimension(("id",), 3)])
    db = Database(str(tmp_path / "db"), TabletOptions(sync=False), maintenance=False)
    t = db.create_table("t", NU, ps)
    res = t.insert(ins(list(range(30)) * 2))  # a transaction across the tablets
    assert (res.applied, res.errors) == (60, [])
    got = t.to_arrow(["id", AUTO]).to_pylist()
    assert len({(r["id"], r[AUTO]) for r in got}) == 60
    for tablet in t.tablets():
        ids = sorted(tablet.scan([AUTO]).read_all().column(AUTO).to_pylist())
        assert ids == list(range(1, len(ids) + 1))
    assert t.upsert(ins([1])).errors[0].message.startswith("auto-incrementing column")
    with pytest.raises(ProgrammingError, match="non-unique primary key"):
        t.adopt_staged({t.meta.tablets[0].id: []})
    db.close()
