"""Compaction: scans and point lookups through long REDO chains, before and after
major delta compaction, and the disk space that history GC gives back.

Data: TPC-H lineitem at ``--sf`` (``--rows N``: its first N rows), key (l_orderkey,
l_linenumber), bulk-inserted and flushed into tablet "ours".

Workload: a fixed random 10% of the rows is updated 10 times: 10 rounds, each giving
every chosen row new l_quantity, l_extendedprice and l_discount values through
``t.update`` (batches of 50,000 rows, in a new random order each round), each round
followed by ``t.flush_deltas()``, so every DiskRowSet ends with 10 REDO DeltaFiles.

Rival: the "clean" tablet: the same rows with their final values bulk-inserted and
flushed, never updated (what compaction should bring ours back to). Same options; both
tablets' clocks are ``HybridClock`` over the wall clock plus an offset the benchmark
can move.

Maintenance ("compaction" below) is ``t.run_maintenance()``: ``flush``,
``flush_deltas``, merging compactions while the budgeted policy finds one worth it (the
bulk-loaded rowsets are adjacent and at the target size, so it finds none),
``major_delta_compaction`` of every rowset with REDO files, ``gc_undo``,
``gc_deleted_rowsets``. The merge score the policy gives each tablet
(``t.maintenance_ops()``) is reported.

1. Scan of l_quantity, l_extendedprice, l_discount, l_tax (``t.scan(cols).read_all()``)
   on (a) the clean tablet, (b) ours with the REDO chains, (c) ours after compaction
   (the updates are younger than history_max_age_s, so their history is kept as UNDO
   files), and after history GC. Each with a cold block cache (``t.cache.clear()``
   before every run, as in scan_deltas), warm (the same scan repeated; block cache 8 GiB
   so every page stays cached), and first scan after the tablet is closed and reopened
   (nothing decoded in memory: the REDO files are read and resolved again; the OS page
   cache stays warm). The clean tablet is measured in each phase next to ours,
   alternating run by run, so both see the same load on a shared machine. Best of
   --reps (default 5). The wall time of the compaction is reported.
   Correctness: every checked scan's exact sums (in cents) of the 4 columns must equal
   numpy's from the final values, and after compaction (and after GC) the key-ordered
   scan of the key and the 4 columns must equal the final table exactly, as the clean
   tablet's must.
2. Point lookups ``t.lookup(key)`` (all 16 columns) of 3,000 random updated keys, one
   at a time, each timed with ``perf_counter_ns``: a first pass just after reopening the
   tablet (the first lookup in each rowset reads and resolves its REDO chain), then a
   second, warm pass; p50 and p99 before and after compaction, the clean tablet's
   passes interleaved with ours key by key. Every row must equal the clean tablet's.
3. Disk: ``t.stats()["disk_bytes"]`` (base and delta files of the live rowsets) and the
   size of the tablet directory (every file, WAL included; measured after a close, with
   ``file_grace_s=0``, so files replaced by a compaction are gone) after the updates,
   after the compaction, and after history GC: the clock offset is moved forward by
   history_max_age_s + 60 s and the maintenance runs again on both tablets (the clean
   tablet's bulk-load UNDO records age out too).

Context: DuckDB's scan of the same 4 columns (final values) from a native table in a
file database, ``con.sql(q).to_arrow_table()``, best of --reps.

Goal: scan after compaction <= 1.1x the clean tablet's (cold and warm cache).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from benchmarks.common import Config, Goal, Result, log, profile, repeat, timed, workdir
from benchmarks.data import LINEITEM_KEY, describe, kudu_schema, lineitem_rows, sf_label
from kudusql.common.hybrid_time import HybridClock, wall_micros
from kudusql.common.options import TabletOptions
from kudusql.common.schema import Schema
from kudusql.storage.tablet.tablet import Tablet

NAME = "compaction"
NUMERIC = ["l_quantity", "l_extendedprice", "l_discount", "l_tax"]
UPDATED = ["l_quantity", "l_extendedprice", "l_discount"]
FRACTION = 0.10
ROUNDS = 10
BATCH = 50_000
LOOKUPS = 3_000
#: A block cache that holds every decoded page of the 4 columns (so "warm" is warm);
#: replaced files deleted at once (so the directory size shows only live files).
OPTIONS = TabletOptions(
    sync=True, flush_threshold_bytes=1 << 50, block_cache_bytes=8 << 30, file_grace_s=0.0
)
DEC = pa.decimal128(15, 2)
MIB = 2**20


def decimal_column(cents: np.ndarray) -> pa.Array[Any]:
    """Exact decimal128(15, 2) values from integer cents (built from the 128-bit words)."""
    words = np.empty((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)
    return pa.Array.from_buffers(DEC, len(cents), [None, pa.py_buffer(words.tobytes())])


def cents(arr: pa.ChunkedArray[Any] | pa.Array[Any]) -> np.ndarray:
    """int64 cents of a NOT NULL decimal(15, 2) column (exact: the low 64-bit words)."""
    a: pa.Array[Any] = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    buf = a.buffers()[1]
    if a.type != DEC or a.null_count or buf is None:
        raise RuntimeError(f"expected a NOT NULL {DEC} column, got {a.type}")
    words: np.ndarray = np.frombuffer(memoryview(buf), dtype=np.int64)
    return words[2 * a.offset : 2 * (a.offset + len(a)) : 2].copy()


def dir_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / MIB


def pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q))


def maintain(t: Tablet) -> None:
    """``t.run_maintenance()``: flush, merge while the policy finds it worth it, major
    delta compaction of every rowset with REDO files, history GC."""
    t.run_maintenance()


def merge_score(t: Tablet) -> str:
    """The merging compaction the maintenance ops offer, if any, and its score."""
    ops = [o for o in t.maintenance_ops() if o.name == "merge_compaction"]
    rowsets = len(t.rowsets_info()) - 1
    if not ops:
        return f"none ({rowsets} rowsets)"
    return f"offered, perf_improvement {ops[0].perf_improvement:.4f} ({rowsets} rowsets)"


class Handle:
    """A tablet that the benchmark closes and reopens (same path, options and clock)."""

    def __init__(self, name: str, path: Path, schema: Schema, clock: HybridClock) -> None:
        self.name = name
        self.path = path
        self.clock = clock
        self.t = Tablet.create(str(path), schema, OPTIONS, clock=clock)
        self.reopen_s: list[float] = []

    def reopen(self) -> None:
        self.t.close()
        t0 = time.perf_counter()
        self.t = Tablet.open(str(self.path), OPTIONS, clock=self.clock)
        self.reopen_s.append(time.perf_counter() - t0)

    def scan(self) -> pa.Table:
        return self.t.scan(NUMERIC).read_all()

    def disk(self) -> tuple[float, float, float]:
        """(stats()["disk_bytes"], directory size, WAL) in MiB, the directory measured
        after a close (which deletes the files compactions replaced)."""
        self.reopen()
        st = self.t.stats()
        return st["disk_bytes"] / MIB, dir_mib(self.path), st["wal_bytes"] / MIB

    def close(self) -> None:
        self.t.close()


def lookup_pass(
    handles: Sequence[Handle], keys: Sequence[Sequence[object]]
) -> dict[str, tuple[np.ndarray, list[Any]]]:
    """Look every key up in each tablet in turn (key by key, so that both see the same
    load); per tablet the latencies in µs and the rows."""
    lat = np.empty((len(handles), len(keys)), dtype=np.float64)
    rows: list[list[Any]] = [[] for _ in handles]
    tablets = [h.t for h in handles]
    clock = time.perf_counter_ns
    for j, k in enumerate(keys):
        for i, t in enumerate(tablets):
            t0 = clock()
            r = t.lookup(k)
            lat[i, j] = clock() - t0
            rows[i].append(r)
    return {h.name: (lat[i] / 1000.0, rows[i]) for i, h in enumerate(handles)}


def run(cfg: Config) -> Result:
    rng = np.random.default_rng(cfg.seed)
    table = lineitem_rows(cfg.sf, cfg.rows)
    n = table.num_rows
    what = f"TPC-H lineitem SF {sf_label(cfg.sf)}" + (
        f" (first {n:,} rows)" if cfg.rows is not None else ""
    )
    res = Result(
        NAME,
        f"update 10% of {what} {ROUNDS} times, then compact ({describe(table)})",
        "the clean tablet: the final rows bulk-inserted and flushed, never updated",
    )
    reps = cfg.repetitions(5)
    schema = kudu_schema(table.schema, LINEITEM_KEY)

    # -- the updates and the final values ---------------------------------------------------
    m = max(1, int(n * FRACTION))
    rows = np.sort(rng.choice(n, size=m, replace=False))
    orderkey, linenumber = table["l_orderkey"], table["l_linenumber"]
    rounds: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []
    for _ in range(ROUNDS):
        qty = rng.integers(1, 51, m)
        vals = {
            "l_quantity": qty * 100,
            "l_extendedprice": qty * rng.integers(90_000, 210_000, m),
            "l_discount": rng.integers(0, 11, m),
        }
        rounds.append((rng.permutation(m), vals))
    final = table
    for c in UPDATED:
        col = cents(table[c])
        col[rows] = rounds[-1][1][c]
        i = final.schema.get_field_index(c)
        final = final.set_column(i, pa.field(c, DEC, nullable=False), decimal_column(col))
    expected = {c: int(cents(final[c]).sum()) for c in NUMERIC}
    if expected == {c: int(cents(table[c]).sum()) for c in NUMERIC}:
        raise RuntimeError("the updates do not change the checked sums; pick another seed")
    look = rng.choice(rows, size=min(LOOKUPS, m), replace=False)
    lookup_keys = list(
        zip(orderkey.take(look).to_pylist(), linenumber.take(look).to_pylist(), strict=True)
    )
    exact = final.select([*LINEITEM_KEY, *NUMERIC]).sort_by(
        [(k, "ascending") for k in LINEITEM_KEY]
    )

    def check_sums(out: pa.Table, label: str) -> None:
        got = {c: int(cents(out[c]).sum()) for c in NUMERIC}
        if out.num_rows != n or got != expected:
            raise RuntimeError(
                f"{label}: scan returned {out.num_rows} rows with sums (cents) {got}; "
                f"expected {n} rows, {expected}"
            )

    def check_exact(h: Handle, label: str) -> None:
        out = h.t.scan([*LINEITEM_KEY, *NUMERIC], ordered=True).read_all()
        if out.num_rows != n:
            raise RuntimeError(f"{label}: ordered scan returned {out.num_rows} rows, not {n}")
        for c in exact.column_names:
            if not out[c].equals(exact[c]):
                raise RuntimeError(f"{label}: column {c} differs from the final values")

    shift = [0]  # micros added to the wall clock of both tablets

    def physical() -> int:
        return wall_micros() + shift[0]

    # phase -> tablet name -> kind of run -> times
    scans: dict[str, dict[str, dict[str, list[float]]]] = {}
    lookups: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    disk: dict[str, tuple[float, float, float]] = {}

    with workdir(cfg, NAME) as d:
        ours = Handle("ours", d / "ours", schema, HybridClock(physical))
        clean = Handle("clean", d / "clean", schema, HybridClock(physical))
        pair = (ours, clean)
        try:

            def load(h: Handle, data: pa.Table) -> None:
                r = h.t.insert(data)
                if r.errors or r.applied != n:
                    raise RuntimeError(f"insert applied {r.applied} of {n}: {r.errors[:3]}")
                h.t.flush()

            log("loading the tablet to update")
            t0 = time.perf_counter()
            load(ours, table)
            res.info["load_s"] = round(time.perf_counter() - t0, 2)
            log("loading the clean tablet")
            load(clean, final)
            del table, final

            def measure(label: str, *, reopened: bool = True) -> None:
                """Scans of both tablets, alternating run by run (so both see the same
                load on the shared machine)."""
                log(f"scans: {label}")
                runs: dict[str, dict[str, list[float]]] = {h.name: {} for h in pair}
                for h in pair:
                    check_sums(h.scan(), f"{label}, {h.name}")
                for kind in ("reopen", "cold", "warm") if reopened else ("cold", "warm"):
                    if kind == "warm":
                        for h in pair:
                            h.scan()
                    for _ in range(reps):
                        for h in pair:
                            if kind == "reopen":
                                h.reopen()
                            elif kind == "cold":
                                h.t.cache.clear()
                            runs[h.name].setdefault(kind, []).append(timed(h.scan)[0])
                scans[label] = runs
                if cfg.profile:
                    for h in pair if label == "before compaction" else (ours,):
                        if reopened:
                            h.reopen()
                            what = "first scan after reopen"
                        else:
                            h.t.cache.clear()
                            what = "cold scan"
                        res.profiles[f"{what}, {label}, {h.name}"] = profile(h.scan)

            def measure_lookups(label: str) -> None:
                """First pass after a reopen, then a warm pass, of both tablets; the rows
                they return must be the same."""
                log(f"lookups: {label}")
                for h in pair:
                    h.reopen()
                first = lookup_pass(pair, lookup_keys)
                warm = lookup_pass(pair, lookup_keys)
                for h in pair:
                    got = first[h.name][1]
                    if warm[h.name][1] != got or any(r is None for r in got):
                        raise RuntimeError(f"{label}: {h.name} lookups missed or changed rows")
                if first["ours"][1] != first["clean"][1]:
                    raise RuntimeError(f"{label}: lookups differ from the clean tablet's")
                lookups[label] = {
                    h.name: {"first": first[h.name][0], "warm": warm[h.name][0]} for h in pair
                }
                if cfg.profile:
                    res.profiles[f"warm lookups, {label}, ours"] = profile(
                        lambda: lookup_pass([ours], lookup_keys)
                    )

            check_exact(clean, "clean tablet")

            # the updates
            log(f"updating {m:,} rows {ROUNDS} times in batches of {BATCH:,}")
            t_upd = t_fd = 0.0
            for rnd, (order, vals) in enumerate(rounds):
                sel = rows[order]
                batch = pa.table(
                    {
                        "l_orderkey": orderkey.take(sel),
                        "l_linenumber": linenumber.take(sel),
                        **{c: decimal_column(v[order]) for c, v in vals.items()},
                    }
                )

                def update(batch: pa.Table = batch) -> None:
                    for s in range(0, m, BATCH):
                        r = ours.t.update(batch.slice(s, BATCH))
                        if r.errors or r.applied != min(BATCH, m - s):
                            raise RuntimeError(
                                f"update batch at {s}: applied {r.applied}, errors {r.errors[:3]}"
                            )

                if cfg.profile and rnd == ROUNDS - 1:
                    res.profiles["last update round (not in update_s)"] = profile(update)
                else:
                    t_upd += timed(update)[0]
                t_fd += timed(ours.t.flush_deltas)[0]
            timed_rounds = ROUNDS - (1 if cfg.profile else 0)
            res.info["update_s"] = round(t_upd, 2)
            res.info["updates_per_s"] = f"{m * timed_rounds / t_upd:,.0f}"
            res.info["flush_deltas_s"] = round(t_fd, 2)
            infos = [r for r in ours.t.rowsets_info() if r["kind"] == "diskrowset"]
            res.info["rowsets"] = len(infos)
            res.info["redo_files_per_rowset"] = sorted({r["redo_files"] for r in infos})
            res.info["redo_events"] = f"{sum(r['redo_events'] for r in infos):,}"
            disk["clean"] = clean.disk()
            disk["updated"] = ours.disk()

            # (b) ours with the REDO chains
            measure_lookups("before compaction")  # first, while nothing is resolved
            measure("before compaction")

            # the compaction
            res.info["merge policy, clean tablet"] = merge_score(clean.t)
            res.info["merge policy, ours before compaction"] = merge_score(ours.t)
            log("compaction (major delta compactions)")
            start = len(ours.t.maintenance_log)
            if cfg.profile:
                t_maint, text = timed(lambda: profile(lambda: maintain(ours.t)))
                res.profiles["compaction"] = text
            else:
                t_maint, _ = timed(lambda: maintain(ours.t))
            ops: dict[str, list[float]] = {}
            for rec in ours.t.maintenance_log[start:]:
                o = ops.setdefault(rec.op, [0, 0.0, 0, 0])
                o[0] += 1
                o[1] += rec.duration_s
                o[2] += rec.bytes_read
                o[3] += rec.bytes_written
            for op, (k, s, rd, wr) in ops.items():
                res.info[f"maintenance: {op}"] = (
                    f"{k:g} x, {s:.2f} s, read {rd / MIB:,.0f} MiB, wrote {wr / MIB:,.0f} MiB"
                )
            infos = [r for r in ours.t.rowsets_info() if r["kind"] == "diskrowset"]
            res.info["after compaction: rowsets, REDO files, UNDO events"] = (
                f"{len(infos)}, {sum(r['redo_files'] for r in infos)}, "
                f"{sum(r['undo_events'] for r in infos):,}"
            )
            disk["compacted"] = ours.disk()

            # (c) ours after the compaction
            check_exact(ours, "after compaction")
            measure_lookups("after compaction")
            measure("after compaction")

            # history GC: move the clock past history_max_age_s
            shift[0] += int((OPTIONS.history_max_age_s + 60) * 1_000_000)
            log("maintenance after moving the clock (history GC)")
            t_gc, _ = timed(lambda: maintain(ours.t))
            maintain(clean.t)
            infos = [r for r in ours.t.rowsets_info() if r["kind"] == "diskrowset"]
            res.info["after GC: UNDO files left"] = sum(r["undo_files"] for r in infos)
            disk["gc"] = ours.disk()
            disk["clean gc"] = clean.disk()
            check_exact(ours, "after history GC")
            check_exact(clean, "clean tablet after history GC")
            measure("after history GC", reopened=False)
            res.info["reopen_s (ours, clean), best"] = (
                f"{min(ours.reopen_s):.3f}, {min(clean.reopen_s):.3f}"
            )
        finally:
            ours.close()
            clean.close()

        # context: DuckDB
        log("DuckDB")
        con = duckdb.connect(str(d / "duck.duckdb"))
        try:
            con.register("final_rows", exact.select(NUMERIC))
            con.execute("CREATE TABLE li AS SELECT * FROM final_rows")
            con.execute("CHECKPOINT")
            con.unregister("final_rows")
            sql = f"SELECT {', '.join(NUMERIC)} FROM li"

            def duck() -> pa.Table:
                out: pa.Table = con.sql(sql).to_arrow_table()
                return out

            check_sums(duck(), "DuckDB")
            duck_runs = repeat(duck, reps)
        finally:
            con.close()

    # -- the table -------------------------------------------------------------------------
    goal = Goal(max_ratio=1.1)
    kinds = (("cold", "cold cache"), ("warm", "warm cache"), ("reopen", "first after reopen"))
    for label in ("before compaction", "after compaction", "after history GC"):
        for kind, text in kinds:
            if kind in scans[label]["ours"]:
                res.add(
                    f"scan {label}, {text}",
                    scans[label]["ours"][kind],
                    scans[label]["clean"][kind],
                    goal=goal if label == "after compaction" and kind != "reopen" else None,
                )
    res.add(
        "scan after compaction, warm (rival: DuckDB)",
        scans["after compaction"]["ours"]["warm"],
        duck_runs,
    )
    for label in ("before compaction", "after compaction"):
        lk = lookups[label]
        for kind, text in (("warm", "warm"), ("first", "after reopen")):
            for q in (50, 99):
                res.add(
                    f"lookup {label}, {text} p{q}",
                    pct(lk["ours"][kind], q),
                    pct(lk["clean"][kind], q),
                    unit="µs",
                )
    res.add("compaction (major delta) wall time", t_maint, None)
    res.add("history GC wall time", t_gc, None)
    for label, key, rival in (
        ("after updates", "updated", "clean"),
        ("after compaction", "compacted", "clean"),
        ("after history GC", "gc", "clean gc"),
    ):
        res.add(f"disk_bytes {label}", disk[key][0], disk[rival][0], unit="MiB")
    for label, key, rival in (
        ("after updates", "updated", "clean"),
        ("after compaction", "compacted", "clean"),
        ("after history GC", "gc", "clean gc"),
    ):
        res.add(f"tablet directory {label}", disk[key][1], disk[rival][1], unit="MiB")
    res.info["wal MiB after updates, compaction, GC (clean before, after GC)"] = (
        f"{disk['updated'][2]:.1f}, {disk['compacted'][2]:.1f}, {disk['gc'][2]:.1f} "
        f"({disk['clean'][2]:.1f}, {disk['clean gc'][2]:.1f})"
    )
    res.info["rows_updated"] = f"{m:,} ({FRACTION:.0%}) x {ROUNDS} rounds of {', '.join(UPDATED)}"
    res.info["lookup_keys"] = len(lookup_keys)
    res.info["history_max_age_s"] = OPTIONS.history_max_age_s
    res.notes.append(
        "rival = the clean tablet (final values, never updated), measured in the same phase, "
        "alternating with ours run by run, in the same cache state; the scan goal applies "
        "after compaction, cold and warm"
    )
    res.notes.append(
        "disk rows: clean tablet before GC for 'after updates' and 'after compaction', "
        "after its own maintenance with the moved clock for 'after history GC'"
    )
    if cfg.profile:
        res.notes.append("--profile: the compaction ran under cProfile (its time is inflated)")
    return res
