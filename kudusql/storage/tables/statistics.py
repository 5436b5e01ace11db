"""COMPUTE STATS: a table's row counts per tablet and each column's min, max and null
count, folded from the batches of one scan at one snapshot.

The embedded table (reading its tablets) and the cluster's client (reading tablet
servers) fold the same way, so the statistics a table keeps are the same in both modes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.hybrid_time import to_micros
from kudusql.common.json_values import to_json_value
from kudusql.common.schema import Schema


def column_statistics(
    schema: Schema,
    tablets: Sequence[tuple[Any, Iterable[pa.RecordBatch]]],
    snapshot: int,
) -> dict[str, Any]:
    """The statistics of ``tablets`` (each its id and the batches of every column of its
    rows live at ``snapshot``), as the catalog keeps them."""
    cols: dict[str, dict[str, Any]] = {
        c.name: {"min": None, "max": None, "null_count": 0} for c in schema.columns
    }
    per_tablet = []
    total = 0
    for tablet_id, batches in tablets:
        rows = 0
        for b in batches:
            rows += b.num_rows
            for c in schema.columns:
                _fold(cols[c.name], b.column(c.name))
        per_tablet.append({"tablet_id": tablet_id, "rows": rows})
        total += rows
    return {
        "rows": total,
        "snapshot_micros": to_micros(snapshot),
        "tablets": per_tablet,
        "columns": {k: _as_json(v) for k, v in cols.items()},
    }


def _fold(acc: dict[str, Any], col: pa.ChunkedArray[Any] | pa.Array[Any]) -> None:
    acc["null_count"] += col.null_count
    if len(col) == col.null_count:
        return
    try:
        mm = pc.min_max(col)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo is not None and (acc["min"] is None or lo < acc["min"]):
        acc["min"] = lo
    if hi is not None and (acc["max"] is None or hi > acc["max"]):
        acc["max"] = hi


def _as_json(acc: dict[str, Any]) -> dict[str, Any]:
    return {
        "min": None if acc["min"] is None else to_json_value(acc["min"]),
        "max": None if acc["max"] is None else to_json_value(acc["max"]),
        "null_count": acc["null_count"],
    }
