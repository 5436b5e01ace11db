"""The write-ahead log: single-row insert latency, batch throughput with group commit,
and crash recovery (WAL replay) speed.

Table: ``k BIGINT`` primary key plus five columns, as in ``point_lookup``: ``a`` int64,
``b`` double, ``s`` string, ``d`` date, ``i`` int32.

1. Single-row latency. ``--rows`` (default 10,000) inserts of distinct keys, in random
   order, one prebuilt one-row ``pa.RecordBatch`` per ``t.insert`` call, each timed
   with ``perf_counter_ns`` (200 untimed inserts of other keys first), on a fresh
   tablet with ``wal_fsync="none"`` (the OS cache, Kudu's default) and with
   ``wal_fsync="batch"`` (fsync before acknowledging). Rival: SQLite (stdlib
   ``sqlite3``), file database in WAL mode, ``INSERT`` + ``commit()`` per row, with
   ``synchronous=NORMAL`` (no fsync per commit: the counterpart of "none") and
   ``synchronous=FULL`` (fsync per commit: the counterpart of "batch").
   Goal: our "none" p50 <= 30 µs.

2. Throughput of 64-row batches with ``wal_fsync="batch"``: 2,000 batches from one
   thread, then the same 2,000 batches split between 2 threads writing disjoint keys
   at once into one tablet (their fsyncs can be shared: group commit; the log's fsync
   count is reported). Rival: SQLite ``synchronous=FULL``, 64-row ``executemany`` +
   ``commit()`` per batch, one thread (SQLite has one writer at a time). Higher is
   better here, so a ratio above 1 favours us. No goal.

3. Recovery: about 100 MB of WAL written with ``t.upsert`` in batches of 10,000 rows
   (below the bulk-load threshold, so every batch goes through the WAL) whose ``s`` is
   80 random hex characters (the WAL's LZ4 shrinks such records by about a fifth; the
   rate below counts the bytes on disk), then ``t.abandon()`` (a crash: no flush, no
   log sync) and ``Tablet.open`` timed (best of ``--reps``, default 3; each opened
   tablet is abandoned again). WAL replay rate = WAL bytes on disk / open time.
   Goal: >= 100 MB/s. For context, DuckDB replaying its own WAL of the same rows: a
   subprocess inserts them in the same 10,000-row transactions with automatic
   checkpoints off and exits without closing, then ``duckdb.connect`` + ``count(*)``
   is timed on a fresh copy of the files. The WAL files are in the OS cache (just
   written): this measures replay, not disk.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from benchmarks.bench_point_lookup import make_table, schema_for
from benchmarks.common import Config, Goal, Result, fresh_dir, log, profile, timed, workdir
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet.tablet import Tablet

NAME = "wal"
DEFAULT_INSERTS = 10_000
WARMUP = 200
BATCH_ROWS = 64
BATCHES = 2_000
THREADS = 2
RECOVERY_BATCH_ROWS = 10_000
RECOVERY_WAL_BYTES = 100 * 10**6
STRING_BYTES = 80
MB = 10**6
OPTIONS = TabletOptions(sync=True, flush_threshold_bytes=1 << 50)
INSERT_SQL = "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)"


@dataclass
class Bound(Goal):
    """A goal with inclusive bounds on our value: ``ours <= at_most`` and/or
    ``ours >= at_least`` (common.Goal has only a strict upper bound and ratios)."""

    at_most: float | None = None
    at_least: float | None = None

    def check(self, ours: float, rival: float | None) -> bool:
        if self.at_most is not None and ours > self.at_most:
            return False
        return not (self.at_least is not None and ours < self.at_least)

    def text(self, unit: str) -> str:
        parts = []
        if self.at_least is not None:
            parts.append(f">= {self.at_least:g} {unit}")
        if self.at_most is not None:
            parts.append(f"<= {self.at_most:g} {unit}")
        return ", ".join(parts)


# -- data ---------------------------------------------------------------------------------------
def one_row_batches(table: pa.Table) -> list[pa.RecordBatch]:
    """Every row as its own freshly built one-row RecordBatch (no slices of a big one)."""
    cols = [table.column(i).to_pylist() for i in range(table.num_columns)]
    types = [f.type for f in table.schema]
    return [
        pa.RecordBatch.from_arrays(
            [pa.array([c[j]], t) for c, t in zip(cols, types, strict=True)], schema=table.schema
        )
        for j in range(table.num_rows)
    ]


def sqlite_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The rows as SQLite parameters (dates as ISO text, SQLite's convention)."""
    cols = [table.column(c).to_pylist() for c in ("k", "a", "b", "s")]
    cols.append([d.isoformat() for d in table.column("d").to_pylist()])
    cols.append(table.column("i").to_pylist())
    return list(zip(*cols, strict=True))


def recovery_batch(first_key: int, n: int, rng: np.random.Generator) -> pa.RecordBatch:
    """``n`` rows with keys from ``first_key`` and an 80-character random hex ``s``."""
    raw = rng.integers(0, 256, (n, STRING_BYTES // 2), dtype=np.uint8)
    blob = raw.tobytes()
    half = STRING_BYTES // 2
    s = [blob[j * half : (j + 1) * half].hex() for j in range(n)]
    return pa.RecordBatch.from_pydict(
        {
            "k": pa.array(np.arange(first_key, first_key + n, dtype=np.int64)),
            "a": pa.array(rng.integers(-(10**12), 10**12, n, dtype=np.int64)),
            "b": pa.array(rng.random(n)),
            "s": pa.array(s, pa.string()),
            "d": pa.array(rng.integers(0, 20_000, n, dtype=np.int32)).cast(pa.date32()),
            "i": pa.array(rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32)),
        }
    )


# -- measurement --------------------------------------------------------------------------------
def pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q))


def tablet_latencies(
    path: Path, schema: Any, fsync: str, warm: list[pa.RecordBatch], rows: list[pa.RecordBatch]
) -> tuple[np.ndarray, int, int]:
    """Per-insert µs, the log's fsync count during the timed inserts, the WAL bytes."""
    t = Tablet.create(str(path), schema, OPTIONS.with_(wal_fsync=fsync))
    try:
        for b in warm:
            t.insert(b)
        out = np.empty(len(rows), dtype=np.float64)
        clock = time.perf_counter_ns
        insert = t.insert
        fs0 = fsync_count(t)
        for j, b in enumerate(rows):
            t0 = clock()
            r = insert(b)
            out[j] = clock() - t0
            if r.applied != 1:
                raise RuntimeError(f"insert {j} applied {r.applied} rows: {r.errors[:1]}")
        fsyncs = fsync_count(t) - fs0
        wal = t.wal_size()
        if t.count_rows() != len(warm) + len(rows):
            raise RuntimeError(f"tablet has {t.count_rows()} rows")
    finally:
        t.close()
    return out / 1000.0, fsyncs, wal


def sqlite_connect(path: Path, synchronous: str) -> sqlite3.Connection:
    con = sqlite3.connect(str(path))
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(f"PRAGMA synchronous={synchronous}")
    con.execute(
        "CREATE TABLE t (k INTEGER PRIMARY KEY, a INTEGER, b REAL, s TEXT, d TEXT, i INTEGER)"
    )
    con.commit()
    return con


def sqlite_latencies(
    path: Path, synchronous: str, warm: list[tuple[Any, ...]], rows: list[tuple[Any, ...]]
) -> np.ndarray:
    con = sqlite_connect(path, synchronous)
    try:
        for r in warm:
            con.execute(INSERT_SQL, r)
            con.commit()
        out = np.empty(len(rows), dtype=np.float64)
        clock = time.perf_counter_ns
        execute, commit = con.execute, con.commit
        for j, r in enumerate(rows):
            t0 = clock()
            execute(INSERT_SQL, r)
            commit()
            out[j] = clock() - t0
        (count,) = con.execute("SELECT count(*) FROM t").fetchone()
        if count != len(warm) + len(rows):
            raise RuntimeError(f"SQLite has {count} rows")
    finally:
        con.close()
    return out / 1000.0


def fsync_count(t: Tablet) -> int:
    lg = getattr(t, "_log", None)
    return int(getattr(lg, "fsync_count", -1)) if lg is not None else -1


def tablet_throughput(
    path: Path, schema: Any, parts: list[list[pa.RecordBatch]]
) -> tuple[float, int]:
    """Rows/s writing ``parts`` (one thread each) into one tablet with wal_fsync="batch";
    and the log's fsyncs during the run."""
    t = Tablet.create(str(path), schema, OPTIONS.with_(wal_fsync="batch"))
    errors: list[BaseException] = []
    start = threading.Barrier(len(parts) + 1)

    def work(batches: list[pa.RecordBatch]) -> None:
        try:
            start.wait()
            for b in batches:
                t.insert(b)
        except BaseException as e:  # reported below
            errors.append(e)
            raise

    try:
        threads = [threading.Thread(target=work, args=(p,)) for p in parts]
        for th in threads:
            th.start()
        fs0 = fsync_count(t)
        start.wait()
        t0 = time.perf_counter()
        for th in threads:
            th.join()
        secs = time.perf_counter() - t0
        fsyncs = fsync_count(t) - fs0
        if errors:
            raise RuntimeError(f"writer thread failed: {errors[0]!r}") from errors[0]
        n = sum(b.num_rows for p in parts for b in p)
        if t.count_rows() != n:
            raise RuntimeError(f"tablet has {t.count_rows()} rows, expected {n}")
    finally:
        t.close()
    return n / secs, fsyncs


def sqlite_throughput(path: Path, batches: list[list[tuple[Any, ...]]]) -> float:
    con = sqlite_connect(path, "FULL")
    try:
        t0 = time.perf_counter()
        for rows in batches:
            con.executemany(INSERT_SQL, rows)
            con.commit()
        secs = time.perf_counter() - t0
    finally:
        con.close()
    return sum(len(r) for r in batches) / secs


_DUCKDB_WRITER = """
import os, sys
import duckdb
import pyarrow.feather as feather
db, src = sys.argv[1], sys.argv[2]
table = feather.read_table(src)
con = duckdb.connect(db)
con.execute("SET checkpoint_threshold = '1TB'")
con.execute(
    "CREATE TABLE t (k BIGINT PRIMARY KEY, a BIGINT, b DOUBLE, s VARCHAR, d DATE, i INTEGER)"
)
for batch in table.to_batches(max_chunksize=int(sys.argv[3])):
    con.execute("INSERT INTO t SELECT * FROM batch")
sys.stdout.flush()
os._exit(0)  # a crash: no checkpoint, the rows are only in the WAL
"""


def duckdb_recovery(d: Path, batches: list[pa.RecordBatch], reps: int) -> tuple[list[float], int]:
    """Open times of a DuckDB database whose rows are all in its WAL; its WAL bytes."""
    src = d / "rows.arrow"
    feather.write_feather(pa.Table.from_batches(batches), str(src), compression="uncompressed")
    crashed = d / "duck-crashed.db"
    subprocess.run(
        [sys.executable, "-c", _DUCKDB_WRITER, str(crashed), str(src), str(RECOVERY_BATCH_ROWS)],
        check=True,
    )
    wal = Path(str(crashed) + ".wal")
    wal_bytes = wal.stat().st_size if wal.exists() else 0
    n = sum(b.num_rows for b in batches)
    runs = []
    for r in range(reps):
        db = d / f"duck-open-{r}.db"
        shutil.copy(crashed, db)
        if wal.exists():
            shutil.copy(wal, str(db) + ".wal")
        t0 = time.perf_counter()
        con = duckdb.connect(str(db))
        (count,) = con.execute("SELECT count(*) FROM t").fetchone()  # type: ignore[misc]
        runs.append(time.perf_counter() - t0)
        con.close()
        if count != n:
            raise RuntimeError(f"DuckDB recovered {count} rows, expected {n}")
        for p in (db, Path(str(db) + ".wal")):
            p.unlink(missing_ok=True)
    return runs, wal_bytes


# -- the benchmark ------------------------------------------------------------------------------
def run(cfg: Config) -> Result:
    n = cfg.rows or DEFAULT_INSERTS
    reps = cfg.repetitions(3)
    rng = np.random.default_rng(cfg.seed)
    res = Result(
        NAME,
        "WAL: 1-row insert latency, 64-row batch throughput, crash recovery",
        f"SQLite {sqlite3.sqlite_version} file db, journal_mode=WAL, INSERT + commit "
        f"(latency, throughput); DuckDB {duckdb.__version__} WAL replay (recovery)",
    )
    # Single-row data: keys 0..n-1 in random order; the warm-up rows use keys after them.
    table = make_table(n + WARMUP, rng)
    table = table.set_column(0, "k", pa.array(np.arange(n + WARMUP, dtype=np.int64)))
    schema = schema_for(table)
    order = rng.permutation(n)
    timed_rows = table.slice(0, n).take(pa.array(order))
    warm_rows = table.slice(n, WARMUP)
    log(f"building {n + WARMUP:,} one-row batches")
    ours_rows, ours_warm = one_row_batches(timed_rows), one_row_batches(warm_rows)
    sql_rows, sql_warm = sqlite_rows(timed_rows), sqlite_rows(warm_rows)

    # Throughput data: BATCHES batches of BATCH_ROWS rows, disjoint keys.
    bt = make_table(BATCHES * BATCH_ROWS, rng)
    batches = bt.to_batches(max_chunksize=BATCH_ROWS)
    batches = [pa.RecordBatch.from_arrays(b.columns, schema=b.schema) for b in batches]
    sql_batches = [sqlite_rows(pa.Table.from_batches([b])) for b in batches]

    with workdir(cfg, NAME) as d:
        # 1. single-row latency
        lat: dict[str, np.ndarray] = {}
        for fsync in ("none", "batch"):
            log(f"{n:,} single-row inserts, wal_fsync={fsync}")
            lat[fsync], fsyncs, wal = tablet_latencies(
                fresh_dir(d, f"lat-{fsync}"), schema, fsync, ours_warm, ours_rows
            )
            res.info[f"single_row_{fsync}_log_fsyncs"] = fsyncs
            res.info[f"single_row_{fsync}_wal_bytes_per_insert"] = round(wal / (n + WARMUP))
        for sync in ("NORMAL", "FULL"):
            log(f"{n:,} single-row inserts, SQLite synchronous={sync}")
            lat[sync] = sqlite_latencies(d / f"lat-{sync}.sqlite", sync, sql_warm, sql_rows)
        if cfg.profile:
            res.profiles["2,000 single-row inserts, wal_fsync=none"] = profile(
                lambda: tablet_latencies(
                    fresh_dir(d, "lat-profile"), schema, "none", ours_warm, ours_rows[:2000]
                )
            )

        # 2. throughput, wal_fsync="batch"
        ours_tp: dict[int, list[float]] = {1: [], THREADS: []}
        fs: dict[int, int] = {}
        for threads in (1, THREADS):
            parts = [batches[i::threads] for i in range(threads)]
            log(f"{BATCHES:,} batches of {BATCH_ROWS} rows, {threads} thread(s), {reps} run(s)")
            for r in range(reps):
                tp, fs[threads] = tablet_throughput(
                    fresh_dir(d, f"tp-{threads}-{r}"), schema, parts
                )
                ours_tp[threads].append(tp / 1000)
                shutil.rmtree(d / f"tp-{threads}-{r}", ignore_errors=True)
        log(f"{BATCHES:,} batches of {BATCH_ROWS} rows, SQLite FULL, {reps} run(s)")
        rival_tp = []
        for r in range(reps):
            p = d / f"tp-{r}.sqlite"
            rival_tp.append(sqlite_throughput(p, sql_batches) / 1000)
            for suffix in ("", "-wal", "-shm"):
                Path(str(p) + suffix).unlink(missing_ok=True)
        for threads in (1, THREADS):
            res.info[f"throughput_{threads}_thread_log_fsyncs"] = (
                f"{fs[threads]:,} for {BATCHES:,} batches "
                f"({fs[threads] / BATCHES:.2f} per batch, last run)"
            )

        # 3. recovery
        rec_dir = fresh_dir(d, "recovery")
        t = Tablet.create(str(rec_dir), schema, OPTIONS.with_(wal_fsync="none"))
        written: list[pa.RecordBatch] = []
        log(f"writing ~{RECOVERY_WAL_BYTES / MB:,.0f} MB of WAL")
        try:
            t_write = 0.0
            while t.wal_size() < RECOVERY_WAL_BYTES:
                b = recovery_batch(len(written) * RECOVERY_BATCH_ROWS, RECOVERY_BATCH_ROWS, rng)
                dt, _ = timed(lambda b=b: t.upsert(b))
                t_write += dt
                written.append(b)
            wal_bytes = t.wal_size()
        finally:
            t.abandon()
        rows_written = len(written) * RECOVERY_BATCH_ROWS
        res.info["recovery_wal"] = (
            f"{wal_bytes / MB:,.1f} MB, {len(written)} upserts of {RECOVERY_BATCH_ROWS:,} rows "
            f"({rows_written:,} rows, {wal_bytes / rows_written:.0f} B/row), "
            f"written in {t_write:.2f} s"
        )
        log(f"Tablet.open of {wal_bytes / MB:,.1f} MB of WAL, {reps} run(s)")
        open_runs = []
        for _ in range(reps):
            secs, t2 = timed(lambda: Tablet.open(str(rec_dir), OPTIONS.with_(wal_fsync="none")))
            try:
                st = t2.replay_stats
                if st.rows_replayed != rows_written or t2.count_rows() != rows_written:
                    raise RuntimeError(
                        f"replayed {st.rows_replayed} rows, tablet has {t2.count_rows()}, "
                        f"expected {rows_written}"
                    )
            finally:
                t2.abandon()
            open_runs.append(secs)
        res.info["recovery_first_open"] = (
            f"{open_runs[0]:.3f} s = {wal_bytes / MB / open_runs[0]:,.1f} MB/s (the first "
            "open after the crash; the MB/s row is the best of the opens of the same files)"
        )
        res.info["replay_stats"] = (
            f"records={st.records}, rows_replayed={st.rows_replayed:,}, bytes={st.bytes:,} "
            "(payload bytes before the WAL's LZ4; the MB/s row uses the bytes on disk)"
        )
        if cfg.profile:
            res.profiles["Tablet.open (WAL replay)"] = profile(
                lambda: Tablet.open(str(rec_dir), OPTIONS).abandon()
            )
        shutil.rmtree(rec_dir, ignore_errors=True)
        log("DuckDB: same rows in its WAL, then open")
        try:
            duck_runs, duck_wal = duckdb_recovery(d, written, reps)
        except (subprocess.CalledProcessError, duckdb.Error, OSError, RuntimeError) as e:
            duck_runs, duck_wal = [], 0
            res.notes.append(f"DuckDB recovery rival skipped: {e}")
        if duck_runs:
            res.info["duckdb_wal"] = f"{duck_wal / MB:,.1f} MB"

    # -- rows -------------------------------------------------------------------------------
    res.add(
        "1-row insert p50: none vs NORMAL",
        pct(lat["none"], 50),
        pct(lat["NORMAL"], 50),
        unit="µs",
        goal=Bound(at_most=30.0),
    )
    res.add(
        "1-row insert p99: none vs NORMAL", pct(lat["none"], 99), pct(lat["NORMAL"], 99), unit="µs"
    )
    res.add(
        "1-row insert p50: batch vs FULL", pct(lat["batch"], 50), pct(lat["FULL"], 50), unit="µs"
    )
    res.add(
        "1-row insert p99: batch vs FULL", pct(lat["batch"], 99), pct(lat["FULL"], 99), unit="µs"
    )
    res.add(
        f"{BATCH_ROWS}-row batches, batch fsync, 1 thread",
        [round(x, 1) for x in ours_tp[1]],
        [round(x, 1) for x in rival_tp],
        unit="k rows/s",
        stat="median",
    )
    res.add(
        f"{BATCH_ROWS}-row batches, batch fsync, {THREADS} threads",
        [round(x, 1) for x in ours_tp[THREADS]],
        [round(x, 1) for x in rival_tp],
        unit="k rows/s",
        stat="median",
    )
    ours_mbs = [round(wal_bytes / MB / s, 1) for s in open_runs]
    duck_mbs = [round(duck_wal / MB / s, 1) for s in duck_runs] if duck_wal else []
    # For a rate the best run is the fastest (the maximum; Result.add's "best" is the min).
    rate = res.add(
        "recovery: WAL replayed per second",
        max(ours_mbs),
        max(duck_mbs) if duck_mbs else None,
        unit="MB/s",
        goal=Bound(at_least=100.0),
    )
    rate.ours_runs, rate.rival_runs = ours_mbs, duck_mbs
    res.add(f"recovery: open time, {rows_written:,} rows", open_runs, duck_runs or None)
    res.info["single_row_inserts"] = f"{n:,} timed (+{WARMUP} warm-up), keys in random order"
    res.info["throughput_batches"] = (
        f"{BATCHES:,} x {BATCH_ROWS} rows; median of {reps} run(s); SQLite: 1 thread"
    )
    res.notes.append(
        "latency and open time: lower is better (ratio < 1 favours us); k rows/s and "
        "MB/s: higher is better (ratio > 1 favours us)"
    )
    res.notes.append(
        "SQLite synchronous=NORMAL in WAL mode does not fsync on commit (like "
        'wal_fsync="none"); FULL fsyncs the WAL on every commit (like "batch")'
    )
    res.notes.append(
        "recovery MB/s is each engine's own WAL bytes / its open time (DuckDB's WAL "
        "encodes the same rows in a different number of bytes): compare open times"
    )
    return res
