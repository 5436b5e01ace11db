"""The tables layer's staged insert (``storage/tables/staging.py``): workers stage rows as
DiskRowSets per tablet, the commit has the tablets adopt them at one timestamp; row
errors are reported before anything is staged or adopted."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.common.errors import CorruptionError, DataError, IntegrityError, OperationalError
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema
from kudusql.storage.tables.staging import (
    StagedRowErrors,
    StagedRowSet,
    adopt,
    can_stage,
    stage_insert,
    staging_target,
)
from kudusql.storage.tables.table import Table
from tests.support.tablets import schema

OPTS = TabletOptions(sync=False, rows_per_page=64)
SCHEMA = schema(("id", "INT64"), ("v", "STRING"), key=["id"])


def rows(ids: list[int] | range) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]})


def hashed_table(db: Database) -> Table:
    return db.create_table("t", SCHEMA, PartitionSchema.create(SCHEMA, [HashDimension(("id",), 3)]))


def dirs(root: Path, worker: str) -> tuple[list[int], Callable[[int], str]]:
    """A directory callback that records the tablets it was asked for."""
    asked: list[int] = []

    def directory(tablet: int) -> str:
        asked.append(tablet)
        d = root / worker / f"t{tablet}"
        d.mkdir(parents=True)
        return str(d)

    return asked, directory


def test_workers_stage_and_the_commit_adopts_at_one_timestamp(tmp_path: Path) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        table = hashed_table(db)
        assert can_stage(table)
        target = pickle.loads(pickle.dumps(staging_target(table)))  # it travels to workers
        assert target.tablet_ids == tuple(e.id for e in table.meta.tablets)
        staged: list[StagedRowSet] = []
        for worker, ids in (("a", range(0, 500)), ("b", range(500, 1000))):
            asked, directory = dirs(tmp_path / "staging", worker)
            staged += stage_insert(target, rows(ids), directory)
            assert sorted(asked) == sorted(target.tablet_ids)  # every tablet got a share
        assert table.count_rows() == 0  # staged rows are invisible until adopted
        res = adopt(table, pickle.loads(pickle.dumps(staged)))
        assert res.applied == 1000 and not res.errors
        assert table.count_rows(snapshot=res.timestamp - 1) == 0
        assert table.count_rows() == 1000
        assert table.lookup((777,)) is not None
        assert not can_stage(table)  # no longer empty


def test_bad_rows_fail_before_anything_is_staged(tmp_path: Path) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        target = staging_target(hashed_table(db))
        asked, directory = dirs(tmp_path / "staging", "a")
        bad = pa.table({"id": pa.array([1, None, 3], pa.int64()), "v": ["a", "b", "c"]})
        with pytest.raises(StagedRowErrors, match="NULL values not allowed") as e:
            stage_insert(target, bad, directory)
        assert e.value.count == 1 and isinstance(e.value, DataError)
        with pytest.raises(StagedRowErrors, match="key already present") as e:
            stage_insert(target, rows([5, 6, 5, 7, 6]), directory)
        assert e.value.count == 2 and len(e.value.samples) == 2
        assert asked == [] and not (tmp_path / "staging").exists()


def test_a_key_staged_by_two_workers_is_adopted_nowhere(tmp_path: Path) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        table = hashed_table(db)
        target = staging_target(table)
        _, da = dirs(tmp_path / "staging", "a")
        _, db_ = dirs(tmp_path / "staging", "b")
        staged = stage_insert(target, rows(range(0, 60)), da)
        staged += stage_insert(target, rows(range(50, 80)), db_)
        with pytest.raises(StagedRowErrors, match="key staged by two tasks") as e:
            adopt(table, staged)
        assert e.value.count == 10 and len(e.value.samples) == 5
        assert table.count_rows() == 0
        assert all(os.path.isdir(s.directory) for s in staged)  # left to the caller


def test_only_a_unique_key_table_can_stage(tmp_path: Path) -> None:
    with Database(str(tmp_path / "db"), OPTS, maintenance=False) as db:
        cols = [ColumnSchema("id", DataType.parse("BIGINT"), nullable=False)]
        nonunique = Schema.build(cols, ["id"], key_unique=False)
        table = db.create_table("n", nonunique, PartitionSchema.create(nonunique, []))
        assert not can_stage(table)
        plain = hashed_table(db)
        plain.insert(rows(range(30)))  # a row in every tablet
        assert not can_stage(plain)
        staged = stage_insert(staging_target(plain), rows([100]), dirs(tmp_path, "a")[1])
        with pytest.raises(IntegrityError, match="received rows"):
            adopt(plain, staged)


def test_the_layers_above_keep_their_metadata_files_beside_the_catalog(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    with Database(path, OPTS, maintenance=False) as db:
        assert db.load_meta_file("extra.meta", b"KSQLTST1", 1, "test record") is None
        db.save_meta_file("extra.meta", b"KSQLTST1", 1, {"a": [1, 2]})
    with Database(path, read_only=True) as ro:
        assert ro.load_meta_file("extra.meta", b"KSQLTST1", 1, "test record") == {"a": [1, 2]}
        with pytest.raises(OperationalError, match="read-only"):
            ro.save_meta_file("extra.meta", b"KSQLTST1", 1, {})
    with open(os.path.join(path, "extra.meta"), "r+b") as f:
        f.seek(-2, os.SEEK_END)
        f.write(b"!!")
    with Database(path, read_only=True) as ro, pytest.raises(CorruptionError, match="test record"):
        ro.load_meta_file("extra.meta", b"KSQLTST1", 1, "test record")
