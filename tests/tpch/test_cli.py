"""The runner end to end at SF 0.01 through its command line: generate, load with the
Arrow loader, check all 22 answers against DuckDB, compare, micro-queries, the mutation
phase and the report, all in one ``all``; and its failures: a wrong answer, a missing
generator, a missing Spark, a database that was never loaded. Times are never
asserted on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kudusql
import kudusql_tpch.generate
import kudusql_tpch.load
from kudusql_tpch.cli import main
from tests.support.timing import scaled

SF = "0.01"


def _args(cmd: str, root: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        cmd,
        "--sf",
        SF,
        "--data-dir",
        str(root),
        "--db",
        str(tmp / "db.kudusql"),
        "--out",
        str(tmp / "out"),
        "--loader",
        "arrow",
        "--repetitions",
        "1",
        "--warmup",
        "0",
        "--quiet",
        *extra,
    ]


def test_all_end_to_end(
    tpch_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args("all", tpch_root, tmp_path)) == 0
    out = capsys.readouterr().out
    assert "check: 22 of 22 answers equal" in out
    res_dir = tmp_path / "out" / "sf0.01"
    data: dict[str, Any] = json.loads((res_dir / "results.json").read_text())

    assert data["sf"] == 0.01
    assert data["machine"]["cores"] >= 1 and data["machine"]["platform"]
    for name in ("python", "kudusql", "duckdb", "pyarrow", "sqlglot"):
        assert data["versions"][name], name
    assert data["settings"]["loader"] == "arrow"

    load = data["load"]
    assert load["loader"] == "arrow"
    assert load["tables"]["lineitem"]["rows"] == 60_175
    assert load["tables"]["nation"]["buckets"] == 0  # one tablet
    assert load["tables"]["region"]["buckets"] == 0
    assert load["duckdb_native_s"] > 0 and load["ratio_vs_duckdb_native"] > 0

    check = data["check"]
    assert check["answers"]["kudusql"] == {"correct": 22, "checked": 22}
    assert check["failures"] == []
    assert len(check["queries"]) == 22

    compare = data["compare"]
    assert compare["systems"] == ["kudusql", "duckdb_parquet", "duckdb_native"]
    assert compare["answers"]["kudusql"] == {"correct": 22, "checked": 22}
    assert compare["answers"]["duckdb_native"] == {"correct": 22, "checked": 22}
    assert set(compare["geomean_ratio"]) == {"duckdb_parquet", "duckdb_native"}
    q1 = compare["queries"]["q01"]
    assert q1["kudusql"]["rows"] == 4 and len(q1["kudusql"]["runs_ms"]) == 1

    micro = data["micro"]
    assert list(micro["queries"]) == ["Q1", "COUNT(*)", "l_quantity = 48", "l_orderkey = 2000"]
    assert micro["answers"]["kudusql"]["correct"] == 4

    mut = data["mutation"]
    assert [s["rows"] > 0 for s in mut["statements"]] == [True] * 4
    for phase in ("with_deltas", "after_compaction"):
        assert mut[phase]["answers"]["kudusql"] == {"correct": 22, "checked": 22}, phase
    assert mut["storage_with_deltas"]["lineitem"]["dms_bytes"] > 0
    assert mut["storage_compacted"]["lineitem"]["dms_bytes"] == 0

    goals = {g["goal"]: g for g in data["goals"]}
    assert goals["22 of 22 answers correct at SF 0.01"]["met"] is True
    assert goals["geomean vs DuckDB over Parquet"]["value"] > 0

    md = (res_dir / "report.md").read_text()
    assert "## Queries" in md and "| q22 |" in md and "## Mutation phase" in md
    assert "Micro-queries" in md and "**WRONG**" not in md
    assert (res_dir / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(list((res_dir / "history").glob("results-*.json"))) == 1

    # The loaded database was left as loaded (mutate works on a copy): check again.
    assert main(_args("check", tpch_root, tmp_path, "--queries", "1,6")) == 0


def test_wrong_answer_fails_loudly(
    tpch_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args("load", tpch_root, tmp_path)) == 0
    with kudusql.connect(str(tmp_path / "db.kudusql")) as conn:
        cur = conn.cursor()
        cur.execute("UPDATE lineitem SET l_quantity = l_quantity + 1 WHERE l_orderkey < 100")
        assert cur.rowcount > 0
    capsys.readouterr()
    assert main(_args("check", tpch_root, tmp_path, "--queries", "1,2")) == 1
    err = capsys.readouterr().err
    assert "WRONG q01" in err and "expected" in err
    assert "FAILED: 1 wrong answer(s) in check" in err
    assert "q02" not in err  # Q2 does not read lineitem
    data = json.loads((tmp_path / "out" / "sf0.01" / "results.json").read_text())
    assert data["check"]["answers"]["kudusql"] == {"correct": 1, "checked": 2}
    assert data["check"]["queries"]["q01"]["kudusql"]["correct"] is False
    assert data["goals"][0]["met"] is False


def test_not_loaded_is_a_setup_error(
    tpch_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_args("run", tpch_root, tmp_path)) == 2
    assert "python -m kudusql_tpch load" in capsys.readouterr().err


def test_missing_tpchgen_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(_args("generate", tmp_path / "data", tmp_path)) == 2
    err = capsys.readouterr().err
    assert "tpchgen-cli not found" in err and "pip install tpchgen-cli" in err


def test_missing_spark(
    tpch_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    real = kudusql_tpch.load.importlib.import_module

    def no_pyspark(name: str, package: str | None = None) -> object:
        if name.startswith("pyspark"):
            raise ImportError(f"No module named {name!r}")
        return real(name, package)

    monkeypatch.setattr(kudusql_tpch.load.importlib, "import_module", no_pyspark)
    args = _args("load", tpch_root, tmp_path)
    args[args.index("arrow")] = "spark"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[spark]'" in err and "Java 17" in err
    assert not (tmp_path / "db.kudusql").exists()  # failed before touching the database


def test_bad_query_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args("run", tmp_path, tmp_path, "--queries", "0,23")) == 2
    assert "queries are 1..22" in capsys.readouterr().err


def test_python_dash_m_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kudusql_tpch", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
    )
    for cmd in ("generate", "load", "run", "check", "compare", "micro", "mutate", "report"):
        assert cmd in proc.stdout
    assert kudusql_tpch.generate.INSTALL_HINT


def test_the_installed_script_names_itself_in_its_usage() -> None:
    import subprocess

    script = Path(sys.executable).parent / "kudusql-tpch"
    out = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert out.startswith("usage: kudusql-tpch ")
