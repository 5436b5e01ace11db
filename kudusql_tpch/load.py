"""``load``: the TPC-H tables as Kudu-style kudusql tables, and DuckDB's copies to
compare with.

Every table is created through SQL with its TPC-H primary key and hash-partitioned on
the key's first column (Kudu paper §6.1), with ``buckets`` tablets: one per ~1M rows,
rounded up to a multiple of the cores so every core has a tablet to scan; tables under
50,000 rows (nation and region always, supplier below SF 5) get one tablet.

Two loaders fill them:

- ``arrow`` (``load_arrow``): Parquet row groups read into Arrow in batches of about
  ``BATCH_ROWS`` rows and written with the storage table's ``insert``, which takes
  the bulk-load path (sorted DiskRowSets, no WAL) and writes the tablets in parallel;
  then a FLUSH, so everything is on disk as DuckDB's checkpointed file is.
- ``spark`` (``load_spark``, the default): the tables are created, the connection
  closed, and ``pyspark_kudusql.pipeline.load_tables`` writes the Parquet files through
  the Spark data source (it opens the database as the writer).

No Python loop ever touches a data row here: batches only.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

import kudusql
from kudusql.dbapi import Connection
from kudusql.shell.tpch import sql_type
from kudusql_tpch.errors import TpchError
from kudusql_tpch.generate import parquet_files, parquet_rows
from kudusql_tpch.progress import Progress, log
from kudusql_tpch.spec import FIXED_TABLES, SF1_ROWS, TPCH_KEYS

#: Rows per insert batch of the arrow loader (whole Parquet row groups are gathered up
#: to at least this many).
BATCH_ROWS = 2_000_000
#: Tables smaller than this get one tablet.
MIN_PARTITIONED_ROWS = 50_000
#: Rows per hash bucket the rule aims at.
ROWS_PER_BUCKET = 1_000_000
SPARK_HINT = "pip install -e '.[spark]' and a Java 17 runtime (JAVA_HOME or java on PATH)"


def buckets(table: str, sf: float, cores: int | None = None) -> int:
    """Hash buckets for ``table`` at ``sf``: one per ~1M rows, rounded up to a multiple
    of the cores (so the scan pool has work for every core), and 0 (no partitioning,
    one tablet) below 50,000 rows."""
    c = cores or os.cpu_count() or 1
    rows = SF1_ROWS[table] * (1 if table in FIXED_TABLES else sf)
    if rows < MIN_PARTITIONED_ROWS:
        return 0
    per_core = math.ceil(rows / (c * ROWS_PER_BUCKET))
    return c * max(1, per_core)


def create_table_sql(table: str, schema: pa.Schema, n_buckets: int) -> str:
    """``CREATE TABLE`` for a TPC-H table with its key and ``n_buckets`` hash buckets
    on the first key column (none: one tablet)."""
    key = TPCH_KEYS[table]
    # Kudu's key columns come first, in key order (Impala refuses any other layout).
    fields = [schema.field(k) for k in key] + [f for f in schema if f.name not in key]
    cols = ", ".join(f"{f.name} {sql_type(f.type)} NOT NULL" for f in fields)
    sql = f"CREATE TABLE {table} ({cols}, PRIMARY KEY ({', '.join(key)}))"
    if n_buckets > 0:
        sql += f" PARTITION BY HASH ({key[0]}) PARTITIONS {n_buckets}"
    return sql


def load_kudusql(
    conn: Connection,
    data_dir: Path,
    n_buckets: Callable[[str], int],
    *,
    via_executemany: Sequence[str] = (),
    flush: bool = True,
) -> dict[str, int]:
    """Create and fill the 8 TPC-H tables through ``conn`` in one batch per table;
    tables in ``via_executemany`` are filled by ``cursor.executemany`` of an INSERT
    with parameters (the SQL path), the others by ``Table.insert`` of the Parquet rows
    cast to the table's Arrow schema. Returns rows per table; raises on any row error."""
    cur = conn.cursor()
    counts = {}
    for table in TPCH_KEYS:
        data = pq.read_table(data_dir / f"{table}.parquet")
        cur.execute(create_table_sql(table, data.schema, n_buckets(table)))
        if table in via_executemany:
            marks = ", ".join("?" for _ in data.schema)
            rows = list(zip(*(c.to_pylist() for c in data.columns), strict=True))
            names = ", ".join(data.schema.names)
            cur.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)
            applied = cur.rowcount
            errors = len(cur.warnings)
        else:
            t = conn.session.db.table(table)
            target = t.schema.arrow_schema()
            res = t.insert(data.select(target.names).cast(target))
            applied, errors = res.applied, len(res.errors)
        if applied != data.num_rows or errors:
            raise RuntimeError(f"{table}: {applied} of {data.num_rows} rows loaded")
        counts[table] = applied
        if flush:
            cur.execute(f"ALTER TABLE {table} EXECUTE FLUSH")
    return counts


# -- the runner's loaders -------------------------------------------------------------------
@dataclass
class TableLoad:
    rows: int
    seconds: float
    buckets: int
    rejected: int = 0


@dataclass
class LoadResult:
    loader: str
    seconds: float = 0.0
    tables: dict[str, TableLoad] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "loader": self.loader,
            "seconds": round(self.seconds, 3),
            "rows": sum(t.rows for t in self.tables.values()),
            "tables": {
                name: {
                    "rows": t.rows,
                    "seconds": round(t.seconds, 3),
                    "buckets": t.buckets,
                    "rejected": t.rejected,
                }
                for name, t in self.tables.items()
            },
            **self.details,
        }


def existing_tpch_tables(conn: Connection) -> list[str]:
    cur = conn.cursor()
    cur.execute("SHOW TABLES")
    names = {str(r[0]) for r in cur.fetchall()}
    cur.close()
    return [t for t in TPCH_KEYS if t in names]


def create_tables(conn: Connection, src: Path, sf: float, cores: int | None) -> dict[str, int]:
    """Drop the TPC-H tables ``conn`` holds (only those) and create them empty; returns
    the buckets of each."""
    cur = conn.cursor()
    for t in existing_tpch_tables(conn):
        cur.execute(f"DROP TABLE {t}")
    out = {}
    for t, path in parquet_files(src).items():
        out[t] = buckets(t, sf, cores)
        cur.execute(create_table_sql(t, pq.ParquetFile(path).schema_arrow, out[t]))
    cur.close()
    return out


def _row_group_batches(f: pq.ParquetFile, batch_rows: int) -> list[list[int]]:
    """Runs of consecutive row groups of at least ``batch_rows`` rows (the last may be
    smaller)."""
    groups: list[list[int]] = [[]]
    rows = 0
    for i in range(f.metadata.num_row_groups):
        if rows >= batch_rows:
            groups.append([])
            rows = 0
        groups[-1].append(i)
        rows += f.metadata.row_group(i).num_rows
    return [g for g in groups if g]


def load_arrow(
    db: Path | str,
    src: Path,
    sf: float,
    *,
    cores: int | None = None,
    batch_rows: int = BATCH_ROWS,
    progress: bool | None = None,
) -> LoadResult:
    """Create the tables in ``db`` and fill them from the Parquet files in ``src`` with
    the storage table's ``insert``, in batches; then flush each table."""
    expected = parquet_rows(src)
    res = LoadResult("arrow", details={"batch_rows": batch_rows})
    t0 = time.perf_counter()
    conn = kudusql.connect(str(db))
    try:
        n_buckets = create_tables(conn, src, sf, cores)
        cur = conn.cursor()
        with Progress("load", sum(expected.values()), "rows", enabled=progress) as bar:
            for name, path in parquet_files(src).items():
                t1 = time.perf_counter()
                table = conn.session.db.table(name)
                target = table.schema.arrow_schema()
                f = pq.ParquetFile(path)
                applied = rejected = 0
                first_error = None
                bar.note(name)
                for groups in _row_group_batches(f, batch_rows):
                    data = f.read_row_groups(groups).select(target.names).cast(target)
                    w = table.insert(data)
                    applied += w.applied
                    rejected += len(w.errors)
                    if w.errors and first_error is None:
                        first_error = w.errors[0]
                    bar.update(data.num_rows)
                cur.execute(f"ALTER TABLE {name} EXECUTE FLUSH")
                if applied != expected[name] or rejected:
                    raise TpchError(
                        f"loading {name}: {applied} of {expected[name]} rows loaded, "
                        f"{rejected} rejected; first error: {first_error}"
                    )
                res.tables[name] = TableLoad(
                    applied, time.perf_counter() - t1, n_buckets[name], rejected
                )
        cur.close()
    finally:
        conn.close()
    res.seconds = time.perf_counter() - t0
    return res


def spark_load_tables() -> Callable[..., Any]:
    """``pyspark_kudusql.pipeline.load_tables``, or a TpchError saying what to install."""
    try:
        importlib.import_module("pyspark")
    except ImportError:
        raise TpchError(
            f"--loader spark needs pyspark: {SPARK_HINT}; or load without Spark: --loader arrow"
        ) from None
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else None
    if not ((java is not None and java.exists()) or shutil.which("java")):
        raise TpchError(
            f"--loader spark needs Java (17) and none was found: {SPARK_HINT}; "
            "or load without Spark: --loader arrow"
        )
    try:
        module = importlib.import_module("pyspark_kudusql.pipeline")
    except ImportError as e:
        raise TpchError(
            f"--loader spark needs pyspark_kudusql.pipeline ({e}); "
            f"install the Spark pipeline with {SPARK_HINT}, or use --loader arrow"
        ) from e
    fn = getattr(module, "load_tables", None)
    if not callable(fn):
        raise TpchError("pyspark_kudusql.pipeline has no load_tables(); use --loader arrow")
    return fn  # type: ignore[no-any-return]


def _active_spark() -> Any:
    try:
        return importlib.import_module("pyspark.sql").SparkSession.getActiveSession()
    except Exception:  # no pyspark, or no JVM yet
        return None


def _stop_spark(before: Any) -> None:
    """Stop the session the load started; a session the caller had stays up."""
    try:
        session = _active_spark()
        if session is not None and session is not before:
            session.stop()
    except Exception:  # best effort: the load itself succeeded or already raised
        pass


def load_spark(
    db: Path,
    src: Path,
    sf: float,
    *,
    cores: int | None = None,
    master: str = "local[2]",
    progress: bool | None = None,
) -> LoadResult:
    """Create the tables in ``db`` through SQL, close the connection, and have the Spark
    pipeline load the Parquet files into them."""
    load_tables = spark_load_tables()  # fail before touching the database
    expected = parquet_rows(src)
    res = LoadResult("spark", details={"master": master})
    t0 = time.perf_counter()
    conn = kudusql.connect(str(db))
    try:
        n_buckets = create_tables(conn, src, sf, cores)
    finally:
        conn.close()  # the Spark commit opens the database as the writer
    sources = {t: [str(p)] for t, p in parquet_files(src).items()}
    loads: dict[str, Any] = {}
    before = _active_spark()
    # One call per table, so the bar moves per table (the Spark session is reused).
    try:
        with Progress("load", sum(expected.values()), "rows", enabled=progress) as bar:
            for t, files in sources.items():
                bar.note(f"{t} (Spark {master})")
                summary = load_tables(
                    str(db), {t: files}, fmt="parquet", master=master, operation="insert"
                )
                got = getattr(summary, "tables", None)
                if not isinstance(got, dict):
                    raise TpchError(f"load_tables returned {summary!r}, expected .tables")
                loads.update(got)
                bar.update(expected[t])
    finally:
        _stop_spark(before)  # no idle JVM beside the queries that are timed next
    res.seconds = time.perf_counter() - t0
    problems = []
    for t in TPCH_KEYS:
        tl = loads.get(t)
        if tl is None:
            problems.append(f"{t}: not loaded")
            continue
        rows, rejected = int(tl.rows_loaded), int(tl.rows_rejected)
        res.tables[t] = TableLoad(rows, float(tl.seconds), n_buckets[t], rejected)
        if rows != expected[t] or rejected:
            problems.append(f"{t}: {rows} of {expected[t]} rows loaded, {rejected} rejected")
    if problems:
        raise TpchError("Spark load incomplete: " + "; ".join(problems))
    return res


def load(
    loader: str,
    db: Path | str,
    src: Path,
    sf: float,
    *,
    cores: int | None = None,
    master: str = "local[2]",
    progress: bool | None = None,
) -> LoadResult:
    if loader == "arrow":
        return load_arrow(db, src, sf, cores=cores, progress=progress)
    if loader == "spark":
        if not isinstance(db, Path):
            raise TpchError(
                "the Spark loader writes a database directory; load a cluster with arrow"
            )
        return load_spark(db, src, sf, cores=cores, master=master, progress=progress)
    raise TpchError(f"unknown loader {loader!r}: spark or arrow")


# -- DuckDB ----------------------------------------------------------------------------------
def duck_parquet(data_dir: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with one view per TPC-H table over its Parquet file."""
    con = duckdb.connect()
    for t in TPCH_KEYS:
        path = str(data_dir / f"{t}.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{path}')")
    return con


def duck_native(data_dir: Path, path: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """DuckDB native tables (CTAS from the Parquet files) in ``path``, checkpointed."""
    con = duckdb.connect(path)
    for t in TPCH_KEYS:
        p = str(data_dir / f"{t}.parquet").replace("'", "''")
        con.execute(f"CREATE TABLE {t} AS SELECT * FROM read_parquet('{p}')")
    if path != ":memory:":
        con.execute("CHECKPOINT")
    return con


def duck_native_timed(src: Path, path: Path) -> tuple[duckdb.DuckDBPyConnection, float]:
    """DuckDB's native load of the same files into a fresh file database (the rival of
    ``load``), and its seconds (connect to checkpoint)."""
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    log(f"loading DuckDB native tables into {path}")
    t0 = time.perf_counter()
    con = duck_native(src, str(path))
    return con, time.perf_counter() - t0


def open_loaded(db: Path | str, src: Path, **options: Any) -> Connection:
    """A connection to ``db`` (a directory, or a cluster's ``kudusql://`` URL) after
    checking it holds the TPC-H tables with as many lineitem rows as ``src`` has (else a
    TpchError saying to load)."""
    if isinstance(db, Path) and not db.exists():
        raise TpchError(
            f"no database at {db}: run `python -m kudusql_tpch load` first (same --sf/--db)"
        )
    conn = kudusql.connect(str(db), **options)
    try:
        have = existing_tpch_tables(conn)
        if len(have) != len(TPCH_KEYS):
            missing = ", ".join(t for t in TPCH_KEYS if t not in have)
            raise TpchError(
                f"{db} lacks TPC-H table(s) {missing}: run `python -m kudusql_tpch load`"
            )
        rows = conn.session.db.table("lineitem").count_rows()
        want = pq.ParquetFile(src / "lineitem.parquet").metadata.num_rows
        if rows != want:
            raise TpchError(
                f"{db} holds {rows:,} lineitem rows but {src} has {want:,}: it was loaded at "
                "another scale factor (or changed); reload with `python -m kudusql_tpch load`"
            )
    except BaseException:
        conn.close()
        raise
    return conn
