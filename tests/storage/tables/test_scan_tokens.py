"""Scan tokens run in other processes while the writer holds the database open.

Tokens are planned (with predicates, projections and a split size small enough to cut
tablets with several DiskRowSets), serialized, and each one is executed by a separate
Python process (``tests/support/scan_token_worker.py``: ``ScanToken.deserialize(...)
.execute()`` opens the database read-only). Their union must equal a local scan at the
planning snapshot exactly, so rows written, updated, deleted, flushed and compacted after
planning (before and while the workers run) are invisible to them. Tokens for a table
dropped or altered since planning fail with a clear error, and garbage does not
deserialize."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from kudusql.common.errors import ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.alter import (
    AddColumn,
    DropColumn,
    DropRangePartition,
)
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds
from kudusql.storage.tables.scan_token import ScanToken
from kudusql.storage.tables.table import Table
from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[3]
OPTIONS = TabletOptions(sync=False, rows_per_page=16, file_grace_s=60, threads=2)

SCHEMA = Schema.build(
    [
        ColumnSchema("id", DataType.parse("INT64"), nullable=False),
        ColumnSchema("grp", DataType.parse("STRING"), nullable=False),
        ColumnSchema("val", DataType.parse("INT64")),
        ColumnSchema("note", DataType.parse("STRING")),
    ],
    ["id"],
)
RANGES = [(0, 1000), (1000, 2000)]
PARTITIONING = PartitionSchema.create(
    SCHEMA,
    [HashDimension(("id",), 2)],
    ("id",),
    [RangeBounds((lo,), (hi,)) for lo, hi in RANGES],
)
GROUPS = ["red", "green", "blue"]
ROUNDS = 2


def rows(ids: list[int], round_: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "grp": [GROUPS[(i // 3) % 3] for i in ids],
            "val": pa.array([i * 10 + round_ for i in ids], pa.int64()),
            "note": [None if i % 4 == 0 else f"n{i}-{round_}" for i in ids],
        }
    )


@pytest.fixture
def db(tmp_path: Path) -> Any:
    d = Database(str(tmp_path / "db"), OPTIONS, maintenance=False)
    yield d
    d.close()


def load(db: Database, name: str = "t") -> Table:
    """Two rounds of inserts, each flushed: every tablet gets two DiskRowSets with
    increasing key ranges; then updates, deletes and inserts left in memory."""
    t = db.create_table(name, SCHEMA, PARTITIONING)
    for r in range(ROUNDS):
        ids = [r * 300 + i for i in range(0, 300, 3)] + [
            1000 + r * 300 + i for i in range(0, 300, 3)
        ]
        assert t.insert(rows(ids, r)).applied == len(ids)
        t.flush()
    assert t.update(rows([3, 303, 1003, 1306], 7)).applied == 4  # DeltaMemStores
    assert t.delete(pa.table({"id": pa.array([6, 1309], pa.int64())})).applied == 2
    assert t.insert(rows([1, 2, 1001, 1900], 8)).applied == 4  # MemRowSet
    return t


def run_tokens(tokens: list[ScanToken], tmp: Path, during: Any = None) -> list[Any]:
    """Execute every token in its own process (all at once); ``during(done)`` runs in
    this process while they do (``done()`` tells when they all have). Returns each
    token's Arrow table, or its error text."""
    procs = []
    for i, tok in enumerate(tokens):
        tf, of = tmp / f"token{i}.json", tmp / f"out{i}.arrows"
        tf.write_bytes(tok.serialize())
        p = subprocess.Popen(
            [sys.executable, "-m", "tests.support.scan_token_worker", str(tf), str(of)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        procs.append((p, of))
    if during is not None:
        during(lambda: all(p.poll() is not None for p, _ in procs))
    out: list[Any] = []
    for p, of in procs:
        _, err = p.communicate(timeout=scaled(120))
        if p.returncode == 0:
            with pa.OSFile(str(of), "rb") as f:
                out.append(pa.ipc.open_stream(f).read_all())
        else:
            assert p.returncode == 3, err.decode()  # a kudusql error, not a crash
            out.append(err.decode())
    return out


def by_id(t: pa.Table) -> pa.Table:
    return t.take(pc.sort_indices(t, [("id", "ascending")])) if t.num_rows else t


def check_splits(tokens: list[ScanToken]) -> dict[int, list[ScanToken]]:
    """The tokens of each tablet cover its keys exactly once: contiguous key ranges."""
    per: dict[int, list[ScanToken]] = {}
    for tok in tokens:
        per.setdefault(tok.tablet_id, []).append(tok)
    for toks in per.values():
        assert toks[0].key_lo is None and toks[-1].key_hi is None
        for a, b in itertools.pairwise(toks):
            assert a.key_hi is not None and a.key_hi == b.key_lo
            assert b.key_lo is not None and (a.key_lo is None or a.key_lo < b.key_lo)
    return per


def after_planning(t: Table) -> None:
    """Writes after planning: new rows in both ranges, updates and deletes of rows the
    snapshot sees, flushed and compacted."""
    assert t.insert(rows([4, 5, 700, 1002, 1999], 9)).applied == 5
    assert t.update(rows([0, 9, 1000, 1012, 1303], 9)).applied == 5
    assert t.delete(pa.table({"id": pa.array([12, 15, 1300, 1306], pa.int64())})).applied == 4
    t.flush()
    assert t.upsert(rows([18, 21, 1, 1001, 1900], 10)).applied == 5
    t.run_maintenance()


def churn(t: Table, done: Any) -> None:
    """``after_planning``, then upserts of planned rows (and flushes) until ``done()``:
    the WAL and the rowsets change under the readers."""
    after_planning(t)
    deadline = time.monotonic() + scaled(60)
    i = 0
    while not done() and time.monotonic() < deadline:
        assert t.upsert(rows([500 + i % 60, 1900 + i % 60], 20 + i)).applied == 2
        if i % 8 == 7:
            t.flush()
        i += 1


def model_at_planning() -> dict[int, tuple[str, int, str | None]]:
    """What ``load`` wrote, row by row: id -> (grp, val, note)."""
    out: dict[int, tuple[str, int, str | None]] = {}

    def put(ids: list[int], r: int) -> None:
        for row in rows(ids, r).to_pylist():
            out[row["id"]] = (row["grp"], row["val"], row["note"])

    for r in range(ROUNDS):
        put([r * 300 + i for i in range(0, 300, 3)], r)
        put([1000 + r * 300 + i for i in range(0, 300, 3)], r)
    put([3, 303, 1003, 1306], 7)
    del out[6], out[1309]
    put([1, 2, 1001, 1900], 8)
    return out


def sorted_rows(t: pa.Table) -> pa.Table:
    return t.sort_by([(c, "ascending") for c in t.column_names]) if t.num_rows else t


@pytest.mark.parametrize(
    ("columns", "predicates", "tablets", "in_processes"),
    [
        (None, [], 4, True),
        (
            ["note", "id", "val"],
            [ColumnPredicate.ge("id", 250), ColumnPredicate.lt("id", 1700)],
            4,
            False,
        ),
        (
            ["val", "grp", "note"],
            [
                ColumnPredicate.eq("grp", "green"),
                ColumnPredicate.ge("id", 1),
                ColumnPredicate.lt("id", 1000),
            ],
            2,
            True,
        ),
    ],
    ids=["full", "key-range", "nonkey-eq-range-pruned"],
)
def test_tokens_elsewhere_equal_local_scan_at_snapshot(
    db: Database,
    tmp_path: Path,
    columns: list[str] | None,
    predicates: list[ColumnPredicate],
    tablets: int,
    in_processes: bool,
) -> None:
    """Every token runs in its own process (or, for one scan shape, in this process with
    a read-only Database of its own) while this process writes on."""
    t = load(db)
    tokens = t.scan_tokens(columns, predicates, split_size_bytes=1)
    snap = tokens[0].snapshot
    assert {tok.snapshot for tok in tokens} == {snap}
    per = check_splits(tokens)
    assert len(per) == tablets  # range partitions pruned by the predicates
    assert max(len(v) for v in per.values()) >= 3  # tablets cut at DiskRowSet bounds
    expected = sorted_rows(t.to_arrow(columns, predicates, snapshot=snap))
    assert expected.num_rows > 0
    assert expected.column_names == (columns or SCHEMA.names)

    # Some writes happen before the tokens run, more while they run.
    assert t.insert(rows([999, 1302], 11)).applied == 2
    if in_processes:
        results = run_tokens(tokens, tmp_path, during=lambda done: churn(t, done))
        assert all(isinstance(r, pa.Table) for r in results), [
            r for r in results if not isinstance(r, pa.Table)
        ]
    else:
        after_planning(t)
        results = [tok.execute().read_all() for tok in tokens]
    union = pa.concat_tables(results)
    if "id" in union.column_names:
        ids = union.column("id").to_pylist()
        assert len(ids) == len(set(ids)), "a row was returned by two tokens"
    assert union.schema == expected.schema
    assert sorted_rows(union).equals(expected)
    if columns is None:  # and against what was written, independently of any scan
        got = {r["id"]: (r["grp"], r["val"], r["note"]) for r in union.to_pylist()}
        assert got == model_at_planning()
    # The writes after planning did change what a scan sees now.
    assert not sorted_rows(t.to_arrow(columns, predicates)).equals(expected)
    # Each token also runs in this process against the open database.
    local = pa.concat_tables([tok.execute(db).read_all() for tok in tokens])
    assert sorted_rows(local).equals(expected)


def test_token_of_altered_table_is_refused(db: Database, tmp_path: Path) -> None:
    t = load(db)
    tokens = t.scan_tokens(split_size_bytes=None)
    db.alter_table("t", [AddColumn(ColumnSchema("extra", DataType.parse("INT64")))])
    (err,) = run_tokens(tokens[:1], tmp_path)
    assert isinstance(err, str)
    assert err.startswith("ProgrammingError:") and "was altered after the scan was planned" in err
    for tok in tokens:
        with pytest.raises(ProgrammingError, match="altered after the scan was planned"):
            tok.execute(db)
    # Dropping the column again does not make old tokens valid: versions only grow.
    db.alter_table("t", [DropColumn("extra")])
    with pytest.raises(ProgrammingError, match="altered after the scan was planned"):
        tokens[0].execute(db)
    # Tokens planned now work.
    fresh = t.scan_tokens()
    assert sum(tok.execute(db).read_all().num_rows for tok in fresh) == t.count_rows()


def test_token_of_dropped_table_is_refused_even_if_recreated(db: Database, tmp_path: Path) -> None:
    t = load(db)
    tokens = t.scan_tokens(split_size_bytes=1)
    db.drop_table("t")
    (err,) = run_tokens(tokens[:1], tmp_path)
    assert isinstance(err, str)
    assert err.startswith("ProgrammingError:") and "was dropped after the scan was planned" in err
    load(db, "t")  # a new table of the same name and schema: a new id
    for tok in tokens:
        with pytest.raises(ProgrammingError, match="dropped after the scan was planned"):
            tok.execute(db)
        with pytest.raises(ProgrammingError, match="dropped after the scan was planned"):
            tok.execute()  # opens the database read-only, in this process


def test_token_of_dropped_range_partition(db: Database, tmp_path: Path) -> None:
    """Tokens of the tablets of a dropped range fail; the others still read their rows."""
    t = load(db)
    tokens = t.scan_tokens(split_size_bytes=None)
    assert len(tokens) == 4
    snap = tokens[0].snapshot
    expected = by_id(t.to_arrow(predicates=[ColumnPredicate.ge("id", 1000)], snapshot=snap))
    db.alter_table("t", [DropRangePartition(RangeBounds((0,), (1000,)))])
    # Tokens are in partition order (bucket-major): [0, 1000) and [1000, 2000) alternate.
    assert ["0 <= VALUES < 1000" in tok.partition for tok in tokens] == [True, False] * 2
    results = run_tokens(tokens[:2], tmp_path)  # in other processes
    for tok in tokens[2:]:  # in this one, with a read-only Database of its own
        try:
            results.append(tok.execute().read_all())
        except ProgrammingError as e:
            results.append(f"ProgrammingError: {e}")
    errors = [r for r in results if isinstance(r, str)]
    tables = [r for r in results if isinstance(r, pa.Table)]
    assert len(errors) == 2 and len(tables) == 2
    for msg in errors:
        assert msg.startswith("ProgrammingError:")
        assert "was dropped after the scan was planned" in msg
    assert by_id(pa.concat_tables(tables)).equals(expected)


def test_garbage_does_not_deserialize(db: Database) -> None:
    t = load(db)
    good = t.scan_tokens(["id"], [ColumnPredicate.eq("grp", "red")])[0].serialize()
    assert ScanToken.deserialize(good).serialize() == good
    assert ScanToken.deserialize(good.decode()) == ScanToken.deserialize(good)
    for bad in [
        b"",
        b"garbage",
        b"\xff\xfe\x00",
        b"{}",
        b'{"v": 99}',
        b'{"v": 1}',
        good[: len(good) // 2],
        good.replace(b'"snapshot":', b'"snapshot_":'),
        good.replace(b'"v":1', b'"v":2'),
        good.replace(b'"key_lo":null', b'"key_lo":"zz"'),
        good.replace(b'"kind":"="', b'"kind":"bogus"'),
        good.replace(b'"table_id":', b'"table_id":"x",'),
    ]:
        assert bad != good
        with pytest.raises(ProgrammingError):
            ScanToken.deserialize(bad)


@pytest.mark.parametrize("bad", [b"[1]", b"null", b'"token"', b"12"])
def test_non_object_json_does_not_deserialize(bad: bytes) -> None:
    with pytest.raises(ProgrammingError):
        ScanToken.deserialize(bad)
