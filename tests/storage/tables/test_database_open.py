"""Opening a database directory deletes nothing the catalog does not explain.

A directory without ``catalog.meta`` is a database only while it holds at most what an
interrupted creation leaves; anything else is refused, read-only or not, and left as it
is. In a database, a tablet directory the catalog does not list is deleted only when the
catalog proves it garbage (an id at or past ``next_tablet_id``: a CREATE or ADD RANGE
that never committed; an id in ``pending_deletion``: a committed DROP); any other one is
kept, with a warning.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.common.errors import OperationalError
from kudusql.common.options import TabletOptions
from kudusql.storage.fs.lock import LOCK_FILE
from kudusql.storage.fs.meta_file import save_json
from kudusql.storage.tables import catalog
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema
from tests.support.tablets import schema

OPTS = TabletOptions(sync=False, rows_per_page=64, history_max_age_s=3600)
SCHEMA = schema(("id", "INT64"), ("v", "INT32"), key=["id"])


def hashed(n: int) -> PartitionSchema:
    return PartitionSchema.create(SCHEMA, [HashDimension(("id",), n)])


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(ids, pa.int32())})


def tree(path: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and directory (None) below ``path``."""
    out: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), path)] = None
        for f in files:
            full = os.path.join(root, f)
            out[os.path.relpath(full, path)] = Path(full).read_bytes()
    return out


def ids_of(db: Database, name: str) -> list[int]:
    return sorted(r["id"] for r in db.table(name).scan().read_all().to_pylist())


def make_db(path: Path) -> None:
    with Database(str(path), OPTS, maintenance=False) as db:
        db.create_table("t", SCHEMA, hashed(3)).insert(rows(list(range(100))))
        db.create_table("u", SCHEMA).insert(rows([1, 2, 3]))
        db.table("t").flush()


# -- a directory that is not a database -----------------------------------------------------
def test_a_users_folder_with_a_tablets_dir_is_refused_and_left_alone(tmp_path: Path) -> None:
    """The issue's first case: a user's own folder that happens to have ``tablets/``."""
    folder = tmp_path / "photos"
    (folder / "tablets" / "2019").mkdir(parents=True)
    (folder / "tablets" / "2019" / "beach.jpg").write_bytes(b"\xff\xd8 a photo")
    (folder / "tablets" / "notes.txt").write_text("my tablets")
    (folder / "readme.txt").write_text("hello")
    before = tree(folder)
    for kw in ({}, {"read_only": True}, {"create": False}):
        with pytest.raises(OperationalError) as e:
            Database(str(folder), OPTS, maintenance=False, **kw)
        msg = str(e.value)
        assert str(folder) in msg and catalog.CATALOG_FILE in msg, msg
        assert "not a kudusql database" in msg, msg
        assert tree(folder) == before  # not even a LOCK file
    # also through the DB-API
    import kudusql.dbapi as dbapi

    with pytest.raises(OperationalError, match="not a kudusql database"):
        dbapi.connect(str(folder))
    assert tree(folder) == before


def test_a_folder_with_only_a_stray_file_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / LOCK_FILE).write_text("not a pid, my own file\n")
    with pytest.raises(OperationalError, match="not a kudusql database"):
        Database(str(folder), OPTS, maintenance=False)
    assert (folder / LOCK_FILE).read_text() == "not a pid, my own file\n"


def test_a_database_whose_catalog_was_moved_away(tmp_path: Path) -> None:
    """The issue's second case: refused (read-only too), nothing deleted, and once the
    catalog is back every row is there."""
    path = tmp_path / "db"
    make_db(path)
    moved = tmp_path / "catalog.meta.saved"
    shutil.move(str(path / catalog.CATALOG_FILE), str(moved))
    before = tree(path)
    for kw in ({}, {"read_only": True}):
        with pytest.raises(OperationalError) as e:
            Database(str(path), OPTS, maintenance=False, **kw)
        msg = str(e.value)
        assert catalog.CATALOG_FILE in msg and str(path) in msg, msg
        assert tree(path) == before
    shutil.move(str(moved), str(path / catalog.CATALOG_FILE))
    with Database(str(path), OPTS, maintenance=False) as db:
        assert db.table_names() == ["t", "u"]
        assert ids_of(db, "t") == list(range(100))
        assert ids_of(db, "u") == [1, 2, 3]


@pytest.mark.parametrize(
    "leftover",
    [
        [],
        [LOCK_FILE],
        [catalog.TABLETS_DIR],
        [LOCK_FILE, catalog.TABLETS_DIR],
        [LOCK_FILE, catalog.TABLETS_DIR, catalog.CATALOG_FILE + ".tmp"],
    ],
)
def test_an_interrupted_creation_is_completed(tmp_path: Path, leftover: list[str]) -> None:
    """What a creation killed before its catalog was saved leaves (a LOCK with a pid or
    empty, an empty ``tablets/``, a partial temp catalog) is taken for a new database."""
    path = tmp_path / "db"
    path.mkdir()
    for name in leftover:
        if name == catalog.TABLETS_DIR:
            (path / name).mkdir()
        elif name == LOCK_FILE:
            (path / name).write_text("12345\n")
        else:
            (path / name).write_bytes(b"KSQLC")
    with pytest.raises(OperationalError, match="no database"):
        Database(str(path), read_only=True)
    with Database(str(path), OPTS, maintenance=False) as db:
        db.create_table("t", SCHEMA).insert(rows([1]))
    with Database(str(path), OPTS, read_only=True) as db:
        assert ids_of(db, "t") == [1]


def test_a_new_database_in_a_missing_or_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(OperationalError, match=r"parent directory .* does not exist"):
        Database(str(tmp_path / "missing" / "db"), OPTS, maintenance=False)
    assert not (tmp_path / "missing").exists()
    for path in (tmp_path / "new", tmp_path / "empty"):
        if path.name == "empty":
            path.mkdir()
        with Database(str(path), OPTS, maintenance=False) as db:
            db.create_table("t", SCHEMA).insert(rows([7]))
        with Database(str(path), OPTS, maintenance=False) as db:
            assert ids_of(db, "t") == [7]


def test_a_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    for kw in ({}, {"read_only": True}):
        with pytest.raises(OperationalError, match="not a directory"):
            Database(str(f), OPTS, maintenance=False, **kw)
    assert f.read_text() == "x"


# -- tablet directories the catalog does not list ------------------------------------------
def test_unexplained_tablet_directories_are_kept_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An id below ``next_tablet_id`` that no table lists and no drop recorded, or a name
    that is no tablet id: the catalog cannot prove it garbage, so it stays."""
    path = tmp_path / "db"
    make_db(path)
    tablets = path / catalog.TABLETS_DIR
    # a copy of a tablet of t under an id below next_tablet_id that no table lists
    assert catalog.load(str(path)).next_tablet_id == 5
    shutil.copytree(catalog.tablet_path(str(path), 2), tablets / "00000000")
    (tablets / "backup").mkdir()
    (tablets / "backup" / "x").write_text("keep me")
    (tablets / "a-file").write_text("keep me too")

    def unexplained() -> dict[str, bytes | None]:
        names = ("00000000", "backup", "a-file")
        return {k: v for k, v in tree(tablets).items() if k.split(os.sep)[0] in names}

    before = unexplained()
    assert len(before) > 3
    with caplog.at_level(logging.WARNING), Database(str(path), OPTS, maintenance=False) as db:
        assert ids_of(db, "t") == list(range(100))
    assert unexplained() == before
    warned = " ".join(r.getMessage() for r in caplog.records)
    for name in ("00000000", "backup", "a-file"):
        assert name in warned, warned
    with Database(str(path), OPTS, read_only=True) as db:
        assert ids_of(db, "u") == [1, 2, 3]
    assert unexplained() == before


def test_uncommitted_tablet_ids_are_deleted_at_open(tmp_path: Path) -> None:
    """An id at or past ``next_tablet_id`` is a CREATE or ADD RANGE that never committed
    (ids advance only when one commits): deleted by the writer, not by a reader."""
    path = tmp_path / "db"
    make_db(path)
    orphan = Path(catalog.tablet_path(str(path), catalog.load(str(path)).next_tablet_id))
    (orphan / "rowsets").mkdir(parents=True)
    with Database(str(path), OPTS, read_only=True) as db:
        assert db.table_names() == ["t", "u"]
    assert orphan.exists()
    with Database(str(path), OPTS, maintenance=False) as db:
        assert ids_of(db, "t") == list(range(100))
    assert not orphan.exists()


def test_drop_records_its_tablets_until_they_are_deleted(tmp_path: Path) -> None:
    path = tmp_path / "db"
    make_db(path)
    with Database(str(path), OPTS, maintenance=False) as db:
        dropped = [e.id for e in db.table("t").meta.tablets]
        db.drop_table("t")
        assert catalog.load(str(path)).pending_deletion == []
        assert not any(os.path.exists(catalog.tablet_path(str(path), i)) for i in dropped)
    assert catalog.load(str(path)).next_tablet_id == 5


def test_an_old_catalog_without_a_pending_list_reads(tmp_path: Path) -> None:
    """Catalogs written before ``pending_deletion`` existed have no such field."""
    path = tmp_path / "db"
    make_db(path)
    body = catalog.load(str(path)).to_dict()
    del body["pending_deletion"]
    save_json(catalog.catalog_path(str(path)), catalog.MAGIC, catalog.VERSION, body)
    with Database(str(path), OPTS, maintenance=False) as db:
        assert ids_of(db, "t") == list(range(100))
        db.drop_table("u")
    with Database(str(path), OPTS, maintenance=False) as db:
        assert db.table_names() == ["t"]
