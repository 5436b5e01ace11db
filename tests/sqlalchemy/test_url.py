"""The dialect's URL forms, its registration, and what it says about transactions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import exc

from kudusql.sqlalchemy.dialect import KuduSQLDialect


def test_entry_point_names_the_dialect(url: str) -> None:
    e = sa.create_engine(url)
    try:
        assert isinstance(e.dialect, KuduSQLDialect)
        assert e.dialect.name == "kudusql"
        assert e.dialect.paramstyle == "qmark"
    finally:
        e.dispose()


def test_absolute_path_is_created_and_reopened(tmp_path: Path) -> None:
    path = tmp_path / "db"
    e = sa.create_engine(f"kudusql:///{path}")
    with e.begin() as c:
        c.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY)")
        c.exec_driver_sql("INSERT INTO t VALUES (7)")
    e.dispose()
    assert path.is_dir()
    e = sa.create_engine(f"kudusql:///{path}")
    with e.connect() as c:
        assert c.exec_driver_sql("SELECT id FROM t").scalar_one() == 7
    e.dispose()


def test_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    e = sa.create_engine("kudusql:///rel/db")
    with e.connect() as c:
        c.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY)")
    e.dispose()
    assert (tmp_path / "rel" / "db").is_dir()


@pytest.mark.parametrize("url", ["kudusql://", "kudusql:///:memory:"])
def test_memory_is_one_database_per_engine_removed_on_dispose(url: str) -> None:
    e = sa.create_engine(url)
    with e.connect() as c:
        c.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY)")
    # Another checkout sees the same database (one connection, StaticPool).
    with e.connect() as c:
        assert sa.inspect(c).get_table_names() == ["t"]
        temp = c.connection.dbapi_connection._temp_dir  # type: ignore[union-attr]
    assert temp is not None and os.path.isdir(temp)
    e.dispose()
    assert not os.path.exists(temp)


def _settings(e: sa.Engine) -> dict[str, str]:
    with e.connect() as c:
        return {r[0]: r[1] for r in c.exec_driver_sql("SHOW SETTINGS")}


def test_query_string_gives_connect_options(tmp_path: Path) -> None:
    """Numbers and true/false are converted; the dialect sets abort_on_error unless the
    URL says otherwise."""
    q = "?dml_batch_rows=5&maintenance=false&flush_threshold_s=2.5"
    e = sa.create_engine(f"kudusql:///{tmp_path / 'db'}{q}")
    s = _settings(e)
    e.dispose()
    assert (s["dml_batch_rows"], s["flush_threshold_s"], s["abort_on_error"]) == (
        "5",
        "2.5",
        "true",
    )
    e = sa.create_engine(f"kudusql:///{tmp_path / 'db2'}?abort_on_error=false")
    assert _settings(e)["abort_on_error"] == "false"
    e.dispose()


def test_connect_args_give_typed_options(tmp_path: Path) -> None:
    e = sa.create_engine(
        f"kudusql:///{tmp_path / 'db'}", connect_args={"abort_on_error": False, "dml_batch_rows": 7}
    )
    s = _settings(e)
    e.dispose()
    assert (s["abort_on_error"], s["dml_batch_rows"]) == ("false", "7")


def test_unknown_option_is_kudusqls_error(tmp_path: Path) -> None:
    e = sa.create_engine(f"kudusql:///{tmp_path / 'db'}?nope=1")
    with pytest.raises(exc.ProgrammingError, match="unknown option"):
        e.connect()
    e.dispose()


@pytest.mark.parametrize(
    "url",
    ["kudusql://master:7051", "kudusql://master/db", "kudusql://user@/db", "kudusql://relative/db"],
)
def test_server_urls_are_refused_with_the_remedy(url: str) -> None:
    with pytest.raises(exc.ArgumentError) as e:
        sa.create_engine(url).connect()
    msg = str(e.value)
    assert "cluster connections arrive with the cluster mode" in msg
    assert "kudusql:///relative/path" in msg


def test_autocommit_is_the_only_isolation_level(engine: sa.Engine) -> None:
    with engine.connect() as c:
        assert c.get_isolation_level() == "AUTOCOMMIT"
        assert c.default_isolation_level == "AUTOCOMMIT"
    serializable = engine.execution_options(isolation_level="SERIALIZABLE")
    with pytest.raises(exc.ArgumentError, match="AUTOCOMMIT"), serializable.connect():
        pass


def test_rollback_does_not_undo_a_committed_statement(engine: sa.Engine) -> None:
    with engine.connect() as c:
        c.exec_driver_sql("CREATE TABLE t (id INT PRIMARY KEY)")
        c.exec_driver_sql("INSERT INTO t VALUES (1)")
        c.rollback()
        assert c.exec_driver_sql("SELECT count(*) FROM t").scalar_one() == 1


def test_savepoints_are_refused(engine: sa.Engine) -> None:
    with engine.connect() as c, pytest.raises(exc.InvalidRequestError, match="no savepoints"):
        c.begin_nested()
