"""Bulk insert: load TPC-H lineitem into one tablet and make it durable.

Ours: ``Tablet.create`` (untimed), then ``t.insert(whole_arrow_table)`` followed by
``t.flush()`` (MemRowSet -> DiskRowSets, fsynced: ``TabletOptions(sync=True)``), with a
flush threshold large enough that nothing flushes in between. Timed from the insert
call until ``flush()`` returns. The primary key is (l_orderkey, l_linenumber).

Rival: DuckDB, file-backed database in a temporary directory:
``CREATE TABLE x AS SELECT * FROM arrow_table`` followed by ``CHECKPOINT``, timed from
the CREATE until the checkpoint returns (DuckDB enforces no primary key here).

Goal: ours <= 2x DuckDB.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from benchmarks.common import (
    Config,
    Goal,
    Result,
    fresh_dir,
    log,
    peak_rss,
    profile,
    timed,
    workdir,
)
from benchmarks.data import LINEITEM_KEY, describe, kudu_schema, lineitem_rows, sf_label
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet.tablet import Tablet

NAME = "bulk_insert"
OPTIONS = TabletOptions(sync=True, flush_threshold_bytes=1 << 50)


def kudu_load(path: Path, table: pa.Table) -> tuple[float, float, float, int]:
    """Create a tablet at ``path`` and load ``table``; returns (total, insert, flush, rowsets)."""
    schema = kudu_schema(table.schema, LINEITEM_KEY)
    t = Tablet.create(str(path), schema, OPTIONS)
    try:
        t_ins, res = timed(lambda: t.insert(table))
        if res.errors or res.applied != table.num_rows:
            raise RuntimeError(
                f"insert applied {res.applied} of {table.num_rows} rows; errors: {res.errors[:3]}"
            )
        t_flush, n = timed(t.flush)
    finally:
        t.close(flush=False)
    return t_ins + t_flush, t_ins, t_flush, n


def duck_load(path: Path, table: pa.Table) -> float:
    con = duckdb.connect(str(path))
    try:
        con.register("arrow_table", table)

        def load() -> None:
            con.execute("CREATE TABLE x AS SELECT * FROM arrow_table")
            con.execute("CHECKPOINT")

        t, _ = timed(load)
        n = con.execute("SELECT count(*) FROM x").fetchone()
        if n is None or n[0] != table.num_rows:
            raise RuntimeError(f"DuckDB loaded {n} rows, expected {table.num_rows}")
    finally:
        con.close()
    return t


def run(cfg: Config) -> Result:
    table = lineitem_rows(cfg.sf, cfg.rows)
    res = Result(
        NAME,
        f"insert + flush TPC-H lineitem SF {sf_label(cfg.sf)} ({describe(table)})",
        f"DuckDB {duckdb.__version__} CREATE TABLE AS SELECT + CHECKPOINT (file db)",
    )
    ours, ins, fl = [], [], []
    rival = []
    rss: dict[str, str] = {}
    reps = cfg.repetitions(3)
    with workdir(cfg, NAME) as d:
        for i in range(reps):
            log(f"kudusql load {i + 1}/{reps}")
            with peak_rss(rss, "ours_peak_rss_mib"):
                total, a, b, nrs = kudu_load(fresh_dir(d, "tablet"), table)
            ours.append(total)
            ins.append(a)
            fl.append(b)
            res.info["rowsets_written"] = nrs
            log(f"DuckDB load {i + 1}/{reps}")
            db = fresh_dir(d, "duck")
            db.mkdir()
            with peak_rss(rss, "rival_peak_rss_mib"):
                rival.append(duck_load(db / "x.duckdb", table))
        if cfg.profile:
            log("kudusql load under cProfile")
            res.profiles["insert+flush"] = profile(lambda: kudu_load(fresh_dir(d, "tablet"), table))
    res.add("insert + flush", ours, rival, goal=Goal(max_ratio=2.0))
    res.add("  of which insert", ins, None)
    res.add("  of which flush", fl, None)
    res.info["arrow_input_mib"] = round(table.nbytes / 2**20, 1)
    res.info["rows_per_s_ours"] = f"{table.num_rows / min(ours):,.0f}"
    res.info.update(rss)
    return res
