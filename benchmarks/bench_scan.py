"""Full scans into Arrow: a flushed tablet versus a Parquet file of the same rows.

Ours: TPC-H lineitem inserted and flushed into one tablet (key (l_orderkey,
l_linenumber)); then ``t.scan(columns).read_all()`` for all 16 columns and for the 4
numeric columns l_quantity, l_extendedprice, l_discount, l_tax. Each is measured
with a cold block cache (``t.cache.clear()`` before every run; the OS page cache stays
warm, as it does for the rival) and warm (the same scan repeated, default cache size,
then again with a block cache large enough to hold every decoded page).

Rival: ``pyarrow.parquet.read_table`` of the same table written once with
``pyarrow.parquet.write_table`` defaults (snappy), reading the same columns.

Goal: ours <= 1.0x Parquet.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common import Config, Goal, Result, log, peak_rss, profile, repeat, workdir
from benchmarks.data import LINEITEM_KEY, describe, kudu_schema, lineitem_rows, sf_label
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet.tablet import Tablet

NAME = "scan"
NUMERIC = ["l_quantity", "l_extendedprice", "l_discount", "l_tax"]
OPTIONS = TabletOptions(sync=True, flush_threshold_bytes=1 << 50)


def check_same(ours: pa.Table, rival: pa.Table, what: str) -> None:
    """Row counts, and exact sums of the numeric columns, must agree."""
    if ours.num_rows != rival.num_rows:
        raise RuntimeError(
            f"{what}: kudusql returned {ours.num_rows} rows, Parquet {rival.num_rows}"
        )
    for c in NUMERIC:
        if c in ours.column_names:
            a, b = pa.compute.sum(ours[c]).as_py(), pa.compute.sum(rival[c]).as_py()
            if a != b:
                raise RuntimeError(f"{what}: sum({c}) is {a} in kudusql, {b} in Parquet")


def run(cfg: Config) -> Result:
    table = lineitem_rows(cfg.sf, cfg.rows)
    res = Result(
        NAME,
        f"scan into Arrow, TPC-H lineitem SF {sf_label(cfg.sf)} ({describe(table)})",
        f"pyarrow {pa.__version__} parquet.read_table (file written with defaults: snappy)",
    )
    rss: dict[str, str] = {}
    reps = cfg.repetitions(5)
    with workdir(cfg, NAME) as d:
        pq_path = d / "lineitem.parquet"
        log("writing Parquet file")
        pq.write_table(table, pq_path)
        res.info["parquet_file_mib"] = round(pq_path.stat().st_size / 2**20, 1)
        log("loading the tablet")
        tdir = str(d / "tablet")
        t = Tablet.create(tdir, kudu_schema(table.schema, LINEITEM_KEY), OPTIONS)
        t.insert(table)
        t.flush()
        t.close()
        del table
        res.info["tablet_on_disk_mib"] = round(
            sum(f.stat().st_size for f in (d / "tablet").rglob("*") if f.is_file()) / 2**20, 1
        )
        t = Tablet.open(tdir, OPTIONS)
        # A second handle on the same files, read-only (the writer holds the lock).
        big = Tablet.open(tdir, OPTIONS.with_(block_cache_bytes=1 << 40), read_only=True)
        try:
            for label, cols in (("all columns", None), ("4 numeric", NUMERIC)):
                log(f"scan {label}")

                def ours(tab: Tablet = t, cols: list[str] | None = cols) -> pa.Table:
                    return tab.scan(cols).read_all()

                def rival(cols: list[str] | None = cols) -> pa.Table:
                    return pq.read_table(pq_path, columns=cols)

                check_same(ours(), rival(), label)
                rival_runs = repeat(rival, reps)
                with peak_rss(rss, f"ours_peak_rss_{label.replace(' ', '_')}"):
                    cold = repeat(ours, reps, setup=t.cache.clear)
                t.cache.clear()
                ours()
                hits, misses = t.cache.hits, t.cache.misses
                warm = repeat(ours, reps)
                lookups = t.cache.hits + t.cache.misses - hits - misses
                hit_rate = (t.cache.hits - hits) / lookups if lookups else 0.0
                big.cache.clear()
                big.scan(cols).read_all()
                warm_big = repeat(lambda c=cols: big.scan(c).read_all(), reps)
                res.add(f"{label}, cold cache", cold, rival_runs, goal=Goal(max_ratio=1.0))
                res.add(
                    f"{label}, warm (default cache, {hit_rate:.0%} hits)",
                    warm,
                    rival_runs,
                    goal=Goal(max_ratio=1.0),
                )
                res.add(f"{label}, warm (cache holds all)", warm_big, rival_runs)
                res.info[f"block_cache_after_{label.replace(' ', '_')}_mib"] = round(
                    big.cache.size_bytes / 2**20, 1
                )
            if cfg.profile:
                for label, cols in (("all columns", None), ("4 numeric", NUMERIC)):
                    log(f"profiling cold scan of {label}")
                    t.cache.clear()
                    res.profiles[f"cold scan, {label}"] = profile(
                        lambda c=cols: t.scan(c).read_all()
                    )
        finally:
            t.close()
            big.close()
    res.info["block_cache_default_mib"] = OPTIONS.block_cache_bytes // 2**20
    res.info.update(rss)
    return res
