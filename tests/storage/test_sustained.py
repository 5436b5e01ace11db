"""Sustained mixed load with the maintenance manager on (slow: ten minutes by default,
``KUDUSQL_SUSTAINED_S`` to change). Asserts what is not a time: no row is lost and the
numbers of rowsets and delta files stay bounded. Throughput over time is reported by
``python -m benchmarks sustained``."""

from __future__ import annotations

import os
from typing import Any

import pytest

from benchmarks.bench_sustained import OPTIONS, summary, sustained


@pytest.mark.slow
def test_sustained_load_stays_bounded(tmp_path: Any) -> None:
    seconds = float(os.environ.get("KUDUSQL_SUSTAINED_S", "600"))
    r = sustained(str(tmp_path / "t"), seconds)
    assert not r.errors
    assert r.rows_found == r.rows_expected
    s = summary(r)
    # Rowsets: what the data needs at the target size, plus the flushes not merged yet.
    assert s["max_rowsets"] <= 2 * s["disk_bytes"] / OPTIONS.rowset_target_bytes + 16, s
    assert s["max_redo"] <= 4 * s["max_rowsets"] + 8, s
    assert s["max_undo"] <= 4 * s["max_rowsets"] + 8, s
    assert {"flush_mrs", "merge_compaction"} <= set(r.ops), r.ops
