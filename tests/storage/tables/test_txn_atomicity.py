"""A write that spans tablets is all or nothing, in the writing process and after a
reopen: a failure at any point before its COMMIT leaves nothing of it anywhere, a
failure after it leaves all of it (issue 31, item 9). Failures are real: a full tmpfs,
or an OSError injected into one file's write (``storage/fs/faults.py``) to pin the exact
point; crashes are the state an abandoned database leaves (SIGKILLs of a real writer
are in test_database_crash.py and the SQL bank tests)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.common.errors import OperationalError
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.fs import faults
from kudusql.storage.tables import catalog
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema
from kudusql.storage.tables.table import Table
from tests.support.tmpfs import small_tmpfs

SCHEMA = Schema.build(
    [ColumnSchema("k", DataType.parse("INT64")), ColumnSchema("v", DataType.parse("STRING"))],
    ["k"],
)
OPTIONS = TabletOptions(sync=True, wal_fsync="batch", file_grace_s=0, history_max_age_s=3600)


@pytest.fixture(autouse=True)
def _clear_faults() -> Iterator[None]:
    faults.clear()
    yield
    faults.clear()


def batch(lo: int, hi: int, v: str = "x") -> pa.Table:
    return pa.table({"k": pa.array(range(lo, hi), pa.int64()), "v": [v] * (hi - lo)})


def table(db: Database, buckets: int = 2) -> Table:
    ps = PartitionSchema.create(SCHEMA, [HashDimension(("k",), buckets)])
    return db.create_table("t", SCHEMA, ps)


def rows(t: Table) -> dict[int, str]:
    got = t.scan().read_all()
    return dict(zip(got.column("k").to_pylist(), got.column("v").to_pylist(), strict=True))


def rows_after_a_crash(db: Database, opts: TabletOptions = OPTIONS) -> dict[int, str]:
    """What table ``t`` holds once ``db`` is dropped as a crash would and opened again."""
    db.abandon()
    with Database(db.path, opts, maintenance=False) as again:
        return rows(again.table("t"))


def wal_of(db: Database, t: Table, slot: int) -> str:
    return os.path.join(catalog.tablet_path(db.path, t.meta.tablets[slot].id), "wal")


def test_a_part_that_fails_leaves_nothing_anywhere(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    db = Database(path, OPTIONS, maintenance=False)
    t = table(db)
    t.upsert(batch(0, 100, "old"))
    before = rows(t)
    # The second tablet's part cannot be logged: the first one's is, already.
    faults.inject("write", path_contains=wal_of(db, t, 1))
    with pytest.raises(OperationalError):
        t.upsert(batch(0, 200, "new"))
    faults.clear()
    assert rows(t) == before
    t.upsert(batch(300, 310, "later"))  # the failed tablet reloads; writes go on
    db.close()
    with Database(path, OPTIONS, maintenance=False) as db2:
        after = rows(db2.table("t"))
        assert {k: v for k, v in after.items() if k < 300} == before
        assert len(after) == len(before) + 10


def test_a_commit_record_that_cannot_be_written_aborts(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    db = Database(path, OPTIONS, maintenance=False)
    t = table(db, buckets=3)
    t.upsert(batch(0, 60, "old"))
    before = rows(t)
    # BEGIN is written, every part prepared; the COMMIT append fails.
    faults.inject("write", path_contains="txnlog", skip=1)
    with pytest.raises(OperationalError):
        t.upsert(batch(0, 60, "new"))
    faults.clear()
    assert rows(t) == before
    assert rows_after_a_crash(db) == before


def test_a_crash_after_the_commit_keeps_every_part(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    db = Database(path, OPTIONS, maintenance=False)
    t = table(db, buckets=3)
    t.upsert(batch(0, 60, "old"))
    # The COMMIT is durable; the third tablet's FINALIZE marker is not written.
    faults.inject("write", path_contains=wal_of(db, t, 2), skip=1)
    with pytest.raises(OperationalError, match="committed"):
        t.upsert(batch(0, 60, "new"))
    faults.clear()
    db.abandon()
    with Database(path, OPTIONS, maintenance=False) as db2:
        assert set(rows(db2.table("t")).values()) == {"new"}
        # The participant rolled its part forward and flushed it: the commit log
        # forgot the transaction.
        assert db2.txn_log().pending_tablets() == set()
    with Database(path, OPTIONS, maintenance=False) as db3:
        assert set(rows(db3.table("t")).values()) == {"new"}


def test_a_failed_commit_applies_on_the_next_write_in_the_same_process(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "db"), OPTIONS, maintenance=False)
    t = table(db, buckets=3)
    t.upsert(batch(0, 60, "old"))
    faults.inject("write", path_contains=wal_of(db, t, 2), skip=1)
    with pytest.raises(OperationalError, match="committed"):
        t.upsert(batch(0, 60, "new"))
    faults.clear()
    t.upsert(batch(100, 101, "next"))  # every tablet healthy again, the failed one reloaded
    got = rows(t)
    assert {v for k, v in got.items() if k < 100} == {"new"}
    db.close()


def test_a_bulk_part_that_fails_leaves_no_rowset(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    opts = OPTIONS.with_(bulk_load_rows=1000)
    db = Database(path, opts, maintenance=False)
    t = table(db)
    # Bulk parts write rowsets: the second tablet's cannot be written.
    tablet_dir = catalog.tablet_path(db.path, t.meta.tablets[1].id)
    faults.inject("write", path_contains=os.path.join(tablet_dir, "rowsets"))
    with pytest.raises(OperationalError):
        t.insert(batch(0, 50_000))
    faults.clear()
    assert rows(t) == {}
    t.insert(batch(0, 30_000))  # and a bulk write that succeeds, both parts at once
    assert len(rows(t)) == 30_000
    db.abandon()
    with Database(path, opts, maintenance=False) as db2:
        t2 = db2.table("t")
        assert len(rows(t2)) == 30_000
        assert all(not tt.meta.txn_rowsets for tt in t2.tablets())


def test_an_uncommitted_bulk_part_is_dropped_at_open(tmp_path: Path) -> None:
    """A crash between a bulk part's superblock (its rowsets listed, tagged) and the
    COMMIT: the next open drops them."""
    path = str(tmp_path / "db")
    opts = OPTIONS.with_(bulk_load_rows=1000)
    db = Database(path, opts, maintenance=False)
    t = table(db)
    faults.inject("write", path_contains="txnlog", skip=1)  # the COMMIT
    with pytest.raises(OperationalError):
        t.insert(batch(0, 20_000))
    faults.clear()
    db.abandon()
    with Database(path, opts, maintenance=False) as db2:
        t2 = db2.table("t")
        assert rows(t2) == {}
        for tt in t2.tablets():
            assert not tt.meta.rowsets and not tt.meta.txn_rowsets


@pytest.mark.parametrize("rows_per_write", [60_000, 200_000])
def test_a_full_disk_leaves_no_half_statement(tmp_path: Path, rows_per_write: int) -> None:
    """The issue's reproduction: a 2 MiB tmpfs fills up during a write to two tablets
    (through the log, and through bulk-loaded rowsets)."""
    with small_tmpfs(tmp_path / "mnt", "2m") as mnt:
        path = str(mnt / "db")
        db = Database(path, OPTIONS, maintenance=False)
        t = table(db)
        t.upsert(batch(0, 10, "first"))
        before = rows(t)
        big = pa.table(
            {
                "k": pa.array(range(100, 100 + rows_per_write), pa.int64()),
                "v": [os.urandom(20).hex() for _ in range(rows_per_write)],  # no compression
            }
        )
        with pytest.raises(OperationalError) as e:
            t.insert(big)
        assert e.value.__cause__ is None or getattr(e.value.__cause__, "errno", None) in (
            errno.ENOSPC,
            None,
        )
        assert rows(t) == before
        assert rows_after_a_crash(db) == before


def test_a_read_only_view_reads_as_of_its_open_until_asked_for_later(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    db = Database(path, OPTIONS, maintenance=False)
    t = table(db, buckets=3)
    t.upsert(batch(0, 30, "old"))
    view = Database(path, OPTIONS, read_only=True)
    res = t.upsert(batch(0, 30, "new"))
    tv = view.table("t")
    assert set(rows(tv).values()) == {"old"}  # as of the view's open, though opened later
    got = tv.scan(snapshot=res.timestamp + 1).read_all()  # asked for a later snapshot
    assert set(got.column("v").to_pylist()) == {"new"}
    assert set(rows(tv).values()) == {"new"}  # the view moved there
    view.close()
    db.close()


def test_a_committed_bulk_part_is_kept_when_a_crash_comes_before_its_untag(
    tmp_path: Path,
) -> None:
    """A committed bulk part's rowsets stay tagged on disk until the tablet's next
    superblock save; the commit log vouches for them meanwhile, across a crash too."""
    from kudusql.storage.tablet import metadata

    path = str(tmp_path / "db")
    opts = OPTIONS.with_(bulk_load_rows=1000)
    db = Database(path, opts, maintenance=False)
    t = table(db)
    t.insert(batch(0, 30_000))
    dirs = [catalog.tablet_path(db.path, e.id) for e in t.meta.tablets]
    assert all(metadata.load(d).txn_rowsets for d in dirs)  # still tagged on disk
    assert db.txn_log().pending_tablets() == {e.id for e in t.meta.tablets}
    db.abandon()
    with Database(path, opts, maintenance=False) as db2:
        assert len(rows(db2.table("t"))) == 30_000
        assert db2.txn_log().pending_tablets() == set()
    assert not any(metadata.load(d).txn_rowsets for d in dirs)
    # A save in the writing session proves it too: the commit log forgets it.
    db3 = Database(path, opts, maintenance=False)
    t3 = db3.table("t")
    t3.insert(batch(50_000, 80_000))
    assert db3.txn_log().pending_tablets()
    t3.upsert(batch(90_000, 90_050, "more"))  # a few rows in every MemRowSet
    for tt in t3.tablets():
        tt.flush()  # a superblock save
    assert db3.txn_log().pending_tablets() == set()
    db3.close()


def test_a_tablet_whose_part_changes_nothing_is_no_participant(tmp_path: Path) -> None:
    """Only tablets holding something of a transaction must prove its commit: one whose
    rows all failed does not keep the COMMIT in the commit log."""
    db = Database(str(tmp_path / "db"), OPTIONS, maintenance=False)
    t = table(db)
    t.insert(batch(0, 40))
    res = t.insert(batch(0, 80))  # keys 0-39 fail everywhere; 40-79 are new
    assert res.applied == 40
    assert db.txn_log().pending_tablets() == set()
    present = rows(t)
    fail_only = pa.table({"k": pa.array(range(0, 40), pa.int64()), "v": ["x"] * 40})
    assert t.insert(fail_only).applied == 0  # nothing logged in any tablet
    assert db.txn_log().pending_tablets() == set()
    assert rows(t) == present
    db.close()
