"""YCSB-style benchmark: the Kudu paper's §6 workloads A, B, C and F, kudusql vs PostgreSQL.

Run: ``python -m benchmarks.ycsb [--rows 1000000] [--ops 100000] [--threads 4]
[--workloads A,B,C,F] [--kudusql TARGET] [--json FILE]`` (or ``make bench-ycsb``).

The table is YCSB's ``usertable``: a STRING key ``user<FNV-64 of the record number>``
(YCSB's key names with hashed insert order) and ten 100-byte STRING fields
(``benchmarks/ycsb_workloads.py``). Keys are chosen by YCSB's scrambled Zipfian
generator (theta 0.99). Both systems get exactly the same rows and operation sequence:

- **kudusql** through the DB-API (``kudusql.connect(TARGET)``; TARGET is a database
  directory, a fresh temporary one by default, or later a cluster's
  ``kudusql://host:port``). A directory is opened with ``wal_fsync="batch"``, the
  tablet server's durable group commit, so that both systems acknowledge only fsynced
  writes. Loaded with ``executemany`` INSERTs of 50,000 rows, then flushed (settling,
  as PostgreSQL's ``VACUUM ANALYZE``).
- **PostgreSQL 15** (``/usr/lib/postgresql/15/bin``), a throwaway instance that the
  benchmark initialises, starts and always stops, reached with psycopg 3 over loopback
  TCP with autocommit and server-side prepared statements, ``fsync`` and
  ``synchronous_commit`` on. Loaded with COPY, then ``VACUUM ANALYZE``.

Each client thread has its own connection and runs its share of the operations
(``--ops`` per workload, split round robin); a read is ``SELECT * ... WHERE ycsb_key =
?``, an update sets one field by key, a read-modify-write is that read then that update.
Workloads run in the order given, on the table the previous one left, as YCSB does.
It prints, per workload and system, the throughput, p50 and p99 latency per operation
type and kudusql's throughput as a fraction of PostgreSQL's (the issue's aim: >= 0.5).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from benchmarks.common import log, machine_info
from benchmarks.ycsb_workloads import (
    OP_NAMES,
    READ,
    UPDATE,
    WORKLOADS,
    Operation,
    Workload,
    field_names,
    field_values,
    key_names,
    operations,
    records_table,
)

DEFAULT_ROWS = 1_000_000
DEFAULT_OPS = 100_000
DEFAULT_THREADS = 4
LOAD_BATCH = 50_000
#: Update values are taken round robin from this many pre-made 100-byte strings.
VALUE_POOL = 1024
PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_SETTINGS = (
    "server_version",
    "fsync",
    "synchronous_commit",
    "wal_sync_method",
    "full_page_writes",
    "shared_buffers",
)
PSYCOPG_MISSING = (
    "the YCSB benchmark needs psycopg 3 to reach PostgreSQL: install it with\n"
    "  pip install 'psycopg[binary]'\n"
    "(or run `make bench-ycsb`, which installs the `bench` extra into .venv), or pass\n"
    "--systems kudusql to run kudusql alone."
)

CREATE_COLUMNS = ", ".join(f"{f} STRING" for f in field_names())
COLUMNS = ", ".join(["ycsb_key", *field_names()])


class Client(Protocol):
    """One client thread's connection: a point read and a one-field update by key."""

    def read(self, key: str) -> tuple[Any, ...] | None: ...

    def update(self, key: str, field_index: int, value: str) -> int: ...

    def close(self) -> None: ...


class System(Protocol):
    """A system under test: loads the records, then hands out one client per thread."""

    name: str
    description: str
    settings: dict[str, str]

    def load(self, rows: int, seed: int) -> None: ...

    def client(self) -> Client: ...

    def client_spec(self) -> ClientSpec: ...


#: What a client process needs to open its own connection: (system, target, options).
ClientSpec = tuple[str, str, dict[str, Any]]


def make_client(spec: ClientSpec) -> Client:
    """A new connection from a picklable spec (in a client process)."""
    system, target, options = spec
    if system == "kudusql":
        return KudusqlClient(target, options)
    return PostgresClient(target)


# -- kudusql ----------------------------------------------------------------------------------
class KudusqlClient:
    """A DB-API connection with the benchmark's statements (qmark parameters)."""

    def __init__(self, target: str, options: dict[str, Any]) -> None:
        import kudusql

        self.conn = kudusql.connect(target, **options)
        self.cur = self.conn.cursor()
        self._select = "SELECT * FROM usertable WHERE ycsb_key = ?"
        self._updates = [f"UPDATE usertable SET {f} = ? WHERE ycsb_key = ?" for f in field_names()]

    def read(self, key: str) -> tuple[Any, ...] | None:
        self.cur.execute(self._select, (key,))
        row: tuple[Any, ...] | None = self.cur.fetchone()
        return row

    def update(self, key: str, field_index: int, value: str) -> int:
        self.cur.execute(self._updates[field_index], (value, key))
        return int(self.cur.rowcount)

    def close(self) -> None:
        self.conn.close()


class Kudusql:
    """kudusql at a directory or a cluster address: the table made and loaded through
    the DB-API."""

    name = "kudusql"

    def __init__(self, target: str, partitions: int) -> None:
        self.target = target
        self.partitions = partitions
        remote = target.startswith("kudusql://")
        # A directory gets the tablet server's durable group commit (acknowledged writes
        # are fsynced in the WAL); a cluster's servers always use it.
        self.options: dict[str, Any] = {} if remote else {"wal_fsync": "batch"}
        self.description = f"kudusql DB-API on {target}"
        self.settings = {"target": target, "hash_partitions": str(partitions)}
        self.settings.update({k: str(v) for k, v in self.options.items()})
        #: Held open for the run, so the database stays open between the client threads'
        #: connections.
        self._keeper: KudusqlClient | None = None

    def __enter__(self) -> Kudusql:
        self._keeper = KudusqlClient(self.target, self.options)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._keeper is not None:
            self._keeper.close()

    def load(self, rows: int, seed: int) -> None:
        assert self._keeper is not None
        conn = self._keeper.conn
        conn.execute("DROP TABLE IF EXISTS usertable")
        conn.execute(
            f"CREATE TABLE usertable (ycsb_key STRING PRIMARY KEY, {CREATE_COLUMNS}) "
            f"PARTITION BY HASH (ycsb_key) PARTITIONS {self.partitions}"
        )
        marks = ", ".join("?" * 11)
        sql = f"INSERT INTO usertable ({COLUMNS}) VALUES ({marks})"
        for start in range(0, rows, LOAD_BATCH):
            t = records_table(start, min(rows, start + LOAD_BATCH), seed)
            cols = [c.to_pylist() for c in t.columns]
            conn.cursor().executemany(sql, list(zip(*cols, strict=True)))
        # Settle, as PostgreSQL's VACUUM ANALYZE: the loaded rows are flushed to disk
        # now, not by the maintenance manager in the middle of the first workload.
        conn.session.db.table("usertable").flush()

    def client(self) -> Client:
        return KudusqlClient(self.target, self.options)

    def client_spec(self) -> ClientSpec:
        return ("kudusql", self.target, self.options)


# -- PostgreSQL -------------------------------------------------------------------------------
class PostgresClient:
    """A psycopg 3 connection: autocommit, every statement prepared on the server."""

    def __init__(self, conninfo: str) -> None:
        import psycopg  # type: ignore[import-not-found,unused-ignore]

        self.conn = psycopg.connect(conninfo, autocommit=True, prepare_threshold=0)
        self._select = "SELECT * FROM usertable WHERE ycsb_key = %s"
        self._updates = [
            f"UPDATE usertable SET {f} = %s WHERE ycsb_key = %s" for f in field_names()
        ]

    def read(self, key: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(
            self._select, (key,), prepare=True
        ).fetchone()
        return row

    def update(self, key: str, field_index: int, value: str) -> int:
        cur = self.conn.execute(self._updates[field_index], (value, key), prepare=True)
        return int(cur.rowcount)

    def close(self) -> None:
        self.conn.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Postgres:
    """A throwaway PostgreSQL instance in a temporary directory, stopped on exit."""

    name = "postgresql"

    def __init__(self, tmp_parent: str | None) -> None:
        self.tmp_parent = tmp_parent
        self.description = "PostgreSQL 15, psycopg 3 over loopback TCP"
        self.settings: dict[str, str] = {}
        self.dir: Path | None = None
        self.started = False
        self.port = _free_port()
        self.conninfo = f"host=127.0.0.1 port={self.port} user=bench dbname=postgres"

    def _run(self, *args: str) -> None:
        cmd = [str(PG_BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:  # initdb and pg_ctl refuse to run as root
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log_text = ""
            if self.dir is not None and (self.dir / "pg.log").exists():
                log_text = (self.dir / "pg.log").read_text()[-2000:]
            raise RuntimeError(
                f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}\n{log_text}"
            )

    def __enter__(self) -> Postgres:
        if not (PG_BIN / "pg_ctl").exists():
            raise RuntimeError(f"PostgreSQL 15 is not installed ({PG_BIN} has no pg_ctl)")
        self.dir = Path(tempfile.mkdtemp(prefix="kudusql-bench-ycsb-pg-", dir=self.tmp_parent))
        try:
            if os.geteuid() == 0:
                shutil.chown(self.dir, "postgres", "postgres")
            d = str(self.dir)
            self._run("initdb", "-D", f"{d}/data", "-U", "bench", "--auth=trust", "-E", "UTF8",
                      "--no-locale")  # fmt: skip
            opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {d}"
            self._run("pg_ctl", "-D", f"{d}/data", "-l", f"{d}/pg.log", "-w", "-o", opts, "start")
            self.started = True
            import psycopg

            with psycopg.connect(self.conninfo, autocommit=True) as c:
                for s in PG_SETTINGS:
                    row = c.execute(f"SHOW {s}").fetchone()
                    self.settings[s] = "" if row is None else str(row[0])
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.started and self.dir is not None:
            with contextlib.suppress(RuntimeError):
                self._run("pg_ctl", "-D", f"{self.dir}/data", "-m", "fast", "-w", "stop")
            self.started = False
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def load(self, rows: int, seed: int) -> None:
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as c:
            c.execute("DROP TABLE IF EXISTS usertable")
            fields = ", ".join(f"{f} TEXT" for f in field_names())
            c.execute(f"CREATE TABLE usertable (ycsb_key VARCHAR(255) PRIMARY KEY, {fields})")
            with c.cursor() as cur, cur.copy(f"COPY usertable ({COLUMNS}) FROM STDIN") as copy:
                for start in range(0, rows, LOAD_BATCH):
                    t = records_table(start, min(rows, start + LOAD_BATCH), seed)
                    cols = [col.to_pylist() for col in t.columns]
                    for row in zip(*cols, strict=True):
                        copy.write_row(row)
            c.execute("VACUUM ANALYZE usertable")

    def client(self) -> Client:
        return PostgresClient(self.conninfo)

    def client_spec(self) -> ClientSpec:
        return ("postgresql", self.conninfo, {})


# -- running a workload -----------------------------------------------------------------------
@dataclass
class Outcome:
    """One workload on one system: wall time and per-operation latencies (µs)."""

    system: str
    workload: str
    ops: int
    seconds: float
    latencies_us: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds

    def percentiles(self) -> dict[str, dict[str, float]]:
        return {
            kind: {
                "count": float(len(lat)),
                "p50_us": float(np.percentile(lat, 50)),
                "p99_us": float(np.percentile(lat, 99)),
            }
            for kind, lat in self.latencies_us.items()
            if len(lat)
        }


def _client_thread(
    make: Callable[[], Client],
    ops: list[Operation],
    op_keys: list[str],
    values: list[str],
    ready: threading.Barrier,
    go: threading.Event,
    out: dict[str, list[int]],
    errors: list[BaseException],
) -> None:
    """One client: opens its connection, waits for the start, runs its operations and
    records each one's latency (ns) by kind."""
    client: Client | None = None
    try:
        client = make()
        clock = time.perf_counter_ns
        read, update = client.read, client.update
        lat = {kind: out[kind] for kind in OP_NAMES}
        ready.wait()
        go.wait()
        for i, (op, key) in enumerate(zip(ops, op_keys, strict=True)):
            t0 = clock()
            if op.kind == READ:
                if read(key) is None:
                    raise RuntimeError(f"read of {key} found nothing")
            elif op.kind == UPDATE:
                if update(key, op.field, values[i % VALUE_POOL]) != 1:
                    raise RuntimeError(f"update of {key} changed no row")
            else:
                if read(key) is None:
                    raise RuntimeError(f"read of {key} found nothing")
                if update(key, op.field, values[i % VALUE_POOL]) != 1:
                    raise RuntimeError(f"update of {key} changed no row")
            lat[op.kind].append(clock() - t0)
    except BaseException as e:  # reported by the runner after the join
        errors.append(e)
        ready.abort()
        go.set()
    finally:
        if client is not None:
            client.close()


def _run_clients(
    make: Callable[[], Client],
    ops: list[Operation],
    op_keys: list[str],
    values: list[str],
    threads: int,
    started: Callable[[], None],
) -> tuple[list[dict[str, list[int]]], list[BaseException]]:
    """Runs ``threads`` clients over ``ops`` (split round robin) in this process;
    ``started`` is called once every client is connected, and the clients start when
    it returns."""
    ready = threading.Barrier(threads + 1)
    go = threading.Event()
    outs: list[dict[str, list[int]]] = [{k: [] for k in OP_NAMES} for _ in range(threads)]
    errors: list[BaseException] = []
    workers = [
        threading.Thread(
            target=_client_thread,
            args=(make, ops[t::threads], op_keys[t::threads], values, ready, go, outs[t], errors),
            name=f"ycsb-client-{t}",
        )
        for t in range(threads)
    ]
    for w in workers:
        w.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        ready.wait()
    try:
        if not errors:
            started()
    finally:
        go.set()
        for w in workers:
            w.join()
    return outs, errors


def _client_process(
    spec: ClientSpec,
    ops: list[Operation],
    op_keys: list[str],
    values: list[str],
    threads: int,
    start: Any,  # multiprocessing Barrier
    results: Any,  # multiprocessing Queue
) -> None:
    """A client process: its threads connect, then it waits for every process to be
    ready, runs its share and sends back the latencies (or the first error's text)."""

    def started() -> None:
        start.wait()

    try:
        outs, errors = _run_clients(
            lambda: make_client(spec), ops, op_keys, values, threads, started
        )
    except BaseException as e:
        outs, errors = [], [e]
    if errors:
        start.abort()
        results.put(("error", f"{type(errors[0]).__name__}: {errors[0]}"))
    else:
        results.put(("ok", outs))


def run_workload(
    system: System,
    workload: Workload,
    ops: list[Operation],
    keys: list[str],
    values: list[str],
    threads: int,
    processes: int = 1,
) -> Outcome:
    """Runs ``ops`` with ``threads`` client threads in each of ``processes`` client
    processes (1: threads in this process). The clock runs from the moment every client
    is connected to the moment the last one finishes."""
    op_keys = [keys[op.record] for op in ops]
    clocks: list[float] = []
    if processes == 1:
        outs, errors = _run_clients(
            system.client, ops, op_keys, values, threads,
            lambda: clocks.append(time.perf_counter()),
        )  # fmt: skip
        seconds = time.perf_counter() - clocks[0] if clocks else 0.0
        if errors:
            raise RuntimeError(f"{system.name}, workload {workload.name}: {errors[0]}") from errors[
                0
            ]
    else:
        outs, seconds = _run_processes(system, workload, ops, op_keys, values, threads, processes)
    lat = {
        kind: np.array([x for o in outs for x in o[kind]], dtype=np.float64) / 1000.0
        for kind in OP_NAMES
    }
    return Outcome(system.name, workload.name, len(ops), seconds, lat)


def _run_processes(
    system: System,
    workload: Workload,
    ops: list[Operation],
    op_keys: list[str],
    values: list[str],
    threads: int,
    processes: int,
) -> tuple[list[dict[str, list[int]]], float]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(processes + 1)
    results = ctx.Queue()
    spec = system.client_spec()
    workers = [
        ctx.Process(
            target=_client_process,
            args=(spec, ops[p::processes], op_keys[p::processes], values, threads, start, results),
            name=f"ycsb-process-{p}",
        )
        for p in range(processes)
    ]
    for w in workers:
        w.start()
    try:
        with contextlib.suppress(threading.BrokenBarrierError):
            start.wait()
        t0 = time.perf_counter()
        got = [results.get() for _ in workers]
        seconds = time.perf_counter() - t0
    finally:
        for w in workers:
            w.join(timeout=60)
            if w.is_alive():
                w.kill()
    failed = [r[1] for r in got if r[0] == "error"]
    if failed:
        raise RuntimeError(f"{system.name}, workload {workload.name}: {failed[0]}")
    return [o for r in got for o in r[1]], seconds


def run_system(
    system: System, args: argparse.Namespace, workloads: list[Workload]
) -> tuple[float, list[Outcome]]:
    log(f"{system.name}: loading {args.rows:,} rows")
    t0 = time.perf_counter()
    system.load(args.rows, args.seed)
    load_s = time.perf_counter() - t0
    log(f"{system.name}: loaded in {load_s:.1f} s")
    keys = key_names(np.arange(args.rows, dtype=np.int64))
    values = [
        str(v) for v in field_values(np.random.default_rng([args.seed, 7]), VALUE_POOL).to_pylist()
    ]
    outcomes = []
    for w in workloads:
        ops = operations(w, args.rows, args.ops, args.seed)
        log(f"{system.name}: workload {w.name} ({w.description}), {len(ops):,} ops")
        o = run_workload(system, w, ops, keys, values, args.threads, args.processes)
        log(f"{system.name}: workload {w.name}: {o.ops_per_s:,.0f} ops/s")
        outcomes.append(o)
    return load_s, outcomes


# -- reporting --------------------------------------------------------------------------------
def format_report(
    outcomes: dict[str, list[Outcome]], workloads: list[Workload], loads: dict[str, float]
) -> str:
    head = ["workload", "system", "ops/s", "vs pg"]
    for kind in OP_NAMES:
        head += [f"{kind} p50", "p99"]
    lines = [head]
    by = {(o.system, o.workload): o for os_ in outcomes.values() for o in os_}
    for w in workloads:
        pg = by.get(("postgresql", w.name))
        for system in outcomes:
            o = by[(system, w.name)]
            vs = None if pg is None or system == "postgresql" else o.ops_per_s / pg.ops_per_s
            ratio = "" if vs is None else f"{vs:.2f}x"
            cells = [w.name, system, f"{o.ops_per_s:,.0f}", ratio]
            pct = o.percentiles()
            for kind in OP_NAMES:
                p = pct.get(kind)
                cells += ["-", "-"] if p is None else [_us(p["p50_us"]), _us(p["p99_us"])]
            lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = []
    for j, line in enumerate(lines):
        cells = [c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(line)]
        out.append("  ".join(cells))
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    out.append("latencies in µs per operation; vs pg = kudusql ops/s / PostgreSQL ops/s")
    out.append("(the issue's aim: >= 0.5x)")
    out.append("load: " + ", ".join(f"{s} {t:.1f} s" for s, t in loads.items()))
    return "\n".join(out)


def _us(v: float) -> str:
    return f"{v:,.0f}"


def to_json(
    args: argparse.Namespace,
    systems: dict[str, dict[str, Any]],
    outcomes: dict[str, list[Outcome]],
    loads: dict[str, float],
) -> dict[str, Any]:
    pg = {o.workload: o for o in outcomes.get("postgresql", [])}
    results = []
    for system, os_ in outcomes.items():
        for o in os_:
            rival = pg.get(o.workload)
            results.append(
                {
                    "system": system,
                    "workload": o.workload,
                    "ops": o.ops,
                    "seconds": o.seconds,
                    "ops_per_s": o.ops_per_s,
                    "ratio_to_postgresql": None
                    if rival is None or system == "postgresql"
                    else o.ops_per_s / rival.ops_per_s,
                    "latency": o.percentiles(),
                }
            )
    return {
        "name": "ycsb",
        "config": {
            "rows": args.rows,
            "ops": args.ops,
            "threads": args.threads,
            "processes": args.processes,
            "workloads": args.workloads,
            "seed": args.seed,
            "partitions": args.partitions,
        },
        "systems": systems,
        "load_s": loads,
        "results": results,
        "machine": machine_info(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


# -- command line -----------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.ycsb",
        description="YCSB workloads A, B, C, F (Zipfian keys) on kudusql and PostgreSQL.",
    )
    p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help="records loaded (default 1M)")
    p.add_argument(
        "--ops", type=int, default=DEFAULT_OPS, help="operations per workload (default 100k)"
    )
    p.add_argument(
        "--threads", type=int, default=DEFAULT_THREADS, help="client threads, each with its "
        "own connection, for both systems (default 4)",
    )  # fmt: skip
    p.add_argument(
        "--processes", type=int, default=1, help="client processes, each running --threads "
        "clients, for both systems (default 1: threads in this process); a kudusql "
        "directory admits one process, so more need a cluster",
    )  # fmt: skip
    p.add_argument("--workloads", default="A,B,C,F", help="comma-separated, run in this order")
    p.add_argument(
        "--kudusql", metavar="TARGET", default=None, help="a database directory or "
        "kudusql://host:port, whose usertable is replaced (default: a fresh temporary "
        "directory)",
    )  # fmt: skip
    p.add_argument("--partitions", type=int, default=4, help="hash partitions of the kudusql table")
    p.add_argument("--systems", default="kudusql,postgresql", help="which systems to run")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--tmpdir", default=None, help="where temporary databases go")
    p.add_argument("--json", metavar="FILE", default=None, help="also write results as JSON")
    a = p.parse_args(argv)
    a.workloads = [w.strip().upper() for w in a.workloads.split(",") if w.strip()]
    bad = [w for w in a.workloads if w not in WORKLOADS]
    if bad:
        p.error(f"unknown workload(s) {', '.join(bad)}; known: {', '.join(WORKLOADS)}")
    if len(set(a.workloads)) != len(a.workloads):
        p.error("each workload may be named once")
    a.systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    if not a.systems or any(s not in ("kudusql", "postgresql") for s in a.systems):
        p.error("--systems takes kudusql, postgresql or both")
    for name in ("rows", "ops", "threads", "processes", "partitions"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be >= 1")
    if a.processes > 1 and "kudusql" in a.systems and not str(a.kudusql).startswith("kudusql://"):
        p.error("--processes > 1 needs --kudusql kudusql://HOST:PORT (a directory has one writer)")
    if a.rows < 2:
        p.error("--rows must be >= 2")
    return a


@contextlib.contextmanager
def _kudusql_target(args: argparse.Namespace) -> Iterator[str]:
    if args.kudusql is not None:
        yield args.kudusql
        return
    d = tempfile.mkdtemp(prefix="kudusql-bench-ycsb-", dir=args.tmpdir)
    try:
        yield str(Path(d) / "db")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "postgresql" in args.systems:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            print(PSYCOPG_MISSING, file=sys.stderr)
            return 2
    workloads = [WORKLOADS[w] for w in args.workloads]
    outcomes: dict[str, list[Outcome]] = {}
    loads: dict[str, float] = {}
    systems: dict[str, dict[str, Any]] = {}
    makers: dict[str, Callable[[], Any]] = {
        "kudusql": lambda: _kudusql_system(args),
        "postgresql": lambda: Postgres(args.tmpdir),
    }
    try:
        for name in args.systems:
            with makers[name]() as system:
                systems[name] = {"description": system.description, "settings": system.settings}
                print(f"{name}: {system.description}; " + ", ".join(
                    f"{k}={v}" for k, v in system.settings.items()), flush=True)  # fmt: skip
                loads[name], outcomes[name] = run_system(system, args, workloads)
    except Exception as e:
        # A failed statement or server start is reported as a message; anything else
        # (a bug in the benchmark) keeps its traceback.
        if not isinstance(e, (RuntimeError, *_database_errors())):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"\nYCSB: {args.rows:,} rows (STRING key + 10 x 100-byte fields), {args.ops:,} ops "
        f"per workload, {args.processes} x {args.threads} clients (processes x threads), "
        "scrambled Zipfian (theta 0.99)"
    )
    print(format_report(outcomes, workloads, loads))
    if args.json:
        Path(args.json).write_text(
            json.dumps(to_json(args, systems, outcomes, loads), indent=2, default=str) + "\n"
        )
        print(f"results: {args.json}")
    return 0


def _database_errors() -> tuple[type[Exception], ...]:
    import kudusql

    errors: list[type[Exception]] = [kudusql.Error]
    with contextlib.suppress(ImportError):
        import psycopg

        errors.append(psycopg.Error)
    return tuple(errors)


@contextlib.contextmanager
def _kudusql_system(args: argparse.Namespace) -> Iterator[Kudusql]:
    with _kudusql_target(args) as target, Kudusql(target, args.partitions) as system:
        yield system


if __name__ == "__main__":
    sys.exit(main())
