"""The catalog's table owner, comment and soft-delete state: absent from catalogs
written before them (they read as none), kept across reopens, and what a soft-deleted
table looks like to the tables layer."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kudusql.common.errors import ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.storage.fs.meta_file import load_json
from kudusql.storage.tables import catalog
from kudusql.storage.tables.alter import SetComment, SetOwner
from kudusql.storage.tables.database import Database

FIXTURE = Path(__file__).parent / "fixtures" / "catalog_v1"


def test_a_catalog_written_before_them_opens_and_takes_them(tmp_path: Path) -> None:
    path = tmp_path / "db"
    shutil.copytree(FIXTURE, path)
    body = load_json(str(path / catalog.CATALOG_FILE), catalog.MAGIC, catalog.VERSION, "catalog")
    assert not {"owner", "comment", "soft_deleted"} & set(body["tables"][0])
    with Database(str(path), TabletOptions(sync=False), maintenance=False) as db:
        meta = db.table_meta("t")
        assert meta is not None
        assert (meta.owner, meta.comment, meta.soft_deleted) == ("", "", False)
        assert db.table("t").count_rows() == 29
        db.alter_table("t", [SetOwner("alice"), SetComment("old table")])
        db.soft_drop_table("t", 3600)
        assert db.table_names() == [] and db.soft_deleted_table_names() == ["t"]
        assert not db.has_table("t") and db.has_table("t", soft_deleted=True)
        with pytest.raises(ProgrammingError, match="does not exist"):
            db.table("t")
    with Database(str(path), TabletOptions(sync=False), maintenance=False) as db:
        meta = db.table_meta("t", soft_deleted=True)
        assert meta is not None and meta.soft_deleted and meta.reserve_seconds == 3600
        assert (meta.owner, meta.comment) == ("alice", "old table")
        with pytest.raises(ProgrammingError, match="should not be altered"):
            db.alter_table("t", [SetComment("x")])
        with pytest.raises(ProgrammingError, match="soft-deleted"):
            db.create_table("t", meta.schema)
        db.recall_table(meta.id)
        assert db.table_names() == ["t"] and db.table("t").count_rows() == 29
    # a read-only view sees the same
    with Database(str(path), read_only=True) as ro:
        assert ro.table_names() == ["t"]


def test_soft_drop_with_no_reserve_drops(tmp_path: Path) -> None:
    path = tmp_path / "db"
    shutil.copytree(FIXTURE, path)
    with Database(str(path), TabletOptions(sync=False), maintenance=False) as db:
        db.soft_drop_table("t", 0)
        assert db.table_names() == [] and db.soft_deleted_table_names() == []
        assert not (path / "tablets" / "00000001").exists()


def test_an_older_catalogs_comment_property_becomes_the_comment() -> None:
    """Before the comment field, SQL kept a table comment as the property ``comment``
    (Impala's way): such a catalog reads it as the comment, not as a property."""
    body = load_json(str(FIXTURE / catalog.CATALOG_FILE), catalog.MAGIC, catalog.VERSION, "catalog")
    old = dict(body["tables"][0])
    assert "comment" not in old
    old["properties"] = {"comment": "from SQL", "x": "1"}
    back = catalog.TableMeta.from_dict(old)
    assert (back.comment, back.properties) == ("from SQL", {"x": "1"})
    # A catalog with the field keeps a property of that name as it is.
    kept = catalog.TableMeta.from_dict({**old, "comment": "field", "properties": {"comment": "p"}})
    assert (kept.comment, kept.properties) == ("field", {"comment": "p"})


def test_recall_names_why_it_cannot(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "fixture")
    with Database(str(tmp_path / "fixture"), TabletOptions(sync=False), maintenance=False) as db:
        meta = db.table_meta("t")
        assert meta is not None
        with pytest.raises(ProgrammingError, match=r"table 't' \(id \d+\) is not soft-deleted"):
            db.recall_table(meta.id)
        with pytest.raises(ProgrammingError, match="table id 999 does not exist"):
            db.recall_table(999)
