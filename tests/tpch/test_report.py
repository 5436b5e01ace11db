"""The report: markdown and PNG from a results document, goals, a baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kudusql_tpch import results
from kudusql_tpch.report import markdown, write_report
from kudusql_tpch.run import DUCK_NATIVE, DUCK_PARQUET, KUDUSQL, run_suite


def _doc(scale: float) -> dict[str, Any]:
    times = {KUDUSQL: 10.0 * scale, DUCK_PARQUET: 20.0, DUCK_NATIVE: 5.0}

    def runner(system: str) -> Any:
        return lambda sql: [(1,)]

    suite = run_suite(
        "compare",
        {s: runner(s) for s in times},
        {"q01": "SELECT 1", "q02": "SELECT 2"},
        repetitions=1,
        warmup=0,
        reference=(DUCK_PARQUET, None),
        checked=[KUDUSQL, DUCK_NATIVE],
        progress=False,
    )
    for o in suite.outcomes.values():  # fixed times, so the ratios are known
        for s, t in times.items():
            o.times_ms[s] = [t]
    data: dict[str, Any] = {
        "sf": 0.01,
        "updated": "2026-11-23T00:00:00+00:00",
        "machine": results.machine(),
        "versions": {"python": "3.11", "kudusql": "0.1.0"},
        "settings": {"loader": "arrow", "repetitions": 1},
        "load": {
            "loader": "arrow",
            "seconds": 3.0,
            "rows": 10,
            "tables": {"lineitem": {"rows": 10, "seconds": 3.0, "buckets": 2, "rejected": 0}},
            "duckdb_native_s": 2.0,
            "ratio_vs_duckdb_native": 1.5,
        },
        "compare": suite.to_json(),
    }
    data["goals"] = results.goals(data)
    return data


def test_goals() -> None:
    goals = {g["goal"]: g for g in _doc(1.0)["goals"]}
    assert goals["geomean vs DuckDB over Parquet"]["value"] == 0.5
    assert goals["geomean vs DuckDB over Parquet"]["met"] is True
    assert goals["geomean vs DuckDB over Parquet"]["stretch_met"] is True
    assert goals["geomean vs DuckDB native (reported)"]["value"] == 2.0
    assert goals["arrow load vs DuckDB native load"]["met"] is True
    # 2 queries checked, not 22: the correctness goal is not met
    assert goals["22 of 22 answers correct at SF 0.01"]["met"] is False


def test_markdown_and_chart(tmp_path: Path) -> None:
    paths = write_report(_doc(1.0), tmp_path, baseline=_doc(2.0))
    md = paths["markdown"]
    assert md is not None
    text = md.read_text()
    assert "| q01 | 1 | 10.0 | 20.0 | 5.00 | 0.50x | 2.00x | 20.0 | 0.50x | ok |" in text
    assert "| **geomean** |" in text
    assert "baseline kudusql ms" in text
    assert "Loader `arrow`: 3.0 s; DuckDB native load of the same files 2.0 s (1.50x)." in text
    chart = paths["chart"]
    assert chart is not None and chart.read_bytes()[:4] == b"\x89PNG"


def test_results_file_merges_sections(tmp_path: Path) -> None:
    path = tmp_path / "sf1" / "results.json"
    results.update(path, 1.0, {"loader": "arrow"}, load={"loader": "arrow", "seconds": 1.0})
    results.update(path, 1.0, {"repetitions": 3}, run={"queries": {}})
    data = json.loads(path.read_text())
    assert data["load"]["seconds"] == 1.0 and "run" in data
    assert data["settings"] == {"loader": "arrow", "repetitions": 3}
    assert data["versions"]["duckdb"] and data["machine"]["cores"]
    # another scale factor's file starts over
    results.update(path, 0.1, {}, run={"queries": {}})
    assert "load" not in json.loads(path.read_text())


def test_markdown_names_wrong_answers() -> None:
    data = _doc(1.0)
    data["check"] = {"failures": ["q07 (kudusql): row 0, column 2: 1, expected 2"]}
    assert "## WRONG ANSWERS" in markdown(data)
