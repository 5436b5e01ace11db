"""Batches of several tables as one transaction (``staging.write_together``, on the
tables layer's one multi-tablet commit protocol, ``transaction.py``): one timestamp,
row errors per table in each batch's indices, all or nothing on error and on crash,
the tablets held in tablet-id order, big writes prepared on the database's pool."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.common.row_operations import WriteOp
from kudusql.storage.fs import faults
from kudusql.storage.tables import catalog
from kudusql.storage.tables.alter import AddRangePartition
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds
from kudusql.storage.tables.staging import TableWrite, write_together
from kudusql.storage.tables.table import Table
from kudusql.storage.tables.transaction import PARALLEL_WRITE_ROWS
from kudusql.storage.tablet.tablet import Tablet
from tests.support.tablets import schema

OPTS = TabletOptions(sync=True, wal_fsync="batch", file_grace_s=0, history_max_age_s=3600)
SCHEMA = schema(("id", "INT64"), ("v", "STRING"), key=["id"])


@pytest.fixture(autouse=True)
def _clear_faults() -> Iterator[None]:
    faults.clear()
    yield
    faults.clear()


def rows(ids: list[int] | range, v: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [v] * len(ids)})


def hashed(db: Database, name: str, buckets: int = 2) -> Table:
    return db.create_table(
        name, SCHEMA, PartitionSchema.create(SCHEMA, [HashDimension(("id",), buckets)])
    )


def content(t: Table) -> dict[int, str]:
    got = t.scan().read_all()
    return dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True))


def test_two_tables_commit_at_one_timestamp_with_errors_per_table(tmp_path: Path) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        a, b = hashed(db, "a"), hashed(db, "b", buckets=3)
        a.insert(rows([3, 5]))
        ra, rb = write_together(
            [
                TableWrite(a, rows(range(8), "new"), WriteOp.INSERT),
                TableWrite(b, rows([1]), WriteOp.UPSERT),
            ]
        )
        assert ra.timestamp == rb.timestamp
        assert (ra.applied, rb.applied) == (6, 1)
        assert [e.index for e in ra.errors] == [3, 5]  # positions in a's batch
        assert rb.errors == []
        assert content(b) == {1: "x"}
        assert content(a) == {i: "x" if i in (3, 5) else "new" for i in range(8)}


def test_a_part_that_fails_leaves_nothing_in_any_table(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    db = Database(path, OPTS, maintenance=False)
    a, b = hashed(db, "a"), hashed(db, "b")
    a.upsert(rows(range(20), "old"))
    # b's second tablet cannot log its part; a's parts are logged already.
    faults.inject(
        "write", path_contains=os.path.join(catalog.tablet_path(path, b.meta.tablets[1].id), "wal")
    )
    with pytest.raises(OperationalError):
        write_together(
            [
                TableWrite(a, rows(range(20), "new"), WriteOp.UPSERT),
                TableWrite(b, rows(range(20)), WriteOp.INSERT),
            ]
        )
    faults.clear()
    assert set(content(a).values()) == {"old"} and content(b) == {}
    db.abandon()
    with Database(path, OPTS, maintenance=False) as again:
        assert set(content(again.table("a")).values()) == {"old"}
        assert content(again.table("b")) == {}


def test_a_table_given_twice_is_refused(tmp_path: Path) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        a = hashed(db, "a")
        with pytest.raises(ProgrammingError, match="more than one write"):
            write_together(
                [TableWrite(a, rows([1]), WriteOp.INSERT), TableWrite(a, rows([2]), WriteOp.INSERT)]
            )
        assert content(a) == {}


def test_tablets_are_held_in_tablet_id_order(tmp_path: Path, monkeypatch: Any) -> None:
    """A range added below the first one has the lower slot and the higher tablet id;
    every multi-tablet write holds tablets by id, the one order over all tables."""
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        ps = PartitionSchema.create(SCHEMA, [], ["id"], [RangeBounds((10,), (20,))])
        t = db.create_table("t", SCHEMA, ps)
        db.alter_table("t", [AddRangePartition(RangeBounds((0,), (10,)))])
        u = hashed(db, "u", buckets=3)
        ids_of = {x.path: e.id for x, e in zip(t.tablets(), t.meta.tablets, strict=True)}
        ids_of |= {x.path: e.id for x, e in zip(u.tablets(), u.meta.tablets, strict=True)}
        assert [ids_of[x.path] for x in t.tablets()] != sorted(ids_of[x.path] for x in t.tablets())
        held: list[int] = []
        hold = Tablet.hold

        def spy(self: Tablet, **kw: Any) -> Any:
            held.append(ids_of[self.path])
            return hold(self, **kw)

        monkeypatch.setattr(Tablet, "hold", spy)
        t.insert(rows([5, 15]))
        assert held == sorted(held) and len(held) == 2
        held.clear()
        write_together(
            [
                TableWrite(u, rows(range(30)), WriteOp.INSERT),
                TableWrite(t, rows([6, 16]), WriteOp.INSERT),
            ]
        )
        assert held == sorted(held) and len(held) == 5
        assert content(t) == {5: "x", 6: "x", 15: "x", 16: "x"}


def test_a_big_write_prepares_its_parts_on_the_database_pool(
    tmp_path: Path, monkeypatch: Any
) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        a, b = hashed(db, "a"), hashed(db, "b")
        threads: set[str] = set()
        prepare = Tablet.prepare_part

        def spy(self: Tablet, *args: Any, **kw: Any) -> Any:
            threads.add(threading.current_thread().name)
            return prepare(self, *args, **kw)

        monkeypatch.setattr(Tablet, "prepare_part", spy)
        n = PARALLEL_WRITE_ROWS
        ra, rb = write_together(
            [
                TableWrite(a, rows(range(n)), WriteOp.INSERT),
                TableWrite(b, rows([1]), WriteOp.UPSERT),
            ]
        )
        assert (ra.applied, rb.applied) == (n, 1)
        assert threads and all(name.startswith("db") for name in threads)
        assert a.count_rows() == n


def test_a_commit_log_failure_after_the_commit_keeps_the_write_whole_and_later_writes_visible(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The commit log failing to record a part (its checkpoint's I/O) after the COMMIT:
    the write reports the error, every part is applied (the transaction is visible
    whole) and the timestamp is finished, so later writes are visible too."""
    from kudusql.storage.tables import txn_log

    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        t = hashed(db, "t", buckets=4)

        def failing(self: Any, *args: Any) -> None:
            raise OSError("no space left on device")

        with monkeypatch.context() as m:
            m.setattr(txn_log.TxnLog, "finalized", failing)
            with pytest.raises(OperationalError, match="could not record it"):
                t.insert(rows(range(6)))
        assert content(t) == dict.fromkeys(range(6), "x")
        t.insert(rows([100]))
        assert content(t) == dict.fromkeys([*range(6), 100], "x")
