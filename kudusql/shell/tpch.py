"""Owns ``\\load tpch [sf]``: TPC-H sample data generated and loaded into the current
database.

Generation uses the ``tpchgen-cli`` console script next to the interpreter (extra
``tpch``; as ``benchmarks/data.py`` does), writing Parquet once per scale factor into a
cache directory (``$KUDUSQL_CACHE_DIR``, else ``$XDG_CACHE_HOME/kudusql`` or
``~/.cache/kudusql``). Each table is created with SQL (``CREATE TABLE ... PRIMARY KEY
... PARTITION BY HASH ...``, columns typed from the Parquet schema, key first) and
filled in Arrow batches through the storage table's ``insert`` (large batches take the
bulk-load path and skip the WAL), which is several times faster than ``executemany``
and lets the caller report rows done after every batch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.dbapi import Connection
from kudusql.parser.names import TableName

#: Tables in load order (small first) with their primary keys.
TABLES: dict[str, tuple[str, ...]] = {
    "region": ("r_regionkey",),
    "nation": ("n_nationkey",),
    "supplier": ("s_suppkey",),
    "customer": ("c_custkey",),
    "part": ("p_partkey",),
    "partsupp": ("ps_partkey", "ps_suppkey"),
    "orders": ("o_orderkey",),
    "lineitem": ("l_orderkey", "l_linenumber"),
}
DEFAULT_SF = 0.1
BATCH_ROWS = 200_000

#: progress(table, rows loaded so far over all tables, total rows)
Progress = Callable[[str, int, int], None]


@dataclass
class LoadReport:
    tables: dict[str, int] = field(default_factory=dict)
    failed_rows: int = 0


def sf_label(sf: float) -> str:
    return f"{sf:g}"


def cache_dir() -> Path:
    base = os.environ.get("KUDUSQL_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kudusql"


def find_tpchgen() -> str | None:
    """The ``tpchgen-cli`` executable beside ``sys.executable``, else the one on PATH
    (None when there is none; the TPC-H runner uses this too)."""
    local = Path(sys.executable).parent / "tpchgen-cli"
    if local.exists():
        return str(local)
    return shutil.which("tpchgen-cli")


def tpchgen() -> str:
    found = find_tpchgen()
    if found is None:
        raise OperationalError(
            "\\load tpch needs tpchgen-cli: pip install 'kudusql[tpch]' (or tpchgen-cli)"
        )
    return found


def generate(sf: float) -> Path:
    """The directory of the eight Parquet files at ``sf``, generated if missing."""
    out = cache_dir() / "tpch" / f"sf{sf_label(sf)}"
    if all((out / f"{t}.parquet").exists() for t in TABLES):
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    cmd = [tpchgen(), "parquet", "-s", sf_label(sf), "--output-dir", str(tmp), "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OperationalError(f"tpchgen-cli failed: {proc.stderr.strip() or proc.returncode}")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def sql_type(t: pa.DataType) -> str:
    """The kudusql SQL type for a column type ``tpchgen-cli`` writes (the TPC-H runner
    uses this too)."""
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_int32(t):
        return "INT"
    if pa.types.is_decimal(t):
        assert isinstance(t, pa.Decimal128Type)
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "STRING"
    raise ProgrammingError(f"no SQL type for the TPC-H column type {t}")


def create_sql(name: str, schema: pa.Schema, key: tuple[str, ...], partitions: int) -> str:
    fields = sorted(
        schema, key=lambda f: (f.name not in key, key.index(f.name) if f.name in key else 0)
    )
    cols = ",\n  ".join(f"{f.name} {sql_type(f.type)}" for f in fields)
    return (
        f"CREATE TABLE {name} (\n  {cols},\n  PRIMARY KEY ({', '.join(key)})\n)\n"
        f"PARTITION BY HASH ({key[0]}) PARTITIONS {partitions}"
    )


def _arrow_target(schema: pa.Schema) -> pa.Schema:
    return pa.schema(
        [
            pa.field(f.name, pa.string())
            if pa.types.is_string_view(f.type)
            else f.remove_metadata()
            for f in schema
        ]
    )


def load(
    conn: Connection,
    sf: float,
    progress: Progress,
    cancelled: Callable[[], bool] = lambda: False,
) -> LoadReport:
    """Generate (if needed) and load the eight TPC-H tables at ``sf`` into the current
    database; refuses if any of them exists. Stops between batches once ``cancelled()``."""
    if not 0 < sf <= 100:
        raise ProgrammingError("the TPC-H scale factor must be > 0 and <= 100")
    session = conn.session
    cur = conn.cursor()
    cur.execute("SHOW TABLES")
    existing = {r[0] for r in cur.fetchall()} & set(TABLES)
    if existing:
        raise ProgrammingError(
            f"table(s) {', '.join(sorted(existing))} already exist; load into another "
            "database: CREATE DATABASE tpch; USE tpch; \\load tpch"
        )
    src = generate(sf)
    files = {t: pq.ParquetFile(src / f"{t}.parquet") for t in TABLES}
    total = sum(f.metadata.num_rows for f in files.values())
    done = 0
    report = LoadReport()
    parts = 4 if sf >= 0.05 else 2
    for name, key in TABLES.items():
        f = files[name]
        big = f.metadata.num_rows > 100_000
        cur.execute(create_sql(name, f.schema_arrow, key, parts if big else 2))
        table = session.table(TableName(name))
        target = _arrow_target(f.schema_arrow)
        progress(name, done, total)
        loaded = 0
        for batch in f.iter_batches(batch_size=BATCH_ROWS):
            if cancelled():
                report.tables[name] = loaded
                return report
            data = pa.Table.from_batches([batch]).cast(target)
            res = table.insert(data)
            loaded += res.applied
            report.failed_rows += len(res.errors)
            done += batch.num_rows
            progress(name, done, total)
        report.tables[name] = loaded
    cur.close()
    return report
