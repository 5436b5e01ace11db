"""The SQL engine end to end (``kudusql.connect``), side by side with DuckDB and SQLite.

1. TPC-H, all 22 queries at ``--sf`` (default 1; data from ``tpchgen-cli``, all 8
   tables cached as Parquet in ``benchmarks/data/sf<N>/``; queries from
   ``kudusql_tpch/queries`` or ``$KUDUSQL_TPCH_QUERIES``; the helpers live in the ``tpch``
   package, the TPC-H runner of issue 9, ``python -m kudusql_tpch``). Ours: a kudusql database
   whose tables are created through SQL (``CREATE TABLE ... PRIMARY KEY (TPC-H key)
   PARTITION BY HASH (first key column) PARTITIONS n``, n scaled to rows and cores, see
   ``buckets``), loaded with ``Table.insert`` of the Parquet rows cast to the table's
   Arrow schema, then ``ALTER TABLE t EXECUTE FLUSH``; each query through a DB-API cursor
   (``execute`` + ``fetch_arrow_table``). Rivals: DuckDB over the Parquet files (views
   on ``read_parquet``) and DuckDB native tables (a file database loaded with CTAS).
   Per query: one untimed warm-up run per system, then ``--reps`` (default 3) runs
   interleaved, median. Every answer must equal DuckDB's (``compare_results``).
   Goal: kudusql geomean <= 1.0x DuckDB over Parquet (the native geomean is reported).
2. ``SELECT * FROM t WHERE id = ?`` on ``--rows`` (default 1M) rows (``id BIGINT``
   primary key, ``HASH (id) PARTITIONS 2``, flushed, and five more columns), 5,000
   random keys one at a time after 500 warm-up lookups, each timed with
   ``perf_counter_ns``: kudusql ``cursor.execute(sql, (k,))`` + ``fetchall()``;
   SQLite (stdlib, file db, WAL, ``INTEGER PRIMARY KEY``); DuckDB (file db,
   ``PRIMARY KEY``, ``PREPARE`` once then ``EXECUTE q(k)``). Goal: p50 <= 100 µs.
3. Single-row ``INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)``, 5,000 rows one statement
   each (after 200 untimed), p50: kudusql ``cursor.execute`` (autocommit; WAL without
   fsync, the default) vs SQLite (WAL, ``synchronous=NORMAL``, autocommit) vs DuckDB
   (file db, autocommit). Goal: p50 <= 150 µs. Then ``executemany`` of 10,000 rows
   into a fresh table, best of --reps: goal >= 100,000 rows/s (reported as the time of
   10,000 rows, goal < 0.1 s). SQLite's executemany runs in one transaction.
4. ``UPDATE lineitem SET l_comment = '<v>' WHERE l_orderkey % 10 = <r>`` (about 10% of
   lineitem) on the TPC-H tables of part 1, against DuckDB's native table; --reps
   runs, each with another value and residue, median; the row counts must agree.
   Goal: <= 1.0x.

``--profile`` adds cProfile listings of the slowest TPC-H query (by ratio), of 1,000
point lookups and of the UPDATE. Default run: about 2 minutes at SF 0.1.
"""

from __future__ import annotations

import os
import sqlite3
import time
import traceback
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

import kudusql
from benchmarks.common import Config, Goal, Result, log, profile, timed, workdir
from benchmarks.data import DATA_DIR
from kudusql.dbapi import Connection
from kudusql_tpch.check import compare_results
from kudusql_tpch.generate import generate_tpch
from kudusql_tpch.load import buckets, duck_native, duck_parquet, load_kudusql
from kudusql_tpch.run import duck_rows, run_kudusql
from kudusql_tpch.run import geomean as _geomean
from kudusql_tpch.run import median as _median
from kudusql_tpch.spec import SF1_ANSWER_ROWS, TPCH_KEYS, has_order_by, load_queries, sf_label

NAME = "sql"


# -- part 1: TPC-H -------------------------------------------------------------------------------
def bench_tpch(cfg: Config, res: Result, d: Path) -> tuple[Connection, duckdb.DuckDBPyConnection]:
    """Part 1; returns the kudusql connection and DuckDB's native database (for part 4)."""
    data_dir = generate_tpch(cfg.sf, DATA_DIR / f"sf{sf_label(cfg.sf)}")
    queries = load_queries()
    reps = cfg.repetitions(3)
    log(f"loading TPC-H SF {sf_label(cfg.sf)} into kudusql")
    conn = kudusql.connect(str(d / "kudusql"))
    t_load, counts = timed(lambda: load_kudusql(conn, data_dir, lambda t: buckets(t, cfg.sf)))
    res.info["kudusql_load_s"] = round(t_load, 1)
    res.info["buckets"] = {t: buckets(t, cfg.sf) for t in TPCH_KEYS}
    res.info["lineitem_rows"] = counts["lineitem"]
    log("loading DuckDB native tables")
    t_native, native = timed(lambda: duck_native(data_dir, str(d / "native.duckdb")))
    res.info["duckdb_native_load_s"] = round(t_native, 1)
    parquet = duck_parquet(data_dir)
    ours_t: dict[int, float] = {}
    parquet_t: dict[int, float] = {}
    native_t: dict[int, float] = {}
    wrong: list[str] = []
    for i, sql in queries.items():
        ordered = has_order_by(sql)
        log(f"q{i:02d}")
        try:
            got = run_kudusql(conn, sql)  # warm-up, and the answer checked
        except Exception as e:
            wrong.append(f"q{i:02d}: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        want = parquet.execute(sql).fetchall()
        diff = compare_results(got, want, ordered=ordered)
        native_diff = compare_results(native.execute(sql).fetchall(), want, ordered=ordered)
        if diff is not None:
            wrong.append(f"q{i:02d}: {diff}")
        if native_diff is not None:
            wrong.append(f"q{i:02d} (DuckDB native vs Parquet): {native_diff}")
        if cfg.sf == 1 and len(want) != SF1_ANSWER_ROWS[i - 1]:
            wrong.append(f"q{i:02d}: DuckDB returned {len(want)} rows at SF 1")
        runs: tuple[list[float], list[float], list[float]] = ([], [], [])
        for _ in range(reps):
            runs[0].append(timed(partial(run_kudusql, conn, sql))[0])
            runs[1].append(timed(partial(duck_rows, parquet, sql))[0])
            runs[2].append(timed(partial(duck_rows, native, sql))[0])
        ours_t[i], parquet_t[i], native_t[i] = (round(_median(r) * 1000, 2) for r in runs)
    for i in ours_t:
        res.add(f"TPC-H q{i:02d} (vs DuckDB/Parquet)", ours_t[i], parquet_t[i], unit="ms")
    done = sorted(ours_t)
    if done:
        gm = _geomean([ours_t[i] for i in done])
        res.add(
            f"TPC-H geomean of {len(done)} vs DuckDB/Parquet",
            gm,
            _geomean([parquet_t[i] for i in done]),
            unit="ms",
            goal=Goal(max_ratio=1.0),
        )
        res.add(
            f"TPC-H geomean of {len(done)} vs DuckDB native",
            gm,
            _geomean([native_t[i] for i in done]),
            unit="ms",
        )
        res.add(
            "TPC-H total vs DuckDB/Parquet",
            sum(ours_t.values()),
            sum(parquet_t.values()),
            unit="ms",
        )
        res.notes.append(
            "ours / DuckDB native per query: "
            + ", ".join(f"q{i:02d} {ours_t[i] / native_t[i]:.1f}x" for i in done)
        )
    res.info["tpch_answers"] = "all correct" if not wrong else f"{len(wrong)} WRONG"
    res.notes.extend(f"WRONG ANSWER {w}" for w in wrong)
    res.info["tpch_ms"] = {
        f"q{i:02d}": {
            "kudusql": round(ours_t[i], 2),
            "duckdb_parquet": round(parquet_t[i], 2),
            "duckdb_native": round(native_t[i], 2),
        }
        for i in done
    }
    if cfg.profile and done:
        worst = max(done, key=lambda i: ours_t[i] / parquet_t[i])
        sql = queries[worst]
        res.profiles[f"TPC-H q{worst:02d} (worst ratio)"] = profile(
            lambda: run_kudusql(conn, sql), top=25
        )
    parquet.close()
    return conn, native


# -- part 2: point lookups -----------------------------------------------------------------------
POINT_COLS = "id BIGINT, a BIGINT, b DOUBLE, s STRING, d DATE, i INT"


def point_table(n: int, rng: np.random.Generator) -> pa.Table:
    idx = np.arange(n)
    s = pa.array(np.char.add("row-", np.char.zfill(idx.astype("U16"), 16)).astype(object))
    return pa.table(
        {
            "id": idx.astype(np.int64),
            "a": rng.integers(-(10**12), 10**12, n, dtype=np.int64),
            "b": rng.random(n),
            "s": s,
            "d": pa.array(rng.integers(0, 20_000, n, dtype=np.int32)).cast(pa.date32()),
            "i": rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32),
        }
    )


def kudusql_ddl(name: str, n_buckets: int = 2) -> str:
    cols = POINT_COLS.replace("id BIGINT", "id BIGINT PRIMARY KEY")
    return f"CREATE TABLE {name} ({cols}) PARTITION BY HASH (id) PARTITIONS {n_buckets}"


def latencies_us(fn: Callable[[Any], object], args: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    out = np.empty(len(args), dtype=np.float64)
    got: list[Any] = []
    clock = time.perf_counter_ns
    for j, a in enumerate(args):
        t0 = clock()
        r = fn(a)
        out[j] = clock() - t0
        got.append(r)
    return out / 1000.0, got


def pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q))


def sqlite_db(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    return con


SQLITE_COLS = "id INTEGER PRIMARY KEY, a INTEGER, b REAL, s TEXT, d TEXT, i INTEGER"


def bench_point_lookup(cfg: Config, res: Result, d: Path) -> None:
    n = cfg.rows or 1_000_000
    rng = np.random.default_rng(cfg.seed)
    data = point_table(n, rng)
    log(f"point lookups: loading {n:,} rows")
    conn = kudusql.connect(str(d / "points"))
    cur = conn.cursor()
    cur.execute(kudusql_ddl("t"))
    t = conn.session.db.table("t")
    t.insert(data.cast(t.schema.arrow_schema()))
    cur.execute("ALTER TABLE t EXECUTE FLUSH")
    lite = sqlite_db(d / "points.sqlite")
    lite.execute(f"CREATE TABLE t ({SQLITE_COLS})")
    lite.execute("BEGIN")
    cols = [data.column(c).to_pylist() for c in ("id", "a", "b", "s")]
    cols.append([str(x) for x in data.column("d").to_pylist()])
    cols.append(data.column("i").to_pylist())
    lite.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", zip(*cols, strict=True))
    lite.execute("COMMIT")
    duck = duckdb.connect(str(d / "points.duckdb"))
    duck.execute(f"CREATE TABLE t ({POINT_COLS}, PRIMARY KEY (id))")
    duck.register("point_rows", data)
    duck.execute("INSERT INTO t SELECT * FROM point_rows")
    duck.unregister("point_rows")
    duck.execute("CHECKPOINT")
    duck.execute("PREPARE q AS SELECT * FROM t WHERE id = $1")
    sql = "SELECT * FROM t WHERE id = ?"
    keys = rng.integers(0, n, 5000).tolist()
    warm = rng.integers(0, n, 500).tolist()

    def ours(k: int) -> list[tuple[Any, ...]]:
        cur.execute(sql, (k,))
        return cur.fetchall()

    def lite_q(k: int) -> list[tuple[Any, ...]]:
        return lite.execute(sql, (k,)).fetchall()

    def duck_q(k: int) -> list[tuple[Any, ...]]:
        return duck.execute(f"EXECUTE q({int(k)})").fetchall()

    log("point lookups")
    fns = (ours, lite_q, duck_q)
    for fn in fns:
        latencies_us(fn, warm)
    (o, got), (s, _), (u, _) = (latencies_us(fn, keys) for fn in fns)
    ids = data.column("id").to_numpy()
    a = data.column("a").to_numpy()
    for k, rows in zip(keys, got, strict=True):
        if len(rows) != 1 or rows[0][0] != ids[k] or rows[0][1] != a[k]:
            raise RuntimeError(f"lookup of {k} returned {rows!r}")
    goal = Goal(max_value=100.0)
    res.add(f"SELECT * WHERE id = ? p50 vs SQLite ({n:,} rows)", pct(o, 50), pct(s, 50), unit="µs")
    res.rows[-1].goal = goal
    res.add("SELECT * WHERE id = ? p50 vs DuckDB prepared", pct(o, 50), pct(u, 50), unit="µs")
    res.add("SELECT * WHERE id = ? p99 vs SQLite", pct(o, 99), pct(s, 99), unit="µs")
    if cfg.profile:
        res.profiles["1,000 SELECT * FROM t WHERE id = ?"] = profile(
            lambda: latencies_us(ours, keys[:1000])
        )
    conn.close()
    lite.close()
    duck.close()


# -- part 3: inserts -----------------------------------------------------------------------------
def bench_inserts(cfg: Config, res: Result, d: Path) -> None:
    rng = np.random.default_rng(cfg.seed + 1)
    single = point_table(5200, rng).to_pylist()
    rows = [tuple(r.values()) for r in single]
    many = [tuple(r.values()) for r in point_table(10_000, rng).to_pylist()]
    lite_rows = [(*r[:4], r[4].isoformat(), r[5]) for r in rows]
    lite_many = [(*r[:4], r[4].isoformat(), r[5]) for r in many]
    sql = "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)"
    conn = kudusql.connect(str(d / "inserts"))
    cur = conn.cursor()
    cur.execute(kudusql_ddl("t"))
    lite = sqlite_db(d / "inserts.sqlite")
    lite.execute(f"CREATE TABLE t ({SQLITE_COLS})")
    duck = duckdb.connect(str(d / "inserts.duckdb"))
    duck.execute(f"CREATE TABLE t ({POINT_COLS}, PRIMARY KEY (id))")

    def ours(r: tuple[Any, ...]) -> int:
        cur.execute(sql, r)
        return int(cur.rowcount)

    def lite_i(r: tuple[Any, ...]) -> object:
        return lite.execute(sql, r)

    def duck_i(r: tuple[Any, ...]) -> object:
        return duck.execute(sql, r)

    log("single-row INSERTs")
    o, applied = latencies_us(ours, rows)
    s, _ = latencies_us(lite_i, lite_rows)
    u, _ = latencies_us(duck_i, rows)
    if sum(applied) != len(rows):
        raise RuntimeError(f"single-row INSERTs applied {sum(applied)} of {len(rows)}")
    o, s, u = o[200:], s[200:], u[200:]
    res.add("single-row INSERT p50 vs SQLite", pct(o, 50), pct(s, 50), unit="µs")
    res.rows[-1].goal = Goal(max_value=150.0)
    res.add("single-row INSERT p50 vs DuckDB", pct(o, 50), pct(u, 50), unit="µs")
    res.add("single-row INSERT p99 vs SQLite", pct(o, 99), pct(s, 99), unit="µs")
    if cfg.profile:
        extra = [(r[0] + 10_000_000, *r[1:]) for r in rows[:1000]]
        res.profiles["1,000 single-row INSERTs"] = profile(lambda: latencies_us(ours, extra))

    log("executemany of 10,000 rows")
    ours_t: list[float] = []
    lite_t: list[float] = []
    duck_t: list[float] = []
    for rep in range(cfg.repetitions(3)):
        name = f"m{rep}"
        cur.execute(kudusql_ddl(name))
        msql = sql.replace(" t ", f" {name} ")
        dt, _ = timed(partial(cur.executemany, msql, many))
        if cur.rowcount != len(many):
            raise RuntimeError(f"executemany applied {cur.rowcount} of {len(many)}")
        ours_t.append(dt)
        lite.execute(f"CREATE TABLE {name} ({SQLITE_COLS})")

        def lite_many_fn(msql: str = msql) -> None:
            lite.execute("BEGIN")
            lite.executemany(msql, lite_many)
            lite.execute("COMMIT")

        lite_t.append(timed(lite_many_fn)[0])
        if rep == 0:  # DuckDB's executemany is slow (~ms per row): time it once
            duck.execute(f"CREATE TABLE {name} ({POINT_COLS}, PRIMARY KEY (id))")
            duck_t.append(timed(partial(duck.executemany, msql, many))[0])
    res.add("executemany 10,000 rows vs SQLite", ours_t, lite_t, goal=Goal(max_value=0.1))
    res.add("executemany 10,000 rows vs DuckDB", ours_t, duck_t)
    res.info["executemany_rows_per_s"] = round(len(many) / min(ours_t))
    if cfg.profile:
        cur.execute(kudusql_ddl("mp"))
        res.profiles["executemany 10,000 rows"] = profile(
            lambda: cur.executemany(sql.replace(" t ", " mp "), many)
        )
    conn.close()
    lite.close()
    duck.close()


# -- part 4: UPDATE ------------------------------------------------------------------------------
def bench_update(
    cfg: Config, res: Result, conn: Connection, native: duckdb.DuckDBPyConnection
) -> None:
    log("UPDATE of 10% of lineitem")
    cur = conn.cursor()
    ours_t: list[float] = []
    duck_t: list[float] = []
    reps = cfg.repetitions(3)
    for rep in range(reps + (1 if cfg.profile else 0)):
        sql = f"UPDATE lineitem SET l_comment = 'updated {rep}' WHERE l_orderkey % 10 = {rep % 10}"
        if rep == reps:
            res.profiles["UPDATE of 10% of lineitem"] = profile(partial(cur.execute, sql))
            native.execute(sql)
            break
        dt, _ = timed(partial(cur.execute, sql))
        ours_t.append(dt)
        n_ours = cur.rowcount
        dt, rel = timed(partial(duck_rows, native, sql))
        duck_t.append(dt)
        n_duck = rel[0][0]
        if n_ours != n_duck:
            raise RuntimeError(f"UPDATE changed {n_ours} rows, DuckDB {n_duck}")
        res.info["update_rows"] = n_ours
    res.add("UPDATE l_comment of 10% of lineitem", ours_t, duck_t, goal=Goal(max_ratio=1.0))
    res.rows[-1].ours = _median(ours_t)
    res.rows[-1].rival = _median(duck_t)
    check = "SELECT count(*) FROM lineitem WHERE l_comment LIKE 'updated %'"
    if run_kudusql(conn, check) != native.execute(check).fetchall():
        raise RuntimeError("lineitem differs from DuckDB's after the UPDATEs")


# -- entry point ---------------------------------------------------------------------------------
def _part(res: Result, name: str, fn: Callable[[], None]) -> None:
    """Run one part; a failure is printed and noted, and the other parts still run."""
    try:
        fn()
    except Exception as e:
        traceback.print_exc()
        res.notes.append(f"PART FAILED: {name}: {type(e).__name__}: {e}")


def run(cfg: Config) -> Result:
    res = Result(
        NAME,
        f"SQL through kudusql.connect: TPC-H SF {sf_label(cfg.sf)} (22 queries), point "
        "SELECT, single-row INSERT, executemany, UPDATE of 10% of lineitem",
        f"DuckDB {duckdb.__version__} over Parquet / native; SQLite {sqlite3.sqlite_version}",
    )
    res.info["cores"] = os.cpu_count()
    # KUDUSQL_BENCH_SQL_PARTS=points,inserts runs only those parts (tpch = TPC-H + UPDATE).
    parts = set(os.environ.get("KUDUSQL_BENCH_SQL_PARTS", "tpch,points,inserts").split(","))
    if parts != {"tpch", "points", "inserts"}:
        res.info["parts"] = ",".join(sorted(parts))
    with workdir(cfg, NAME) as d:
        if "tpch" in parts:
            conn, native = bench_tpch(cfg, res, d)
            try:
                _part(res, "UPDATE", lambda: bench_update(cfg, res, conn, native))
            finally:
                conn.close()
                native.close()
        if "points" in parts:
            _part(res, "point lookups", lambda: bench_point_lookup(cfg, res, d))
        if "inserts" in parts:
            _part(res, "inserts", lambda: bench_inserts(cfg, res, d))
    res.notes.append(
        "TPC-H times are per-query medians (ms) of --reps runs after a warm-up, "
        "answers fetched as Python tuples by all; point/insert latencies per statement"
    )
    return res
