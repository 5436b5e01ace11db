"""The read-only shell follows the writer process, and ``\\refresh`` says what it found."""

from __future__ import annotations

import io
from pathlib import Path

import kudusql
from kudusql.shell.core import Settings, Shell
from tests.support.sql_writer import Writer


def test_refresh_and_statements_see_the_writers_changes(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    writer = Writer(path)
    try:
        writer.sql("CREATE TABLE t (id BIGINT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 2")
        out, err = io.StringIO(), io.StringIO()
        shell = Shell(
            kudusql.connect(path, read_only=True),
            out,
            err,
            interactive=True,
            settings=Settings(format="csv"),
            path=path,
        )
        try:
            assert shell.run_text("SELECT count(*) AS n FROM t;")
            writer.sql("INSERT INTO t VALUES (1), (2), (3)")
            assert shell.run_text("\\refresh")
            assert shell.run_text("\\refresh")
            assert shell.run_text("SELECT count(*) AS n FROM t;")
            writer.sql("INSERT INTO t VALUES (4)")
            assert shell.run_text("SELECT count(*) AS n FROM t;")  # no \\refresh needed
        finally:
            shell.close()
    finally:
        writer.close()
    shown = out.getvalue() + err.getvalue()
    assert shown.count("n\n0\n") == 1 and "n\n3\n" in shown and "n\n4\n" in shown
    assert "Refreshed: now reading what the writer process has committed." in shown
    assert "Up to date: the writer process has changed nothing" in shown


def test_refresh_in_a_writers_shell(tmp_path: Path) -> None:
    out = io.StringIO()
    shell = Shell(kudusql.connect(str(tmp_path / "db")), out, out, interactive=True)
    try:
        assert shell.run_text("\\refresh")
    finally:
        shell.close()
    assert "open for writing here" in out.getvalue()
