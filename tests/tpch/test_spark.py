"""The Spark loader at SF 0.01: the default ``load`` path through
``pyspark_kudusql.pipeline.load_tables``, then every answer checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kudusql_tpch.cli import main

pytestmark = pytest.mark.spark


def test_spark_loader_sf001(tpch_root: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyspark_kudusql.pipeline")
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    common = ["--sf", "0.01", "--data-dir", str(tpch_root), "--db", str(tmp_path / "db")]
    common += ["--out", str(tmp_path / "out"), "--quiet"]
    assert main(["load", "--loader", "spark", *common]) == 0
    assert main(["check", *common]) == 0
    data = json.loads((tmp_path / "out" / "sf0.01" / "results.json").read_text())
    assert data["load"]["loader"] == "spark"
    assert data["load"]["tables"]["lineitem"]["rows"] == 60_175
    assert data["check"]["answers"]["kudusql"] == {"correct": 22, "checked": 22}
