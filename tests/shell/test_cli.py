"""Non-interactive ``kudusql``: -c, -f, standard input, output formats, exit codes,
errors without tracebacks, the default database, read-only and \\o."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.shell.conftest import KUDUSQL, shell_env
from tests.support.timing import scaled

SETUP = (
    "CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING, price DECIMAL(10,2)) "
    "PARTITION BY HASH (id) PARTITIONS 2; "
    "INSERT INTO t VALUES (1, 'a', 1.50), (2, NULL, 20.00), (3, 'c|d', NULL);"
)
QUERY = "SELECT * FROM t WHERE id <= 3 ORDER BY id"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One database for the module; tests that write use keys above 3 (QUERY reads 1-3)."""
    tmp = tmp_path_factory.mktemp("shell")
    path = str(tmp / "db")
    r = subprocess.run(
        [KUDUSQL, path, "-c", SETUP],
        capture_output=True,
        text=True,
        env=shell_env(tmp),
        timeout=scaled(60),
    )
    assert r.returncode == 0, r.stderr
    assert "INSERT 3 rows" in r.stdout
    return path


def test_table_format_aligns_numbers_and_shows_null(db: str, run_cli: Any) -> None:
    r = run_cli(db, "-c", QUERY)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "│ id │ v    │ price │"
    assert lines[3] == "│  1 │ a    │  1.50 │"
    assert lines[4] == "│  2 │ NULL │ 20.00 │"
    assert lines[5] == "│  3 │ c|d  │  NULL │"
    assert lines[-1] == "(3 rows)"


def test_machine_formats(db: str, run_cli: Any) -> None:
    r = run_cli(db, "--format", "csv", "-c", QUERY)
    assert r.stdout == "id,v,price\n1,a,1.50\n2,,20.00\n3,c|d,\n"
    r = run_cli(db, "--format", "tsv", "-c", QUERY)
    assert r.stdout == "id\tv\tprice\n1\ta\t1.50\n2\t\t20.00\n3\tc|d\t\n"
    r = run_cli(db, "--format", "json", "-c", QUERY)
    assert json.loads(r.stdout) == [
        {"id": 1, "v": "a", "price": 1.5},
        {"id": 2, "v": None, "price": 20.0},
        {"id": 3, "v": "c|d", "price": None},
    ]
    assert '"price": 1.50' in r.stdout  # decimals stay exact
    r = run_cli(db, "--format", "markdown", "-c", QUERY)
    assert r.stdout.splitlines()[:3] == [
        "| id | v | price |",
        "|---:|---|---:|",
        "| 1 | a | 1.50 |",
    ]
    assert "| 3 | c\\|d | NULL |" in r.stdout
    r = run_cli(db, "--format", "line", "-c", "SELECT id, v FROM t WHERE id = 1")
    assert r.stdout == "id = 1\n v = a\n"


def test_stdin_file_and_meta_commands(db: str, tmp_path: Path, run_cli: Any) -> None:
    r = run_cli(db, input="\\format csv\nSELECT count(*) AS n\nFROM t WHERE id <= 3;\n.tables\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["n", "3", "name", "t"]
    script = tmp_path / "s.sql"
    script.write_text("-- a comment\nUPSERT INTO t VALUES (4, 'd', 4);\n\\d t\n")
    r = run_cli(db, "-f", str(script))
    assert r.returncode == 0, r.stderr
    assert "UPSERT 1 row" in r.stdout
    assert "│ price │ decimal(10,2) │" in r.stdout
    assert "PARTITION BY HASH (id) PARTITIONS 2" in r.stdout


def test_describe_meta_command_prints_every_range_partition(tmp_path: Path, run_cli: Any) -> None:
    path = str(tmp_path / "ranges")
    r = run_cli(
        path,
        "-c",
        "CREATE TABLE o (o_date DATE, id INT, PRIMARY KEY (o_date, id)) "
        "PARTITION BY HASH (id) PARTITIONS 2, RANGE (o_date) ("
        "PARTITION VALUES < '2024-01-01', PARTITION '2024-01-01' <= VALUES < '2025-01-01') "
        "COMMENT 'orders'",
    )
    assert r.returncode == 0, r.stderr
    r = run_cli(path, "-c", "\\d o")
    assert r.returncode == 0, r.stderr
    tail = r.stdout.splitlines()[-5:]
    assert tail == [
        "PARTITION BY HASH (id) PARTITIONS 2, RANGE (o_date) (",
        "  PARTITION VALUES < CAST('2024-01-01' AS DATE),",
        "  PARTITION CAST('2024-01-01' AS DATE) <= VALUES < CAST('2025-01-01' AS DATE)",
        ")",
        "COMMENT 'orders'",
    ]


def test_errors_have_caret_no_traceback_and_exit_code(
    db: str, tmp_path: Path, run_cli: Any
) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("SELECT 1;\n\nSELECT *\nFROM t WHERE = 1;\nSELECT 2;\n")
    r = run_cli(db, "-f", str(script))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert f"{script}:3: Error: syntax error at line 4" in r.stderr
    assert "FROM t WHERE = 1\n" in r.stderr and "^" in r.stderr
    assert "│ 2 │" not in r.stdout  # stopped at the failure
    r = run_cli(db, "-c", "SELECT * FROM missing")
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "Error: table 'missing' does not exist",
        "LINE 1: SELECT * FROM missing",
        "                      ^",
    ]
    r = run_cli(db, "--debug", "-c", "SELECT * FROM missing")
    assert r.returncode == 1 and "Traceback" in r.stderr


def test_dml_row_errors_are_warnings(db: str, run_cli: Any) -> None:
    r = run_cli(db, "-c", "INSERT INTO t VALUES (1, 'dup', 0), (9, 'new', 0)")
    assert r.returncode == 0
    assert "INSERT 1 row" in r.stdout
    assert "Warning: INSERT: 1 row(s) failed" in r.stderr
    assert "AlreadyPresent" in r.stderr


def test_output_file_read_only_and_default_database(db: str, tmp_path: Path, run_cli: Any) -> None:
    out = tmp_path / "out.csv"
    r = run_cli(
        db,
        "-c",
        f"\\o {out}",
        "-c",
        "\\format csv",
        "-c",
        "SELECT id FROM t WHERE id < 3 ORDER BY id",
    )
    assert r.returncode == 0, r.stderr
    assert out.read_text() == "id\n1\n2\n"
    r = run_cli(db, "--read-only", "-c", "INSERT INTO t VALUES (7, 'x', 1)")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert run_cli(db, "--read-only", "-c", "SELECT count(*) FROM t").returncode == 0
    r = run_cli(str(tmp_path / "nowhere"), "--read-only", "-c", "SELECT 1")
    assert r.returncode == 2 and "no database" in r.stderr
    home = tmp_path / "cwd"
    home.mkdir()
    r = run_cli("-c", "SELECT 41 + 1 AS answer", cwd=home)
    assert r.returncode == 0 and "42" in r.stdout
    assert (home / "kudusql-data").is_dir()


def test_unknown_meta_command_fails(db: str, run_cli: Any) -> None:
    r = run_cli(db, "-c", "\\nope")
    assert r.returncode == 1
    assert "unknown command \\nope" in r.stderr


@pytest.mark.slow
def test_load_tpch(tmp_path: Path, run_cli: Any) -> None:
    db = str(tmp_path / "tpch")
    r = run_cli(db, "-c", "\\load tpch 0.01", "-c", "SELECT count(*) AS n FROM lineitem")
    assert r.returncode == 0, r.stderr
    assert "Loaded TPC-H sf 0.01" in r.stdout
    assert "60175" in r.stdout
    r = run_cli(db, "-c", "\\load tpch 0.01")
    assert r.returncode == 1 and "already exist" in r.stderr


def test_storage_warnings_show_without_a_traceback(tmp_path: Path, run_cli: Any) -> None:
    """The library only logs; the shell shows its warnings (here: a directory the
    catalog cannot explain, which the open keeps and warns about)."""
    path = str(tmp_path / "db")
    assert run_cli(path, "-c", "CREATE TABLE w (k INT PRIMARY KEY)").returncode == 0
    (tmp_path / "db" / "tablets" / "junk").mkdir()
    r = run_cli(path, "-c", "SELECT count(*) FROM w")
    assert r.returncode == 0, r.stderr
    assert "Warning: keeping" in r.stderr and "junk" in r.stderr
    assert "Traceback" not in r.stderr
