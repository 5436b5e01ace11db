"""Point lookups by primary key, one at a time, on a flushed 1M-row tablet.

Table: ``k BIGINT`` primary key plus five columns: ``a`` int64, ``b`` double, ``s``
string (20 characters), ``d`` date, ``i`` int32; ``--rows`` changes the row count.
Keys are the even numbers 0, 2, ..., so odd numbers inside the key range are absent
(they must be rejected by the bloom filters, not by the key range).

Ours: ``t.lookup((k,))`` on the flushed tablet (no MemRowSet rows). 10,000 random
existing keys, each call timed with ``perf_counter_ns``: a first pass right after the
block cache is cleared (first touch decodes pages), then a second, warm pass over
the same keys; then 10,000 absent keys.

Rival: SQLite (stdlib ``sqlite3``), file database in WAL mode, table with an
``INTEGER PRIMARY KEY``, ``SELECT * FROM t WHERE k=?`` + ``fetchone()`` on the same
rows and keys (dates stored as ISO text, SQLite's convention).

Goal: our warm p50 < 30 µs. p99 and absent-key latencies are reported for information.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks.common import Config, Goal, Result, log, peak_rss, profile, timed, workdir
from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.tablet import Tablet

NAME = "point_lookup"
DEFAULT_ROWS = 1_000_000
LOOKUPS = 10_000
OPTIONS = TabletOptions(sync=True, flush_threshold_bytes=1 << 50)


def make_table(n: int, rng: np.random.Generator) -> pa.Table:
    keys = np.arange(n, dtype=np.int64) * 2
    idx = np.arange(n)
    # 20-character strings: "row-" + 16 zero-padded digits, built vectorised.
    s = pa.array(np.char.add("row-", np.char.zfill(idx.astype("U16"), 16)).astype(object))
    return pa.table(
        {
            "k": keys,
            "a": rng.integers(-(10**12), 10**12, n, dtype=np.int64),
            "b": rng.random(n),
            "s": s,
            "d": pa.array(rng.integers(0, 20_000, n, dtype=np.int32)).cast(pa.date32()),
            "i": rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32),
        }
    )


def schema_for(table: pa.Table) -> Schema:
    cols = [
        ColumnSchema(f.name, DataType.from_arrow(f.type), nullable=f.name != "k")
        for f in table.schema
    ]
    return Schema.build(cols, ["k"])


def latencies_us(fn: Callable[[int], object], keys: np.ndarray) -> tuple[np.ndarray, list[object]]:
    out = np.empty(len(keys), dtype=np.float64)
    got: list[object] = []
    clock = time.perf_counter_ns
    for j, k in enumerate(keys.tolist()):
        t0 = clock()
        r = fn(k)
        out[j] = clock() - t0
        got.append(r)
    return out / 1000.0, got


def load_sqlite(path: Path, table: pa.Table) -> sqlite3.Connection:
    con = sqlite3.connect(str(path))
    con.execute("PRAGMA journal_mode=WAL")
    con.execute(
        "CREATE TABLE t (k INTEGER PRIMARY KEY, a INTEGER, b REAL, s TEXT, d TEXT, i INTEGER)"
    )
    cols = [table.column(c).to_pylist() for c in ("k", "a", "b", "s")]
    cols.append([d.isoformat() for d in table.column("d").to_pylist()])
    cols.append(table.column("i").to_pylist())
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", zip(*cols, strict=True))
    con.commit()
    return con


def pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q))


def run(cfg: Config) -> Result:
    n = cfg.rows or DEFAULT_ROWS
    rng = np.random.default_rng(cfg.seed)
    table = make_table(n, rng)
    res = Result(
        NAME,
        f"t.lookup((k,)) one key at a time, {n:,} rows (BIGINT key + 5 columns), flushed",
        f"SQLite {sqlite3.sqlite_version} file db, WAL, INTEGER PRIMARY KEY, "
        "SELECT * FROM t WHERE k=?",
    )
    m = min(LOOKUPS, n)
    present = rng.choice(n, size=m, replace=False)
    present_keys = present.astype(np.int64) * 2
    absent_keys = rng.choice(n - 1, size=m, replace=False).astype(np.int64) * 2 + 1
    warm_keys = rng.choice(n, size=min(1000, n), replace=False).astype(np.int64) * 2
    rss: dict[str, str] = {}
    with workdir(cfg, NAME) as d:
        log(f"loading {n:,} rows into the tablet")
        t = Tablet.create(str(d / "tablet"), schema_for(table), OPTIONS)
        t_load, _ = timed(lambda: (t.insert(table), t.flush()))
        res.info["ours_load_s"] = round(t_load, 2)
        res.info["rowsets"] = len(t.rowsets_info()) - 1
        log("loading SQLite")
        t_sql, con = timed(lambda: load_sqlite(d / "t.sqlite", table))
        res.info["sqlite_load_s"] = round(t_sql, 2)
        sql = "SELECT * FROM t WHERE k=?"
        try:

            def ours(k: int) -> object:
                return t.lookup((k,))

            def rival(k: int) -> object:
                return con.execute(sql, (k,)).fetchone()

            log("lookups")
            t.cache.clear()
            with peak_rss(rss, "ours_peak_rss"):
                ours_first, got = latencies_us(ours, present_keys)
                latencies_us(ours, warm_keys)
                ours_warm, got_warm = latencies_us(ours, present_keys)
                ours_absent, got_absent = latencies_us(ours, absent_keys)
            if cfg.profile:
                res.profiles["2,000 warm lookups of present keys"] = profile(
                    lambda: latencies_us(ours, present_keys[:2000])
                )
            rival_first, _ = latencies_us(rival, present_keys)
            latencies_us(rival, warm_keys)
            rival_warm, _ = latencies_us(rival, present_keys)
            rival_absent, rival_got_absent = latencies_us(rival, absent_keys)
            # Correctness: every present key found with its row; every absent key not.
            a = table.column("a").to_numpy()
            for rows in (got, got_warm):
                for idx, r in zip(present.tolist(), rows, strict=True):
                    if not isinstance(r, dict) or r["k"] != idx * 2 or r["a"] != a[idx]:
                        raise RuntimeError(f"lookup of key {idx * 2} returned {r!r}")
            wrong = [k for k, r in zip(absent_keys.tolist(), got_absent, strict=True) if r]
            if wrong or any(rival_got_absent):
                raise RuntimeError(f"absent keys found: {wrong[:5]}")
        finally:
            t.close()
            con.close()
    goal = Goal(max_value=30.0)
    res.add("present keys, warm p50", pct(ours_warm, 50), pct(rival_warm, 50), unit="µs", goal=goal)
    res.add("present keys, warm p99", pct(ours_warm, 99), pct(rival_warm, 99), unit="µs")
    res.add("present keys, warm mean", float(ours_warm.mean()), float(rival_warm.mean()), unit="µs")
    res.add("present keys, first touch p50", pct(ours_first, 50), pct(rival_first, 50), unit="µs")
    res.add("present keys, first touch p99", pct(ours_first, 99), pct(rival_first, 99), unit="µs")
    res.add("absent keys p50", pct(ours_absent, 50), pct(rival_absent, 50), unit="µs")
    res.add("absent keys p99", pct(ours_absent, 99), pct(rival_absent, 99), unit="µs")
    res.info["lookups_per_pass"] = m
    res.info.update(rss)
    res.notes.append(
        "first touch = first pass after t.cache.clear() (SQLite: its first pass); warm = "
        "second pass over the same keys after 1,000 other lookups"
    )
    return res
