"""Scanning through updates: the cost of applying REDO deltas during a scan.

Data: TPC-H lineitem at ``--sf`` (or ``--rows N`` synthetic lineitem-like rows: the
key (l_orderkey, l_linenumber) and the 4 decimal columns), inserted and flushed.

Baseline ("rival"): the clean scan of the 4 numeric columns (l_quantity,
l_extendedprice, l_discount, l_tax) of that tablet before any update.

Ours: then 10% of the rows, chosen at random, get new l_quantity and l_discount values
through ``t.update(keys + new values)`` in batches of 10,000 rows, and the same scan is
timed (1) with the updates still in the DeltaMemStores and (2) after
``t.flush_deltas()`` wrote them to REDO delta files. Each with a cold block cache
(``t.cache.clear()`` before every run) and warm (the tablet's block cache is 8 GiB, so
every decoded page stays cached; with the default 256 MiB the 4 decimal columns of
SF 1 do not fit and "warm" would miss every page).

Each scan's sum(l_quantity) and sum(l_discount) are checked against the values
computed with numpy from the original data and the updates, so the scan cannot skip
the deltas.

Goal: scan with deltas <= 1.5x the clean scan.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from benchmarks.common import Config, Goal, Result, log, profile, repeat, timed, workdir
from benchmarks.data import LINEITEM_KEY, describe, kudu_schema, lineitem_rows, sf_label
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet.tablet import Tablet

NAME = "scan_deltas"
NUMERIC = ["l_quantity", "l_extendedprice", "l_discount", "l_tax"]
UPDATED = ["l_quantity", "l_discount"]
FRACTION = 0.10
BATCH = 10_000
#: A block cache that holds every decoded page of the 4 columns, so "warm" is warm.
OPTIONS = TabletOptions(sync=True, flush_threshold_bytes=1 << 50, block_cache_bytes=8 << 30)
DEC = pa.decimal128(15, 2)


def decimal_column(cents: np.ndarray) -> pa.Array:
    """Exact decimal128(15, 2) values from integer cents (built from the 128-bit words)."""
    words = np.empty((len(cents), 2), dtype=np.int64)
    words[:, 0] = cents
    words[:, 1] = np.where(cents < 0, -1, 0)
    return pa.Array.from_buffers(DEC, len(cents), [None, pa.py_buffer(words.tobytes())])


def synthetic(n: int, rng: np.random.Generator) -> pa.Table:
    """Lineitem-like rows: 4 lines per order, TPC-H-like value ranges."""
    i = np.arange(n, dtype=np.int64)
    qty = rng.integers(1, 51, n)
    return pa.table(
        {
            "l_orderkey": i // 4 + 1,
            "l_linenumber": (i % 4 + 1).astype(np.int32),
            "l_quantity": decimal_column(qty * 100),
            "l_extendedprice": decimal_column(qty * rng.integers(90_000, 210_000, n)),
            "l_discount": decimal_column(rng.integers(0, 11, n)),
            "l_tax": decimal_column(rng.integers(0, 9, n)),
        }
    )


def cents(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """int64 cents of a NOT NULL decimal(15, 2) column (exact: the low 64-bit words)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != DEC or arr.null_count:
        raise RuntimeError(f"expected a NOT NULL {DEC} column, got {arr.type}")
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64)
    return words[2 * arr.offset : 2 * (arr.offset + len(arr)) : 2].copy()


def run(cfg: Config) -> Result:
    rng = np.random.default_rng(cfg.seed)
    if cfg.rows is not None:
        table = synthetic(cfg.rows, rng)
        what = f"{cfg.rows:,} synthetic lineitem rows"
    else:
        table = lineitem_rows(cfg.sf, None)
        what = f"TPC-H lineitem SF {sf_label(cfg.sf)}"
    n = table.num_rows
    res = Result(
        NAME,
        f"scan 4 numeric columns after updating 10% of {what} ({describe(table)})",
        "the clean scan of the same tablet before the updates",
    )
    m = int(n * FRACTION)
    rows = np.sort(rng.choice(n, size=m, replace=False))
    new_qty = rng.integers(1, 51, m) * 100
    new_disc = rng.integers(0, 11, m)
    orig_qty, orig_disc = cents(table["l_quantity"]), cents(table["l_discount"])
    exp_qty, exp_disc = orig_qty.copy(), orig_disc.copy()
    exp_qty[rows] = new_qty
    exp_disc[rows] = new_disc
    # Shuffle the update order so batches touch rows all over the tablet.
    order = rng.permutation(m)
    updates = pa.table(
        {
            "l_orderkey": table["l_orderkey"].take(rows[order]),
            "l_linenumber": table["l_linenumber"].take(rows[order]),
            "l_quantity": decimal_column(new_qty[order]),
            "l_discount": decimal_column(new_disc[order]),
        }
    )
    expected_clean = (int(orig_qty.sum()), int(orig_disc.sum()))
    expected_updated = (int(exp_qty.sum()), int(exp_disc.sum()))
    if expected_clean == expected_updated:
        raise RuntimeError("the updates do not change the checked sums; pick another seed")

    reps = cfg.repetitions(5)
    with workdir(cfg, NAME) as d:
        log("loading the tablet")
        t = Tablet.create(str(d / "tablet"), kudu_schema(table.schema, LINEITEM_KEY), OPTIONS)
        try:
            t.insert(table)
            t.flush()
            del table

            def scan() -> pa.Table:
                return t.scan(NUMERIC).read_all()

            def check(out: pa.Table, expected: tuple[int, int], what: str) -> None:
                got = (int(cents(out["l_quantity"]).sum()), int(cents(out["l_discount"]).sum()))
                if out.num_rows != n or got != expected:
                    raise RuntimeError(
                        f"{what}: scan returned {out.num_rows} rows with sums "
                        f"(l_quantity, l_discount) in cents {got}; expected {n} rows, {expected}"
                    )

            def measure(label: str, expected: tuple[int, int]) -> tuple[list[float], list[float]]:
                log(f"scans: {label}")
                check(scan(), expected, label)
                cold = repeat(scan, reps, setup=t.cache.clear)
                scan()
                hits, misses = t.cache.hits, t.cache.misses
                warm = repeat(scan, reps)
                looked = t.cache.hits - hits + t.cache.misses - misses
                res.info[f"warm_cache_hit_rate, {label}"] = (
                    f"{(t.cache.hits - hits) / looked:.0%}" if looked else "n/a"
                )
                if cfg.profile:
                    res.profiles[f"warm scan, {label}"] = profile(scan)
                return cold, warm

            clean_cold, clean_warm = measure("clean", expected_clean)

            log(f"updating {m:,} rows in batches of {BATCH:,}")

            def update_all() -> None:
                for s in range(0, m, BATCH):
                    r = t.update(updates.slice(s, BATCH))
                    if r.errors or r.applied != min(BATCH, m - s):
                        raise RuntimeError(
                            f"update batch at {s}: applied {r.applied}, errors {r.errors[:3]}"
                        )

            t_upd, _ = timed(update_all)
            res.info["update_s"] = round(t_upd, 2)
            res.info["updates_per_s"] = f"{m / t_upd:,.0f}"
            dms_cold, dms_warm = measure("deltas in DeltaMemStores", expected_updated)

            t_fd, nfiles = timed(t.flush_deltas)
            res.info["flush_deltas_s"] = round(t_fd, 2)
            res.info["redo_files_written"] = nfiles
            file_cold, file_warm = measure("deltas in REDO files", expected_updated)
        finally:
            t.close()

    goal = Goal(max_ratio=1.5)
    res.add("DeltaMemStore deltas, cold cache", dms_cold, clean_cold, goal=goal)
    res.add("DeltaMemStore deltas, warm cache", dms_warm, clean_warm, goal=goal)
    res.add("REDO delta files, cold cache", file_cold, clean_cold, goal=goal)
    res.add("REDO delta files, warm cache", file_warm, clean_warm, goal=goal)
    res.info["rows_updated"] = f"{m:,} ({FRACTION:.0%})"
    res.notes.append("rival column = the clean scan (same tablet, same cache state, no deltas)")
    return res
