"""Tables: bulk load, parallel scans and point lookups through the tables API
(``kudusql.storage.tables``: ``Database`` / ``Table``), 8 hash tablets versus 1 tablet,
side by side with DuckDB on the same TPC-H lineitem rows.

Data: lineitem at ``--sf`` (``--rows N``: its first N rows), key (l_orderkey,
l_linenumber). The generator writes the string columns as ``string_view``; they are
cast once to ``string`` (untimed) and every loader gets that same Arrow table (a
multi-tablet ``Table.insert`` cannot split ``string_view`` columns: pyarrow has no
``take`` kernel for them).

Tables: "8 tablets" is ``HASH (l_orderkey) PARTITIONS 8``; "1 tablet" has no
partitioning. Each is created in its own ``Database(path, TabletOptions(sync=True))``
(defaults otherwise: ``threads=2``, ``bulk_load_rows=100,000``, the maintenance manager
on, as a user gets it).

1. Bulk load: ``Table.insert`` of consecutive 1M-row slices of the Arrow table (also
   100k-row slices, 8 tablets), then ``Table.flush()``; timed from the first insert
   until the flush returns (table creation untimed). A batch is routed by hash and
   written to its tablets in parallel on the database pool; a tablet's part of at
   least ``bulk_load_rows`` rows goes straight to DiskRowSets, a smaller part through
   the WAL and the MemRowSet (flushed by the maintenance manager or the final flush).
   Rival: DuckDB file database, ``CREATE TABLE x AS SELECT * FROM arrow_table`` +
   ``CHECKPOINT`` (no PRIMARY KEY, as in bulk_insert). Best of --reps (default 2),
   the loads interleaved. The 8-tablet / 1-tablet ratio is the row whose rival column
   is the 1-tablet load.
2. Parallel full scan: ``Table.scan(columns).read_all()`` of all 16 columns and of
   l_quantity, l_extendedprice, l_discount, l_tax, on the tables of the last load,
   reopened with the maintenance manager off (nothing compacts behind the scans):
   8 tablets scanned in parallel (``threads=2``, the default), 1 tablet (``threads=2``:
   its rowsets are decoded two at a time), and the 8-tablet table opened a second time
   read-only with ``TabletOptions(threads=1)`` (tablets one after the other, rowsets
   one after the other). Cold: the database's block cache cleared before every run
   (the OS page cache stays warm, as DuckDB's buffer pool does); warm: the same scan
   repeated (default 256 MiB cache). Rival: DuckDB's native table,
   ``con.sql(q).to_arrow_table()``. Best of --reps (default 3). Row counts and the
   exact sums of the 4 numeric columns must agree with DuckDB's.
3. Point lookups: ``Table.lookup((l_orderkey, l_linenumber))`` (all columns) of 2,000
   random existing keys, one at a time, each timed with ``perf_counter_ns``: a first
   pass after the block cache is cleared, then a second (warm) pass over the same keys;
   on the 8-tablet table (hash routing to one tablet) and the 1-tablet table; then a
   warm pass on the 8-tablet table opened read-only with a block cache large enough to
   hold every decoded page (filled by a full scan first). Rival:
   DuckDB ``PREPARE q AS SELECT * FROM x WHERE l_orderkey = $1 AND l_linenumber = $2``
   then ``EXECUTE q(k1, k2)`` + ``fetchall()`` per key (the same keys, after 200
   warm-up lookups). Every row returned must have the key asked for.

4. Where ``kudusql.client`` (the Kudu-style client API) is importable: point lookups
   as a Kudu client does them, ``table.scanner()`` with equality predicates on both key
   columns, ``.open().read_all_tuples()`` (the same keys, after the same warm-up), and
   a cold full scan ``table.scanner().open().to_arrow()``, on the 8-tablet table.

Goals: load and scan have none beyond showing the ratios ("report"). Point lookup:
warm p50 on the 8-tablet table (default cache) < 30 µs, the goal point_lookup sets for
one tablet. Default run: about 1 minute at SF 0.1, 7 minutes at SF 1 (2 vCPUs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.common import (
    Config,
    Goal,
    Result,
    Row,
    fresh_dir,
    log,
    profile,
    repeat,
    timed,
    workdir,
)
from benchmarks.data import LINEITEM_KEY, describe, kudu_schema, lineitem_rows, sf_label
from kudusql.common.options import TabletOptions
from kudusql.storage.tables.database import Database
from kudusql.storage.tables.partition import HashDimension, PartitionSchema
from kudusql.storage.tables.table import Table
from kudusql.storage.tablet.tablet import Tablet

NAME = "tables"
BUCKETS = 8
BATCH_ROWS = 1_000_000
SMALL_BATCH_ROWS = 100_000
LOOKUPS = 2_000
WARMUP_LOOKUPS = 200
NUMERIC = ["l_quantity", "l_extendedprice", "l_discount", "l_tax"]
OPTIONS = TabletOptions(sync=True)
LOOKUP_P50_GOAL_US = 30.0


# -- goals --------------------------------------------------------------------------------------
class _Report(Goal):
    """No numeric goal: the row is there to show the ratio."""

    def text(self, unit: str) -> str:
        return "report"


@dataclass
class _ReportRow(Row):
    @property
    def passed(self) -> bool | None:
        return None


REPORT = _Report()


def report(res: Result, metric: str, ours: list[float], rival: list[float]) -> None:
    """A row with the goal column "report" and no PASS/MISS (best of the runs)."""
    r = res.add(metric, ours, rival)
    res.rows[-1] = _ReportRow(r.metric, r.ours, r.rival, r.unit, REPORT, r.ours_runs, r.rival_runs)


# -- data ---------------------------------------------------------------------------------------
def plain_strings(table: pa.Table) -> pa.Table:
    """``table`` with its string_view columns cast to string."""
    fields = [f.with_type(pa.string()) if f.type == pa.string_view() else f for f in table.schema]
    return table.cast(pa.schema(fields))


def numeric_sums(table: pa.Table) -> dict[str, Any]:
    return {c: pc.sum(table[c]).as_py() for c in NUMERIC if c in table.column_names}


def dir_mib(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


# -- loads --------------------------------------------------------------------------------------
@dataclass
class Load:
    seconds: float
    insert_s: float
    flush_s: float
    rowsets: list[int]  # DiskRowSets per tablet after the load
    maintenance: dict[str, tuple[int, float]]  # op -> (count, seconds) during the load


def partitioning(table: pa.Table, buckets: int) -> PartitionSchema | None:
    if buckets <= 1:
        return None
    schema = kudu_schema(table.schema, LINEITEM_KEY)
    return PartitionSchema.create(schema, [HashDimension(("l_orderkey",), buckets)])


def kudu_load(path: Path, table: pa.Table, buckets: int, batch_rows: int) -> Load:
    """Create a database at ``path`` with one table of ``buckets`` tablets and load
    ``table`` into it in ``batch_rows``-row inserts, then flush."""
    db = Database(str(path), OPTIONS)
    try:
        schema = kudu_schema(table.schema, LINEITEM_KEY)
        t = db.create_table("lineitem", schema, partitioning(table, buckets))
        tablets = t.tablets()
        t0 = time.perf_counter()
        for off in range(0, table.num_rows, batch_rows):
            part = table.slice(off, batch_rows)
            res = t.insert(part)
            if res.errors or res.applied != part.num_rows:
                raise RuntimeError(
                    f"insert applied {res.applied} of {part.num_rows} rows; "
                    f"errors: {res.errors[:3]}"
                )
        t1 = time.perf_counter()
        t.flush()
        t2 = time.perf_counter()
        rowsets = [len(tb.rowsets_info()) - 1 for tb in tablets]
        maint = maintenance_summary(tablets, t0, t2)
    finally:
        db.close()
    return Load(t2 - t0, t1 - t0, t2 - t1, rowsets, maint)


def maintenance_summary(
    tablets: Sequence[Tablet], start_perf: float, end_perf: float
) -> dict[str, tuple[int, float]]:
    """What the maintenance manager ran on ``tablets`` that finished inside the window."""
    offset = time.time() - time.perf_counter()
    lo, hi = start_perf + offset, end_perf + offset
    out: dict[str, tuple[int, float]] = {}
    for tb in tablets:
        for m in tb.maintenance_log:
            if lo <= m.started <= hi + 0.001:
                n, s = out.get(m.op, (0, 0.0))
                out[m.op] = (n + 1, s + m.duration_s)
    return out


def duck_load(path: Path, table: pa.Table) -> tuple[float, duckdb.DuckDBPyConnection]:
    """CREATE TABLE AS + CHECKPOINT into a new file database; returns (seconds, con)."""
    con = duckdb.connect(str(path))
    con.register("arrow_table", table)

    def load() -> None:
        con.execute("CREATE TABLE x AS SELECT * FROM arrow_table")
        con.execute("CHECKPOINT")

    t, _ = timed(load)
    con.unregister("arrow_table")
    n = con.execute("SELECT count(*) FROM x").fetchall()
    if n[0][0] != table.num_rows:
        con.close()
        raise RuntimeError(f"DuckDB loaded {n} rows, expected {table.num_rows}")
    return t, con


def describe_load(load: Load) -> str:
    maint = ", ".join(f"{op} x{n} ({s:.1f} s)" for op, (n, s) in sorted(load.maintenance.items()))
    return (
        f"insert {load.insert_s:.2f} s + flush {load.flush_s:.2f} s; rowsets per tablet "
        f"{load.rowsets}; tablet ops logged during the load (final flush included): "
        f"{maint or 'none'}"
    )


def run_loads(cfg: Config, d: Path, table: pa.Table, res: Result) -> duckdb.DuckDBPyConnection:
    """Section 1; leaves the last loads at d/t8, d/t1 and d/duck/x.duckdb."""
    n = table.num_rows
    configs = [
        ("t8", BUCKETS, BATCH_ROWS),
        ("t8_small", BUCKETS, SMALL_BATCH_ROWS),
        ("t1", 1, BATCH_ROWS),
    ]
    runs: dict[str, list[Load]] = {name: [] for name, _, _ in configs}
    duck_runs: list[float] = []
    con: duckdb.DuckDBPyConnection | None = None
    reps = cfg.repetitions(2)
    for i in range(reps):
        for name, buckets, batch in configs:
            log(f"load {i + 1}/{reps}: {buckets} tablet(s), {batch:,}-row batches")
            runs[name].append(kudu_load(fresh_dir(d, name), table, buckets, batch))
        log(f"load {i + 1}/{reps}: DuckDB")
        if con is not None:
            con.close()
        db = fresh_dir(d, "duck")
        db.mkdir()
        t, con = duck_load(db / "x.duckdb", table)
        duck_runs.append(t)
    assert con is not None
    secs = {name: [x.seconds for x in loads] for name, loads in runs.items()}
    b, s = f"{BATCH_ROWS // 1000:,}k", f"{SMALL_BATCH_ROWS // 1000:,}k"
    report(res, f"load, {BUCKETS} tablets, {b}-row batches", secs["t8"], duck_runs)
    report(res, f"load, {BUCKETS} tablets, {s}-row batches", secs["t8_small"], duck_runs)
    report(res, f"load, 1 tablet, {b}-row batches", secs["t1"], duck_runs)
    report(
        res, f"load, {BUCKETS} tablets / 1 tablet ({b}) [rival=1 tablet]", secs["t8"], secs["t1"]
    )
    for name, label in (
        ("t8", f"{BUCKETS}_tablets"),
        ("t8_small", f"{BUCKETS}_tablets_small_batches"),
        ("t1", "1_tablet"),
    ):
        best = min(runs[name], key=lambda x: x.seconds)
        res.info[f"load_rows_per_s_{label}"] = f"{n / best.seconds:,.0f}"
        res.info[f"load_detail_{label}"] = describe_load(best)
    res.info["load_rows_per_s_duckdb"] = f"{n / min(duck_runs):,.0f}"
    if cfg.profile:
        log("8-tablet load under cProfile")
        res.profiles[f"load, {BUCKETS} tablets, {b}-row batches"] = profile(
            lambda: kudu_load(fresh_dir(d, "t8_profile"), table, BUCKETS, BATCH_ROWS)
        )
    return con


# -- scans --------------------------------------------------------------------------------------
def run_scans(
    cfg: Config,
    tables: dict[str, tuple[Database, Table]],
    con: duckdb.DuckDBPyConnection,
    res: Result,
) -> dict[str, list[float]]:
    """Section 2; returns DuckDB's runs by projection ("all columns", "4 numeric")."""
    reps = cfg.repetitions(3)
    rivals: dict[str, list[float]] = {}
    labels = {
        "t8": f"{BUCKETS} tablets, threads=2",
        "t1": "1 tablet, threads=2",
        "t8_serial": f"{BUCKETS} tablets, threads=1",
    }
    for what, cols in (("all columns", None), ("4 numeric", NUMERIC)):
        sql = f"SELECT {'*' if cols is None else ', '.join(cols)} FROM x"

        def rival(q: str = sql) -> pa.Table:
            out: pa.Table = con.sql(q).to_arrow_table()
            return out

        want = rival()
        want_rows, want_sums = want.num_rows, numeric_sums(want)
        del want
        rival_runs = repeat(rival, reps)
        rivals[what] = rival_runs
        cold: dict[str, list[float]] = {}
        warm: dict[str, list[float]] = {}
        for key, label in labels.items():
            db, t = tables[key]
            log(f"scan {what}: {label}")

            def ours(tab: Table = t, c: list[str] | None = cols) -> pa.Table:
                return tab.scan(c).read_all()

            db.cache.clear()
            got = ours()
            if got.num_rows != want_rows or numeric_sums(got) != want_sums:
                raise RuntimeError(
                    f"scan {what} on {label}: {got.num_rows} rows, sums "
                    f"{numeric_sums(got)}; DuckDB: {want_rows} rows, sums {want_sums}"
                )
            del got
            cold[key] = repeat(ours, reps, setup=db.cache.clear)
            ours()
            warm[key] = repeat(ours, reps)
        for key in ("t8", "t1", "t8_serial"):
            report(res, f"scan {what}, {labels[key]}, cold", cold[key], rival_runs)
        report(res, f"scan {what}, {labels['t8']}, warm", warm["t8"], rival_runs)
        report(res, f"scan {what}, 1 tablet, warm", warm["t1"], rival_runs)
        report(
            res,
            f"scan {what}, cold: threads=2 / threads=1 ({BUCKETS} tablets) [rival=threads=1]",
            cold["t8"],
            cold["t8_serial"],
        )
        report(
            res,
            f"scan {what}, cold: {BUCKETS} tablets / 1 tablet [rival=1 tablet]",
            cold["t8"],
            cold["t1"],
        )
        speedup = min(cold["t8_serial"]) / min(cold["t8"])
        res.info[f"scan_{what.replace(' ', '_')}_parallel_speedup_cold"] = f"{speedup:.2f}x"
    if cfg.profile:
        db, t = tables["t8"]
        log("cold 8-tablet scan of all columns under cProfile")
        db.cache.clear()
        res.profiles[f"cold scan, all columns, {BUCKETS} tablets"] = profile(
            lambda: t.scan().read_all()
        )
    return rivals


# -- lookups ------------------------------------------------------------------------------------
def latencies_us(fn: Callable[[int, int], object], keys: list[tuple[int, int]]) -> np.ndarray:
    out = np.empty(len(keys), dtype=np.float64)
    clock = time.perf_counter_ns
    for j, (a, b) in enumerate(keys):
        t0 = clock()
        r = fn(a, b)
        out[j] = clock() - t0
        if r is None:
            raise RuntimeError(f"key ({a}, {b}) not found")
    return out / 1000.0


def check_lookups(t: Table, keys: list[tuple[int, int]]) -> None:
    for k in keys:
        r = t.lookup(k)
        if r is None or (r["l_orderkey"], r["l_linenumber"]) != k:
            raise RuntimeError(f"lookup of {k} returned {r!r}")


def pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q))


def run_lookups(
    cfg: Config,
    table: pa.Table,
    tables: dict[str, tuple[Database, Table]],
    con: duckdb.DuckDBPyConnection,
    res: Result,
) -> tuple[list[tuple[int, int]], list[tuple[int, int]], np.ndarray]:
    """Section 3; returns the keys looked up, the warm-up keys and DuckDB's latencies."""
    rng = np.random.default_rng(cfg.seed)
    m = min(LOOKUPS, table.num_rows)
    idx = rng.choice(table.num_rows, size=m + WARMUP_LOOKUPS, replace=False)
    ok = table.column("l_orderkey").to_numpy()[idx].tolist()
    ln = table.column("l_linenumber").to_numpy()[idx].tolist()
    pairs = [(int(a), int(b)) for a, b in zip(ok, ln, strict=True)]
    keys, warmup = pairs[:m], pairs[m:]
    con.execute("PREPARE q AS SELECT * FROM x WHERE l_orderkey = $1 AND l_linenumber = $2")

    def rival(a: int, b: int) -> object:
        rows = con.execute(f"EXECUTE q({int(a)}, {int(b)})").fetchall()
        return rows[0] if rows else None

    log("lookups: DuckDB")
    latencies_us(rival, warmup)
    duck = latencies_us(rival, keys)
    row = rival(*keys[0])
    if not isinstance(row, tuple) or row[0] != keys[0][0]:
        raise RuntimeError(f"DuckDB lookup of {keys[0]} returned {row!r}")
    first: dict[str, np.ndarray] = {}
    warm: dict[str, np.ndarray] = {}
    for key in ("t8", "t1"):
        db, t = tables[key]
        log(f"lookups: {key}")
        check_lookups(t, keys[:100])

        def ours(a: int, b: int, tab: Table = t) -> object:
            return tab.lookup((a, b))

        db.cache.clear()
        first[key] = latencies_us(ours, keys)
        warm[key] = latencies_us(ours, keys)
    db, t = tables["t8_big"]
    log("lookups: t8, block cache holding every page")
    t.scan().read_all()
    latencies_us(lambda a, b: t.lookup((a, b)), keys)
    big = latencies_us(lambda a, b: t.lookup((a, b)), keys)
    res.info["block_cache_all_pages_mib"] = round(db.cache.size_bytes / 2**20)
    goal = Goal(max_value=LOOKUP_P50_GOAL_US)
    b8 = f"{BUCKETS} tablets"
    res.add(f"lookup {b8}, warm p50", pct(warm["t8"], 50), pct(duck, 50), unit="µs", goal=goal)
    res.add(f"lookup {b8}, warm p99", pct(warm["t8"], 99), pct(duck, 99), unit="µs")
    res.add(f"lookup {b8}, first touch p50", pct(first["t8"], 50), pct(duck, 50), unit="µs")
    res.add(f"lookup {b8}, first touch p99", pct(first["t8"], 99), pct(duck, 99), unit="µs")
    res.add(f"lookup {b8}, warm p50, cache holds all", pct(big, 50), pct(duck, 50), unit="µs")
    res.add(f"lookup {b8}, warm p99, cache holds all", pct(big, 99), pct(duck, 99), unit="µs")
    res.add("lookup 1 tablet, warm p50", pct(warm["t1"], 50), pct(duck, 50), unit="µs")
    res.add("lookup 1 tablet, warm p99", pct(warm["t1"], 99), pct(duck, 99), unit="µs")
    res.add(
        f"lookup warm p50: {b8} / 1 tablet [rival=1 tablet]",
        pct(warm["t8"], 50),
        pct(warm["t1"], 50),
        unit="µs",
    )
    res.info["lookups_per_pass"] = m
    if cfg.profile:
        _, t8 = tables["t8"]
        res.profiles[f"{m:,} warm lookups, {b8}"] = profile(lambda: [t8.lookup(k) for k in keys])
    return keys, warmup, duck


def run_client(
    cfg: Config,
    tables: dict[str, tuple[Database, Table]],
    keys: list[tuple[int, int]],
    warmup: list[tuple[int, int]],
    duck: np.ndarray,
    duck_scan: list[float],
    res: Result,
) -> None:
    """Extra rows for the Kudu-style client API (``kudusql.client``), where it exists:
    point lookups as Kudu does them (a scanner with two equality predicates) and a cold
    full scan, on the 8-tablet table."""
    try:
        from kudusql.client import Client
    except ImportError:
        res.notes.append("kudusql.client offers no Client yet: no client-API rows")
        return
    db, core = tables["t8"]
    tbl = Client(db).table("lineitem")

    def lookup(a: int, b: int) -> object:
        sc = tbl.scanner().add_predicates([tbl["l_orderkey"] == a, tbl["l_linenumber"] == b])
        rows = sc.open().read_all_tuples()
        if len(rows) != 1 or rows[0][0] != a or rows[0][1] != b:
            raise RuntimeError(f"client scanner lookup of ({a}, {b}) returned {rows!r}")
        return rows[0]

    log("lookups: kudusql.client scanner")
    latencies_us(lookup, warmup)
    lat = latencies_us(lookup, keys)
    b8 = f"{BUCKETS} tablets"
    res.add(f"client scanner lookup {b8}, warm p50", pct(lat, 50), pct(duck, 50), unit="µs")
    res.add(f"client scanner lookup {b8}, warm p99", pct(lat, 99), pct(duck, 99), unit="µs")
    log("scan all columns: kudusql.client scanner, alternating with Table.scan")
    runs: list[float] = []
    core_runs: list[float] = []
    for _ in range(cfg.repetitions(3)):
        db.cache.clear()
        runs.append(timed(lambda: tbl.scanner().open().to_arrow())[0])
        db.cache.clear()
        core_runs.append(timed(lambda: core.scan().read_all())[0])
    report(res, f"client scanner to_arrow, all columns, {b8}, cold", runs, duck_scan)
    report(
        res,
        "client scanner to_arrow / Table.scan, cold, alternating [rival=Table.scan]",
        runs,
        core_runs,
    )


# -- run ------------------------------------------------------------------------------------------
def run(cfg: Config) -> Result:
    table = plain_strings(lineitem_rows(cfg.sf, cfg.rows))
    res = Result(
        NAME,
        f"tables API: load, scan, lookup; {BUCKETS} hash tablets vs 1 tablet, TPC-H lineitem "
        f"SF {sf_label(cfg.sf)} ({describe(table)})",
        f"DuckDB {duckdb.__version__} file db: CREATE TABLE AS + CHECKPOINT; SELECT .. "
        "to_arrow_table(); PREPARE/EXECUTE point query",
    )
    with workdir(cfg, NAME) as d:
        t0 = time.perf_counter()
        con = run_loads(cfg, d, table, res)
        res.info["load_phase_s"] = round(time.perf_counter() - t0, 1)
        dbs = [
            Database(str(d / "t8"), OPTIONS, maintenance=False),
            Database(str(d / "t1"), OPTIONS, maintenance=False),
            Database(str(d / "t8"), OPTIONS.with_(threads=1), read_only=True, maintenance=False),
            Database(
                str(d / "t8"),
                OPTIONS.with_(block_cache_bytes=1 << 40),
                read_only=True,
                maintenance=False,
            ),
        ]
        try:
            tables = {
                k: (db, db.table("lineitem"))
                for k, db in zip(("t8", "t1", "t8_serial", "t8_big"), dbs, strict=True)
            }
            for key in ("t8", "t1"):
                tables[key][1].tablets()  # opening a tablet removes files compactions retired
            res.info["on_disk_mib"] = (
                f"{BUCKETS} tablets {dir_mib(d / 't8')}, 1 tablet {dir_mib(d / 't1')}, "
                f"DuckDB {dir_mib(d / 'duck')}"
            )
            t0 = time.perf_counter()
            duck_scans = run_scans(cfg, tables, con, res)
            res.info["scan_phase_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            keys, warmup, duck = run_lookups(cfg, table, tables, con, res)
            res.info["lookup_phase_s"] = round(time.perf_counter() - t0, 1)
            t0 = time.perf_counter()
            run_client(cfg, tables, keys, warmup, duck, duck_scans["all columns"], res)
            res.info["client_phase_s"] = round(time.perf_counter() - t0, 1)
        finally:
            for db in dbs:
                db.close()
            con.close()
    res.notes.append(
        "[rival=...] rows compare two of our configurations: the rival column is the named "
        "one, not DuckDB"
    )
    res.notes.append(
        "input string_view columns cast to string beforehand (untimed): a multi-tablet "
        "Table.insert fails on string_view (no pyarrow take kernel)"
    )
    return res
