"""Benchmark data: TPC-H ``lineitem`` from ``tpchgen-cli``, cached as Parquet.

The generator is the ``tpchgen-cli`` console script installed next to the running
interpreter (``.venv/bin``), found by ``kudusql_tpch.generate.tpchgen_path``. Files are cached
in ``benchmarks/data/sf<N>/`` so only the first run at a scale factor pays for
generation (about 5 s at SF 1).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql_tpch.generate import tpchgen_path
from kudusql_tpch.spec import sf_label

DATA_DIR = Path(__file__).resolve().parent / "data"
LINEITEM_KEY = ("l_orderkey", "l_linenumber")


def lineitem_path(sf: float) -> Path:
    """Path of the cached ``lineitem.parquet`` at scale factor ``sf``, generating it if needed."""
    out = DATA_DIR / f"sf{sf_label(sf)}"
    path = out / "lineitem.parquet"
    if path.exists():
        return path
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    cmd = [
        tpchgen_path(),
        "parquet",
        "-s",
        sf_label(sf),
        "--tables",
        "lineitem",
        "--output-dir",
        str(tmp),
        "--quiet",
    ]
    print(f"generating TPC-H lineitem SF {sf_label(sf)}: {' '.join(cmd)}", file=sys.stderr)
    subprocess.run(cmd, check=True)
    os.replace(tmp / "lineitem.parquet", path)
    shutil.rmtree(tmp, ignore_errors=True)
    return path


def load_lineitem(sf: float) -> pa.Table:
    """TPC-H lineitem at ``sf`` as one Arrow table (types as the generator wrote them)."""
    return pq.read_table(lineitem_path(sf))


def kudu_schema(arrow_schema: pa.Schema, key: tuple[str, ...]) -> Schema:
    """A kudusql schema for ``arrow_schema``: ``key`` columns first, NOT NULL."""
    fields = sorted(
        arrow_schema, key=lambda f: (f.name not in key, key.index(f.name) if f.name in key else 0)
    )
    cols = [
        ColumnSchema(f.name, DataType.from_arrow(f.type), nullable=f.name not in key)
        for f in fields
    ]
    return Schema.build(cols, list(key))


def lineitem_rows(sf: float, rows: int | None) -> pa.Table:
    """Lineitem at ``sf``, cut to its first ``rows`` rows when given (combined chunks)."""
    table = load_lineitem(sf)
    if rows is not None:
        table = table.slice(0, rows)
    return table.combine_chunks()


def describe(table: pa.Table) -> str:
    mib = table.nbytes / 2**20
    return f"{table.num_rows:,} rows x {table.num_columns} columns, {mib:,.0f} MiB in Arrow"
