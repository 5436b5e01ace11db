"""``mutate``: the engine with deltas. A slice of lineitem and orders is UPDATEd and
DELETEd (the same statements on a DuckDB native copy, whose row counts must agree),
then the 22 queries run and are checked against that copy twice: with the changes as
deltas (DeltaMemStores and ghosts over the loaded DiskRowSets), and after every table
was flushed and compacted (delta and merging compactions fold them into base data).

It works on copies of the loaded kudusql database and of DuckDB's native file, so the
loaded database stays as the Parquet files say and ``run``/``check`` keep working. The
copies are opened without the background maintenance thread, so nothing compacts
before the phase that asks for it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb

import kudusql
from kudusql.dbapi import Connection
from kudusql_tpch.errors import TpchError, WrongAnswers
from kudusql_tpch.load import duck_native
from kudusql_tpch.progress import Progress, log
from kudusql_tpch.run import DUCK_NATIVE, KUDUSQL, Suite, duck_runner, kudusql_runner, run_suite
from kudusql_tpch.spec import TPCH_KEYS

MUTATED_TABLES = ("lineitem", "orders")


def mutation_statements(percent: float) -> list[str]:
    """UPDATE one slice and DELETE another of lineitem and of orders, each about
    ``percent`` % of the table (by key residue; an order and its lines share a slice)."""
    if not 0 < percent <= 50:
        raise TpchError(f"--mutate-percent must be in (0, 50], got {percent:g}")
    m = max(2, round(100 / percent))
    return [
        "UPDATE lineitem SET l_quantity = l_quantity + 1, l_discount = l_discount + 0.01, "
        f"l_comment = 'mutated by tpch' WHERE l_orderkey % {m} = 1",
        f"DELETE FROM lineitem WHERE l_orderkey % {m} = 2",
        "UPDATE orders SET o_orderpriority = '1-URGENT', o_comment = 'mutated by tpch' "
        f"WHERE o_orderkey % {m} = 1",
        f"DELETE FROM orders WHERE o_orderkey % {m} = 2",
    ]


def storage_state(conn: Connection) -> dict[str, dict[str, int]]:
    """Per mutated table: DiskRowSets, REDO delta files and DeltaMemStore bytes."""
    cur = conn.cursor()
    cur.execute(
        "SELECT table_name, count(*), sum(redo_files), sum(dms_bytes), sum(rows) "
        "FROM sys.rowsets WHERE kind <> 'MemRowSet' GROUP BY table_name"
    )
    out = {
        str(t): {"diskrowsets": int(n), "redo_files": int(r), "dms_bytes": int(d), "rows": int(k)}
        for t, n, r, d, k in cur.fetchall()
        if t in MUTATED_TABLES
    }
    cur.close()
    return out


def _apply(
    conn: Connection, duck: duckdb.DuckDBPyConnection, statements: list[str]
) -> list[dict[str, Any]]:
    cur = conn.cursor()
    out = []
    for sql in statements:
        log(f"  {sql}")
        t0 = time.perf_counter()
        cur.execute(sql)
        ours_s = time.perf_counter() - t0
        n = cur.rowcount
        t0 = time.perf_counter()
        rel = duck.execute(sql).fetchall()
        duck_s = time.perf_counter() - t0
        want = int(rel[0][0])
        if n != want:
            raise WrongAnswers("mutate", [f"{sql}: changed {n} rows, DuckDB {want}"])
        out.append({"sql": sql, "rows": n, "kudusql_s": ours_s, "duckdb_native_s": duck_s})
    cur.close()
    return out


def _compact(conn: Connection, progress: bool | None) -> dict[str, float]:
    cur = conn.cursor()
    out = {}
    with Progress("compact", len(TPCH_KEYS), "tables", enabled=progress) as bar:
        for t in TPCH_KEYS:
            bar.note(t)
            t0 = time.perf_counter()
            cur.execute(f"ALTER TABLE {t} EXECUTE FLUSH")
            cur.execute(f"ALTER TABLE {t} EXECUTE COMPACT")
            out[t] = time.perf_counter() - t0
            bar.update()
    cur.close()
    return out


def run_mutation(
    db: Path,
    src: Path,
    queries: Mapping[str, str],
    *,
    repetitions: int,
    warmup: int,
    percent: float = 5.0,
    native_path: Path | None = None,
    before: Suite | None = None,
    progress: bool | None = None,
    keep: bool = False,
) -> tuple[dict[str, Any], list[Suite]]:
    """The mutation phase on copies of ``db`` and of DuckDB's native database
    (``native_path``; built from ``src`` if None). ``before``: timings of the loaded
    database to report beside (measured here if None). Returns the JSON section and
    the suites (before if measured, with deltas, after compaction)."""
    statements = mutation_statements(percent)
    work = Path(tempfile.mkdtemp(prefix="kudusql-tpch-mutate-"))
    suites: list[Suite] = []
    section: dict[str, Any] = {"percent": percent, "workdir": str(work) if keep else None}
    try:
        log(f"mutate: copying the database to {work}")
        copy = work / "kudusql"
        shutil.copytree(db, copy)
        duck_copy = work / "native.duckdb"
        if native_path is not None and native_path.exists():
            shutil.copyfile(native_path, duck_copy)
            duck = duckdb.connect(str(duck_copy))
        else:
            duck = duck_native(src, str(duck_copy))
        conn = kudusql.connect(str(copy), maintenance=False)
        try:
            systems = {KUDUSQL: kudusql_runner(conn), DUCK_NATIVE: duck_runner(duck)}
            opts: dict[str, Any] = dict(
                repetitions=repetitions,
                warmup=warmup,
                reference=(DUCK_NATIVE, None),
                checked=[KUDUSQL],
                progress=progress,
            )
            if before is None:
                before = run_suite("before", systems, queries, **opts)
                suites.append(before)
            section["before"] = before.to_json()
            section["storage_loaded"] = storage_state(conn)
            log("mutate: applying the changes (kudusql and DuckDB native)")
            section["statements"] = _apply(conn, duck, statements)
            section["storage_with_deltas"] = storage_state(conn)
            deltas = run_suite("deltas", systems, queries, **opts)
            suites.append(deltas)
            section["with_deltas"] = deltas.to_json()
            t0 = time.perf_counter()
            section["compaction_tables_s"] = _compact(conn, progress)
            section["compaction_s"] = time.perf_counter() - t0
            section["storage_compacted"] = storage_state(conn)
            compacted = run_suite("compacted", systems, queries, **opts)
            suites.append(compacted)
            section["after_compaction"] = compacted.to_json()
        finally:
            conn.close()
            duck.close()
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    return section, suites
