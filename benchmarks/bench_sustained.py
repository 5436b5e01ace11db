"""Sustained mixed load with the maintenance manager on: does the tablet stay healthy?

Three loads, each for ``--rows`` seconds (default 600: ten minutes), one writer thread
against one tablet attached to a ``MaintenanceManager`` (poll 100 ms, memory limit
256 MiB). Each round writes a batch of 2,000 INSERTs of new keys and a batch of 2,000
UPDATEs of random existing keys (the window load also DELETEs). The new keys are

* ``sequential``: increasing (time series, Kudu's intended case): flushed rowsets do
  not overlap, so maintenance is flushes, delta flushes and delta compactions;
* ``random``: spread over the whole key space (the worst case for Kudu's design):
  every flush overlaps every rowset, so merging compactions run back to back, each
  rewriting up to the compaction budget;
* ``window``: sequential, with retention: the tablet is first bulk loaded with
  ``WINDOW_KEYS`` keys (before the clock starts), and each round also DELETEs the
  oldest keys, so that the live data keeps its size (a time series that keeps its last
  N rows). Deleted rows wait for the ancient history mark, then fully deleted rowsets
  are dropped (``deleted_rowset_gc``). Its data does not grow, so its last tenth
  against its first asks the issue's question with nothing else moving: whatever
  decline it shows is what the tablet's state (deltas, rowsets, history) costs.
  It reports only that (no equal-data rival, reopened tablet or SQLite run: the first
  tenth, on a freshly bulk-loaded tablet, is the equal-data rival). Its rows a second
  count the deletes too (three batches a round).

``KUDUSQL_SUSTAINED_KEYS`` (comma-separated) runs only the loads it names.

Flushes are scaled down so that maintenance has work all the time (at 4 MiB or 10 s,
against 64 MiB / 120 s by default) and history is kept 30 s (so history GC runs too).
Rowset size (32 MiB) and compaction budget (256 MiB) are the defaults: a batch of
random keys touches every rowset, so shrinking rowsets would multiply the write path's
per-rowset work and measure that instead of the maintenance (an earlier version used
4 MiB rowsets; see docs/DECISIONS.md).

Every tenth of the run it samples rows written per second, the writer thread's CPU time
per row, DiskRowSets, REDO and UNDO DeltaFiles, memory held and disk bytes. Reported:

* throughput of the last tenth against the first (a flat line is 1.0x), and the same
  for the writer's CPU per row (on this shared 2-core machine rows/s also moves with
  what else runs; CPU per row shows what a row costs the writer itself). The first
  tenth starts from an empty tablet, so this ratio mixes two costs: the data grown
  (ten times the rows, updates spread over ten times the rowsets) and whatever
  maintenance left undone;
* so the last tenth is also run against an **equal-data rival**: in a fresh process, a
  new tablet holding the run's keys, bulk loaded in key order (full-size,
  non-overlapping DiskRowSets, no deltas: what a finished compaction leaves), runs the
  same load with maintenance on for ``WARMUP_S`` and then one measured tenth. A ratio
  near 1.0x says maintenance kept the tablet as cheap to write as its data allows;
* the run's own tablet, reopened in a fresh process, runs the same warm-up and tenth:
  against the rival it shows what the tablet's state (its rowsets, delta files,
  history) costs; against the last tenth, what the run's process having aged costs;
* the largest rowset and delta-file counts seen, and what the maintenance thread ran;
* **SQLite** (``_SqliteTable``), a B-tree engine with no maintenance to fall behind,
  runs the same load (same seed, same rounds) for the same time in a fresh process.
  Whether a tablet's throughput can stay flat while its data grows ten times is not
  only a question of maintenance: any engine's cost per row may grow with the data it
  searches. SQLite's own last/first on the same load is the yardstick for that; its
  table grows less (it writes fewer rows a second), which flatters its ratio, not ours,
  so the ratio is also given at SQLite's final key count.

At the end the row count is checked against the keys inserted.
``tests/storage/tablet/test_sustained.py`` (slow marker) runs the same load and asserts only
what is not a time: counts stay bounded and no row is lost.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from benchmarks.common import Config, Goal, Result, fresh_dir, log, workdir
from kudusql.common.arrays import sorted_unique
from kudusql.common.options import TabletOptions, default_block_cache_bytes
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.tablet import Tablet

NAME = "sustained"
DEFAULT_SECONDS = 600
BATCH = 2_000
SAMPLES = 10
OPTIONS = TabletOptions(
    flush_threshold_bytes=4 << 20,
    flush_threshold_s=10,
    history_max_age_s=30,
    file_grace_s=0,
    sync=False,
)
SCHEMA = Schema.build(
    [
        ColumnSchema("k", DataType.parse("INT64"), nullable=False),
        ColumnSchema("a", DataType.parse("INT64")),
        ColumnSchema("b", DataType.parse("DOUBLE")),
        ColumnSchema("s", DataType.parse("STRING")),
    ],
    ["k"],
)


@dataclass
class Sample:
    at_s: float
    rows_per_s: float
    rowsets: int
    redo_files: int
    undo_files: int
    redo_files_per_rowset: int  # the most REDO files of any one rowset
    memory_bytes: int
    disk_bytes: int
    raw_bytes: int  # the DiskRowSets' uncompressed size: what rowsets roll on
    # the writer thread's CPU time per row written in this tenth (the harness's own
    # batch making included): unlike rows/s, not lowered by other load on the machine
    writer_cpu_us_per_row: float = 0.0
    # how many DiskRowSets cover a key, on average (Kudu's average_diskrowset_height)
    average_height: float = 0.0
    keys: int = 0  # keys the table holds: inserted so far, less the window load's deletes
    other_cpus: float = 0.0  # the process's other threads' CPU in the tenth (``Tenth``)
    steal: float = 0.0  # the machine's CPU time stolen by the hypervisor (``Tenth``)


@dataclass
class SustainedRun:
    samples: list[Sample] = field(default_factory=list)
    ops: dict[str, int] = field(default_factory=dict)
    op_seconds: dict[str, float] = field(default_factory=dict)  # maintenance time per op
    rows_expected: int = 0
    rows_found: int = 0
    errors: list[str] = field(default_factory=list)
    load: _Load | None = None  # the run's load, with ``keep`` (for the fresh-process loads)


def _counts(t: Tablet) -> tuple[int, int, int, int, int]:
    """DiskRowSets, their REDO and UNDO files, the most REDO files of one rowset, and
    their raw bytes."""
    info = [r for r in t.rowsets_info() if r["kind"] == "diskrowset"]
    redo = [r["redo_files"] for r in info]
    undo = sum(r["undo_files"] for r in info)
    raw = sum(r["raw_bytes"] for r in info)
    return len(info), sum(redo), undo, max(redo, default=0), raw


#: The loads (see the module docstring): the data of the first two grows, the window's not.
KEY_PATTERNS = ("sequential", "random", "window")
#: The window load's live keys: bulk loaded before the clock starts, then held.
WINDOW_KEYS = 20_000_000
# The string column's values: key mod 9973, as "v<n>" (taken, not formatted per row).
_VOCAB = pa.array([f"v{i}" for i in range(9973)])


def _rows(k: np.ndarray, rng: np.random.Generator) -> pa.Table:
    """New rows for keys ``k``."""
    n = len(k)
    return pa.table(
        {
            "k": k,
            "a": rng.integers(0, 1000, n),
            "b": rng.random(n),
            "s": _VOCAB.take(pa.array(k % len(_VOCAB))),
        }
    )


class _Written(Protocol):
    errors: list[Any]


class _Target(Protocol):
    """What the load writes to: a ``Tablet``, or the SQLite rival (``_SqliteTable``)."""

    def insert(self, data: pa.Table) -> _Written: ...

    def update(self, data: pa.Table) -> _Written: ...

    def delete(self, data: pa.Table) -> _Written: ...


class _Load:
    """The load's rounds: a batch of new keys inserted, a batch of existing keys updated.

    Holds what a round needs to pick keys (the keys inserted so far), so that the
    equal-data rival can continue the same load on another tablet."""

    def __init__(
        self,
        keys: str,
        seed: int,
        nkeys: int = 0,
        inserted: np.ndarray | None = None,
        capacity: int = 1 << 16,
        window: int = WINDOW_KEYS,
    ):
        if keys not in KEY_PATTERNS:
            raise ValueError(f"keys must be one of {KEY_PATTERNS}, not {keys!r}")
        if keys == "window" and window < BATCH:
            raise ValueError(f"a window holds at least a batch ({BATCH} keys), not {window}")
        self.keys = keys
        # window keys: tail .. nkeys-1 are live; the keys below tail were deleted
        self.window = window
        self.tail = 0
        self.rng = np.random.default_rng(seed)
        # random keys inserted so far: inserted[:nkeys] (sequential keys are 0..nkeys-1).
        # Made with room for ``capacity`` keys: zeroed pages are mapped as the keys
        # reach them, while doubling a full array copies it in the writer's thread
        # (at 67M keys, a GiB allocated, copied and faulted in during a measured tenth).
        if inserted is None:
            inserted = np.zeros(capacity if keys == "random" else 0, dtype=np.int64)
        self.inserted = inserted
        self.nkeys = nkeys
        self.errors: list[str] = []
        self._distinct: tuple[int, np.ndarray] | None = None  # (nkeys, distinct keys)

    def round(self, t: _Target) -> int:
        """Write one round to ``t``; returns the rows written."""
        rng = self.rng
        if self.keys == "random":
            new = sorted_unique(rng.integers(0, 1 << 62, BATCH, dtype=np.int64))
        else:
            new = np.arange(self.nkeys, self.nkeys + BATCH, dtype=np.int64)
        res = t.insert(_rows(new, rng))
        nkeys = self.nkeys
        if self.keys == "random":
            if nkeys + len(new) > len(self.inserted):  # past the capacity: doubling
                # (twice the array, at least 65,536: room for a batch, BATCH <= 65,536)
                grown = np.zeros(max(1 << 16, 2 * len(self.inserted)), dtype=np.int64)
                grown[:nkeys] = self.inserted[:nkeys]
                self.inserted = grown
            self.inserted[nkeys : nkeys + len(new)] = new
        self.nkeys = nkeys = nkeys + len(new)
        self.errors.extend(str(e) for e in res.errors[:3])
        # Sequential keys are 0 .. nkeys-1: drawn directly, with no array of every
        # key inserted (gathering from it, and doubling it, grew with the data and
        # was counted against the tablet: ~0.4 ms a round after 300 s).
        deleted = 0
        if self.keys == "window" and nkeys - self.tail > self.window:
            deleted = nkeys - self.tail - self.window
            old = np.arange(self.tail, self.tail + deleted, dtype=np.int64)
            self.errors.extend(str(e) for e in t.delete(pa.table({"k": old})).errors[:3])
            self.tail += deleted
        picks = rng.integers(self.tail, nkeys, BATCH)
        upd = sorted_unique(self.inserted[picks] if self.keys == "random" else picks)
        res = t.update(pa.table({"k": upd, "a": rng.integers(0, 1000, len(upd))}))
        self.errors.extend(str(e) for e in res.errors[:3])
        return len(new) + deleted + len(upd)

    @property
    def live(self) -> int:
        """Keys the table holds now: those inserted, less the window load's deletes."""
        return self.nkeys - self.tail

    def distinct_keys(self) -> np.ndarray:
        """The keys in the tablet, sorted (random keys only: sequential are 0..nkeys-1);
        kept until more keys are inserted (the end of a run asks twice, for 100M keys)."""
        if self._distinct is None or self._distinct[0] != self.nkeys:
            self._distinct = (self.nkeys, sorted_unique(self.inserted[: self.nkeys]))
        return self._distinct[1]


def _manager() -> MaintenanceManager:
    # history: every op of the run, not the manager's default last 1,000
    return MaintenanceManager(memory_limit_bytes=256 << 20, poll_interval_s=0.1, history=1 << 20)


def _cpu_jiffies() -> tuple[int, int]:
    """The machine's CPU time so far (all states) and the part of it stolen by the
    hypervisor, in jiffies (``/proc/stat``; zeros where there is none)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    # user nice system idle iowait irq softirq steal [guest guest_nice: inside user]
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


@dataclass
class Tenth:
    """One tenth's figures, as ``_tenths`` measures them."""

    at_s: float
    rows_per_s: float
    writer_cpu_us_per_row: float
    # the process's other threads' CPU (maintenance, the WAL's), in CPUs: 1.0 is a core
    other_cpus: float
    # the share of the machine's CPU time the hypervisor took (a noisy neighbour)
    steal: float


def _tenths(
    seconds: float,
    write_round: Callable[[], int],
    sample: Callable[[Tenth], None],
) -> None:
    """Call ``write_round`` (it returns the rows it wrote) for ``seconds``; at the end of
    each tenth call ``sample`` with that tenth's figures (the time ``sample`` itself
    takes is in no tenth). There are always ``SAMPLES`` tenths and each has at least one
    round: on a machine too busy for a round per tenth, a tenth ends after its first
    round and the run lasts longer than ``seconds``."""
    start = time.monotonic()
    last = start
    cpu_last, proc_last, jiffies_last = time.thread_time(), time.process_time(), _cpu_jiffies()
    for i in range(1, SAMPLES + 1):
        written = write_round()
        while time.monotonic() - start < seconds * i / SAMPLES:
            written += write_round()
        now = time.monotonic() - start
        wall = max(1e-9, time.monotonic() - last)
        cpu = time.thread_time() - cpu_last
        jiffies = _cpu_jiffies()
        total, stolen = (a - b for a, b in zip(jiffies, jiffies_last, strict=True))
        sample(
            Tenth(
                now,
                written / wall,
                cpu * 1e6 / max(1, written),
                (time.process_time() - proc_last - cpu) / wall,
                stolen / total if total > 0 else 0.0,
            )
        )
        last = time.monotonic()
        cpu_last, proc_last, jiffies_last = (
            time.thread_time(),
            time.process_time(),
            _cpu_jiffies(),
        )


def sustained(
    path: str,
    seconds: float,
    seed: int = 42,
    keys: str = "random",
    keep: bool = False,
    window: int = WINDOW_KEYS,
) -> SustainedRun:
    """Run the load for ``seconds`` on a new tablet at ``path``; ``keys`` is one of
    ``KEY_PATTERNS`` (see the module docstring). With ``keep`` the run's ``_Load`` is
    left in ``SustainedRun.load`` (for the equal-data rival). The window load's tablet
    is first bulk loaded with its ``window`` keys (``_build_equal_data``), before the
    maintenance manager and the clock start."""
    # room for the keys of a run at 300k inserts a second (runs insert 170-210k), at most
    # 2 GiB of address space; a faster or longer run doubles the array past that
    windowed = keys == "window"
    capacity = min(int(seconds * 300_000), 1 << 28)
    load = _Load(keys, seed, window if windowed else 0, capacity=capacity, window=window)
    mm = _manager()
    t = _build_equal_data(path, load) if windowed else Tablet.create(path, SCHEMA, OPTIONS)
    t.attach(mm)
    out = SustainedRun()

    def sample(x: Tenth) -> None:
        rowsets, redo, undo, redo_one, raw = _counts(t)
        st = t.stats()
        out.samples.append(
            Sample(
                x.at_s,
                x.rows_per_s,
                rowsets,
                redo,
                undo,
                redo_one,
                t.memory_bytes(),
                st["disk_bytes"],
                raw,
                x.writer_cpu_us_per_row,
                st["average_rowset_height"],
                load.live,
                x.other_cpus,
                x.steal,
            )
        )

    try:
        _tenths(seconds, lambda: load.round(t), sample)
    finally:
        mm.stop()
    out.errors = load.errors
    out.ops = dict(collections.Counter(r.op for r in mm.history()))
    for rec in mm.history():
        out.op_seconds[rec.op] = round(out.op_seconds.get(rec.op, 0.0) + rec.duration_s, 1)
    # sequential keys are distinct by construction (a sort of hundreds of millions of
    # keys took minutes and gigabytes)
    out.rows_expected = load.live if keys != "random" else len(load.distinct_keys())
    out.rows_found = t.count_rows()
    t.close()
    if keep:
        out.load = load
    return out


# The rival's tablet is bulk loaded in sorted chunks of this many rows (~2.7M rows/s).
_BUILD_CHUNK = 4_000_000


def _build_equal_data(path: str, load: _Load) -> Tablet:
    """A fresh tablet holding ``load``'s keys (random ones: ``load.inserted[:nkeys]``,
    sorted), written in key order as full-size non-overlapping DiskRowSets with no
    deltas: the layout a finished compaction gives, without the run's history."""
    t = Tablet.create(path, SCHEMA, OPTIONS)
    rng = np.random.default_rng(7)
    for lo in range(0, load.nkeys, _BUILD_CHUNK):
        hi = min(load.nkeys, lo + _BUILD_CHUNK)
        seq = load.keys != "random"
        k = np.arange(lo, hi, dtype=np.int64) if seq else load.inserted[lo:hi]
        res = t.insert(_rows(k, rng))
        if res.errors:
            raise RuntimeError(f"equal-data build: {res.errors[:3]}")
    return t


def _fresh_process_load(
    path: str,
    keys: str,
    seed: int,
    nkeys: int,
    keys_file: str | None,
    seconds: float,
    build: bool,
) -> dict[str, float]:
    """In a fresh process: open the tablet at ``path`` (with ``build``, first build the
    equal-data tablet there), then go on with the same load with maintenance on,
    ``WARMUP_S`` unmeasured then ``seconds`` measured."""
    inserted = None
    if keys_file is not None:
        inserted = np.load(keys_file)  # distinct, sorted (the build relies on it)
        # room to append the new keys, as the run's own array had
        inserted = np.concatenate([inserted, np.zeros(len(inserted), dtype=np.int64)])
    load = _Load(keys, seed + 1, nkeys, inserted)
    t0 = time.monotonic()
    t = _build_equal_data(path, load) if build else Tablet.open(path, OPTIONS)
    open_s = time.monotonic() - t0
    rowsets, redo = _counts(t)[:2]
    mm = _manager()
    t.attach(mm)
    try:
        end = time.monotonic() + WARMUP_S
        while time.monotonic() < end:
            load.round(t)
        written, t0, c0 = 0, time.monotonic(), time.thread_time()
        end = t0 + seconds
        while time.monotonic() < end:
            written += load.round(t)
        wall, cpu = time.monotonic() - t0, time.thread_time() - c0
    finally:
        mm.stop()
    t.close()
    if load.errors:
        raise RuntimeError(f"load in a fresh process: {load.errors[:3]}")
    return {
        "rows_per_s": written / wall,
        "writer_cpu_us_per_row": cpu * 1e6 / max(1, written),
        "rowsets": rowsets,
        "redo_files": redo,
        "open_s": open_s,  # building the equal-data tablet, or opening the run's
    }


# Each fresh-process load runs this long before its measured tenth, so that it measures
# the load's steady state (MemRowSet and DeltaMemStores filled, flushes and delta
# compactions running) rather than an empty memory.
WARMUP_S = 20.0


def _run_in_own_process(
    path: str, seconds: float, seed: int, keys: str, keys_file: str
) -> tuple[SustainedRun, int]:
    """``sustained`` in a fresh process (see ``run``): the run (its samples and
    counts, without its load) and the number of keys it holds, the random ones saved
    to ``keys_file`` (distinct, sorted) for the fresh-process loads."""
    r = sustained(path, seconds, seed, keys, keep=True)
    load, r.load = r.load, None
    assert load is not None
    if keys != "random":
        return r, load.nkeys
    distinct = load.distinct_keys()
    np.save(keys_file, distinct)
    return r, len(distinct)


def fresh_process_loads(
    wd: Path, run_path: str, keys: str, seed: int, nkeys: int, keys_file: str | None, seconds: float
) -> tuple[dict[str, float], dict[str, float]]:
    """For a run whose tablet is at ``run_path`` (holding ``nkeys`` keys, the random
    ones in ``keys_file``), go on with the same load for ``seconds`` in a fresh
    (spawned) interpreter twice: on the run's own tablet reopened, then on the
    equal-data rival (built at the run's tablet's place). The first tells the tablet's
    state from the run's process having aged; the second the tablet's state from its
    data."""
    args = (keys, seed, nkeys, keys_file, seconds)
    reopened = _in_fresh_process(_fresh_process_load, run_path, *args, False)
    shutil.rmtree(run_path)  # the rival's tablet takes its place on disk
    path = str(fresh_dir(wd, f"rival-{keys}"))
    rival = _in_fresh_process(_fresh_process_load, path, *args, True)
    return reopened, rival


@dataclass
class _SqliteWritten:
    errors: list[str] = field(default_factory=list)


class _SqliteTable:
    """The load's writes against SQLite (stdlib ``sqlite3``), the B-tree rival: a file
    database in WAL mode, ``synchronous=OFF`` (the run's tablets do not fsync either),
    a page cache as large as the tablet's default block cache, and the table
    ``t (k INTEGER PRIMARY KEY, a INTEGER, b REAL, s TEXT)``: each key is found in the
    table's B-tree, with no maintenance to fall behind. Each batch is one transaction of
    one ``executemany`` (its rows handed over as Python tuples, as SQLite takes them
    from Python)."""

    def __init__(self, path: str) -> None:
        self.con = sqlite3.connect(path, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=OFF")
        self.con.execute(f"PRAGMA cache_size=-{default_block_cache_bytes() >> 10}")  # KiB
        self.con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, a INTEGER, b REAL, s TEXT)")

    def _batch(self, sql: str, rows: Any) -> _SqliteWritten:
        self.con.execute("BEGIN")
        try:
            self.con.executemany(sql, rows)
        except sqlite3.IntegrityError as e:  # a key drawn twice: the batch is undone
            self.con.execute("ROLLBACK")
            return _SqliteWritten([str(e)])
        self.con.execute("COMMIT")
        return _SqliteWritten()

    def insert(self, data: pa.Table) -> _SqliteWritten:
        cols = [data.column(c).to_pylist() for c in ("k", "a", "b", "s")]
        return self._batch("INSERT INTO t VALUES (?, ?, ?, ?)", zip(*cols, strict=True))

    def update(self, data: pa.Table) -> _SqliteWritten:
        k, a = data.column("k").to_pylist(), data.column("a").to_pylist()
        return self._batch("UPDATE t SET a = ? WHERE k = ?", zip(a, k, strict=True))

    def delete(self, data: pa.Table) -> _SqliteWritten:
        return self._batch(
            "DELETE FROM t WHERE k = ?", ((k,) for k in data.column("k").to_pylist())
        )

    def count_rows(self) -> int:
        return int(self.con.execute("SELECT count(*) FROM t").fetchone()[0])


def sqlite_sustained(
    path: str, seconds: float, seed: int, keys: str, window: int = WINDOW_KEYS
) -> dict[str, Any]:
    """The run's load (same seed, same rounds) against ``_SqliteTable`` at ``path`` for
    ``seconds``: per tenth (at_s, rows/s, writer CPU us/row, keys held then), and the
    rows it holds against the keys it should. (The window load starts empty here.)"""
    load = _Load(keys, seed, capacity=min(int(seconds * 300_000), 1 << 28), window=window)
    db = _SqliteTable(path)
    samples: list[tuple[float, float, float, int]] = []
    _tenths(
        seconds,
        lambda: load.round(db),
        lambda x: samples.append((x.at_s, x.rows_per_s, x.writer_cpu_us_per_row, load.live)),
    )
    expected = load.live if keys != "random" else len(load.distinct_keys())
    found = db.count_rows()
    db.con.close()
    return {
        "samples": samples,
        "rows_expected": expected,
        "rows_found": found,
        "errors": load.errors[:3],
        "version": sqlite3.sqlite_version,
    }


def _in_fresh_process(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a spawned interpreter, which exits before this returns: each
    phase of the benchmark has the machine's memory to itself (a process keeps what
    its block cache and key arenas grew to, and two of them together have been
    killed for memory on this 24 GiB machine)."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(fn, *args).result()


def run(cfg: Config) -> Result:
    seconds = float(cfg.rows or DEFAULT_SECONDS)
    res = Result(
        NAME,
        f"{seconds:g} s of mixed inserts and updates per key pattern, maintenance on",
        "the same run's first tenth (a flat line is 1.0x)",
    )
    for keys in _patterns():
        with workdir(cfg, NAME) as wd:
            path = str(fresh_dir(wd, f"tablet-{keys}"))
            keys_file = str(wd / "keys.npy")
            log(f"sustained load, {keys} keys, for {seconds:g} s")
            r, nkeys = _in_fresh_process(
                _run_in_own_process, path, seconds, cfg.seed, keys, keys_file
            )
            if keys == "window":  # its own first tenth is its equal-data rival
                _report_window(res, r)
                continue
            log(f"{keys} keys: the run's tablet reopened, then the equal-data rival")
            reopened, rival = fresh_process_loads(
                wd,
                path,
                keys,
                cfg.seed,
                nkeys,
                keys_file if keys == "random" else None,
                seconds / SAMPLES,
            )
            log(f"{keys} keys: the same load on SQLite for {seconds:g} s")
            sq = _in_fresh_process(
                sqlite_sustained, str(wd / "rival.sqlite"), seconds, cfg.seed, keys
            )
        _report(res, keys, r, reopened, rival)
        _report_sqlite(res, keys, r, sq)
    return res


def _patterns() -> list[str]:
    """The loads to run: ``KUDUSQL_SUSTAINED_KEYS`` (comma-separated), else all."""
    raw = os.environ.get("KUDUSQL_SUSTAINED_KEYS", "")
    chosen = [k.strip() for k in raw.split(",") if k.strip()] or list(KEY_PATTERNS)
    bad = [k for k in chosen if k not in KEY_PATTERNS]
    if bad:
        raise ValueError(f"KUDUSQL_SUSTAINED_KEYS: unknown {bad}; known: {KEY_PATTERNS}")
    return chosen


def _report_tenths(res: Result, k: str, r: SustainedRun) -> None:
    """What every load reports: its last tenth against its first, and the most
    rowsets and delta files seen."""
    first, lastp = r.samples[0], r.samples[-1]
    res.add(k + "throughput, last tenth", lastp.rows_per_s, first.rows_per_s, unit="rows/s")
    res.add(k + "throughput ratio last/first", lastp.rows_per_s / first.rows_per_s, 1.0, unit="x")
    res.add(
        k + "writer CPU per row, last tenth",
        lastp.writer_cpu_us_per_row,
        first.writer_cpu_us_per_row,
        unit="us",
    )
    res.add(k + "DiskRowSets, max seen", max(s.rowsets for s in r.samples), None, unit="")
    res.add(k + "REDO files, max seen", max(s.redo_files for s in r.samples), None, unit="")
    res.add(k + "UNDO files, max seen", max(s.undo_files for s in r.samples), None, unit="")
    res.add(
        k + "REDO files of one rowset, max seen",
        max(s.redo_files_per_rowset for s in r.samples),
        None,
        unit="",
    )


def _report_window(res: Result, r: SustainedRun) -> None:
    """The window load: its data's size is constant, so its last tenth is set against its
    first as is (both at ``WINDOW_KEYS`` live keys, the first on a freshly bulk-loaded
    tablet: what a finished compaction leaves)."""
    first, lastp = r.samples[0], r.samples[-1]
    k = "window keys: "
    _report_tenths(res, k, r)
    res.add(k + "DiskRowSets, last tenth", lastp.rowsets, first.rowsets, unit="")
    res.add(k + "disk bytes, last tenth", lastp.disk_bytes, first.disk_bytes, unit="B")
    res.add(
        k + "rows lost or kept past their delete",
        abs(r.rows_expected - r.rows_found),
        None,
        unit="",
        goal=Goal(max_value=1),
    )
    res.info["window_samples"] = [s.__dict__ for s in r.samples]
    res.info["window_maintenance_ops"] = r.ops
    res.notes.append(
        "window keys, samples (s, rows/s, writer CPU us/row, rowsets, redo, undo, MiB disk, "
        "M live keys, other threads' CPUs, % stolen): "
        + "; ".join(
            f"{s.at_s:.0f} {s.rows_per_s:.0f} {s.writer_cpu_us_per_row:.2f} {s.rowsets} "
            f"{s.redo_files} {s.undo_files} {s.disk_bytes / 2**20:.1f} {s.keys / 1e6:.1f} "
            f"{s.other_cpus:.2f} {100 * s.steal:.1f}"
            for s in r.samples
        )
    )
    res.notes.append(f"window keys, maintenance ops run: {r.ops}, seconds: {r.op_seconds}")


def _report(
    res: Result,
    keys: str,
    r: SustainedRun,
    reopened: dict[str, float],
    rival: dict[str, float],
) -> None:
    lastp = r.samples[-1]
    k = f"{keys} keys: "
    res.add(
        k + "throughput, last tenth vs equal-data rival",
        lastp.rows_per_s,
        rival["rows_per_s"],
        unit="rows/s",
    )
    res.add(
        k + "writer CPU per row, last tenth vs equal-data rival",
        lastp.writer_cpu_us_per_row,
        rival["writer_cpu_us_per_row"],
        unit="us",
    )
    res.add(
        k + "throughput, run's tablet reopened vs equal-data rival",
        reopened["rows_per_s"],
        rival["rows_per_s"],
        unit="rows/s",
    )
    res.add(
        k + "writer CPU per row, run's tablet reopened vs equal-data rival",
        reopened["writer_cpu_us_per_row"],
        rival["writer_cpu_us_per_row"],
        unit="us",
    )
    _report_tenths(res, k, r)
    res.add(k + "rows lost", r.rows_expected - r.rows_found, None, unit="", goal=Goal(max_value=1))
    res.info[f"{keys}_samples"] = [s.__dict__ for s in r.samples]
    res.info[f"{keys}_maintenance_ops"] = r.ops
    res.info[f"{keys}_equal_data_rival"] = rival
    res.info[f"{keys}_reopened"] = reopened
    res.notes.append(
        f"{keys} keys, samples (s, rows/s, writer CPU us/row, rowsets, redo, undo, most "
        "redo of a rowset, MiB mem, MiB disk, MiB raw, average height, M keys, other "
        "threads' CPUs, % stolen): "
        + "; ".join(
            f"{s.at_s:.0f} {s.rows_per_s:.0f} {s.writer_cpu_us_per_row:.2f} {s.rowsets} "
            f"{s.redo_files} {s.undo_files} {s.redo_files_per_rowset} "
            f"{s.memory_bytes / 2**20:.1f} {s.disk_bytes / 2**20:.1f} "
            f"{s.raw_bytes / 2**20:.1f} {s.average_height:.2f} {s.keys / 1e6:.1f} "
            f"{s.other_cpus:.2f} {100 * s.steal:.1f}"
            for s in r.samples
        )
    )
    res.notes.append(f"{keys} keys, maintenance ops run: {r.ops}, seconds: {r.op_seconds}")


def _report_sqlite(res: Result, keys: str, r: SustainedRun, sq: dict[str, Any]) -> None:
    """The run against SQLite's run of the same load (``sqlite_sustained``)."""
    first, lastp = r.samples[0], r.samples[-1]
    sq_first, sq_last = sq["samples"][0], sq["samples"][-1]
    k = f"{keys} keys: "
    res.add(
        k + "throughput ratio last/first vs SQLite's",
        lastp.rows_per_s / first.rows_per_s,
        sq_last[1] / sq_first[1],
        unit="x",
    )
    # SQLite writes fewer rows a second, so in the same time its table grows less: the
    # same ratio at equal data takes our first tenth that reached SQLite's final size.
    reached = next((s for s in r.samples if s.keys >= sq_last[3]), lastp)
    res.add(
        k + "throughput at SQLite's final key count / first tenth, vs SQLite's last/first",
        reached.rows_per_s / first.rows_per_s,
        sq_last[1] / sq_first[1],
        unit="x",
    )
    res.add(k + "throughput, first tenth vs SQLite", first.rows_per_s, sq_first[1], unit="rows/s")
    res.add(k + "throughput, last tenth vs SQLite", lastp.rows_per_s, sq_last[1], unit="rows/s")
    res.add(
        k + "writer CPU per row, last tenth vs SQLite",
        lastp.writer_cpu_us_per_row,
        sq_last[2],
        unit="us",
    )
    res.info[f"{keys}_sqlite"] = sq
    res.notes.append(
        f"{keys} keys, SQLite {sq['version']} (s, rows/s, writer CPU us/row, M keys): "
        + "; ".join(
            f"{at:.0f} {rate:.0f} {cpu:.2f} {n / 1e6:.1f}" for at, rate, cpu, n in sq["samples"]
        )
        + f"; rows {sq['rows_found']:,} of {sq['rows_expected']:,} keys inserted"
        + (f"; errors {sq['errors']}" if sq["errors"] else "")
    )


def summary(r: SustainedRun) -> dict[str, Any]:
    """The figures the slow test checks."""
    return {
        "max_rowsets": max(s.rowsets for s in r.samples),
        "max_redo": max(s.redo_files for s in r.samples),
        "max_undo": max(s.undo_files for s in r.samples),
        "max_redo_per_rowset": max(s.redo_files_per_rowset for s in r.samples),
        "disk_bytes": r.samples[-1].disk_bytes,
        # Rowsets beyond twice what the data needs at the target size (rowsets roll on
        # raw bytes, so compressed disk bytes would undercount the need).
        "excess_rowsets": max(
            s.rowsets - 2 * s.raw_bytes / OPTIONS.rowset_target_bytes for s in r.samples
        ),
    }
