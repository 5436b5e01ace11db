"""The options of the ``kudusql`` Spark data source: names, parsing, validation.

Spark hands options over as a case-insensitive mapping with lower-cased keys
(``.option(...)``, ``load(path)`` as ``path``, ``OPTIONS (...)`` of a SQL view). This
module owns the list of options the source understands (kudu-spark's names, so a job
written for Kudu reads the same), turns them into a typed ``SourceOptions``, and fails
with one clear message naming an unknown option or a bad value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from kudusql.common.errors import ProgrammingError

#: Write operations, as kudu-spark names them.
OPERATIONS = (
    "insert",
    "insert_ignore",
    "upsert",
    "update",
    "update_ignore",
    "delete",
    "delete_ignore",
)

#: Every option, lower-cased (Spark lower-cases keys), with what it does.
KNOWN_OPTIONS = {
    "kudu.master": "the database: a directory path or a file:// URI",
    "path": "the database, when given as load(path) / save(path)",
    "kudu.table": "the table: t (default database) or db.t",
    "kudu.snapshottimestampmicros": "read at this wall-clock time (microseconds since the epoch)",
    "kudu.snapshottimestampms": "read at this wall-clock time (milliseconds, as kudu-spark)",
    "kudu.splitsizebytes": "split a tablet's scan into pieces of about this many bytes",
    "kudu.batchsize": "bytes per Arrow batch a read task yields (default 20 MiB)",
    "kudu.faulttolerantscan": "true: each piece returns its rows in primary-key order",
    "kudu.scanlocality": "accepted for kudu-spark jobs; every replica is local here",
    "kudu.operation": "insert, insert_ignore, upsert (default), update, update_ignore, "
    "delete or delete_ignore",
    "kudu.ignorenull": "true: a NULL in an upsert or update leaves the stored value",
    "kudu.ignorerowerrors": "true: apply the good rows and count the bad ones "
    "instead of failing the job",
    "kudusql.pushfilters": "refused when true (Spark reuses a relation's last pushed read plan "
    "for later queries; see docs/SPARK.md); false is accepted",
    "kudusql.reportfile": "write a JSON summary of a write job (rows, errors) to this file",
    "kudusql.minpartitions": "read in at least this many Spark partitions when there are "
    "as many scan pieces (default: the planning machine's CPU count)",
    "kudusql.maxpartitionbytes": "pack scan pieces into Spark partitions of at most about "
    "this many bytes (default 128 MiB)",
}

#: Why ``kudusql.pushFilters=true`` is refused. Spark 4.3 keeps the read plan of a
#: relation's last filter pushdown on the relation and runs it for a later query that
#: pushes nothing; the Python worker running that plan receives only the planned reader
#: and partition, never the filters of the query it serves, so the reuse cannot be
#: detected (docs/SPARK.md, "Filter pushdown").
PUSH_FILTERS_REFUSED = (
    "option kudusql.pushFilters=true is not supported: Spark 4.3 reuses a relation's last "
    "pushed read plan for later queries on the same DataFrame or view (df.filter('id IN "
    "(5, 9)').count() then df.count() counts 2 rows), and a data source cannot detect the "
    "reuse; leave the option unset and Spark applies the filters (see docs/SPARK.md)"
)

DEFAULT_BATCH_BYTES = 20 << 20
#: Spark's own default for packing files into read partitions
#: (``spark.sql.files.maxPartitionBytes``).
DEFAULT_MAX_PARTITION_BYTES = 128 << 20


@dataclass(frozen=True)
class SourceOptions:
    database: str
    table: str
    snapshot_micros: int | None = None
    split_size_bytes: int | None = None
    batch_bytes: int = DEFAULT_BATCH_BYTES
    fault_tolerant: bool = False
    operation: str = "upsert"
    ignore_null: bool = False
    ignore_row_errors: bool = False
    report_file: str | None = None
    #: None: the CPU count of the process planning the read.
    min_partitions: int | None = None
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES


def storage_table_name(name: str) -> str:
    """The storage name of a SQL table name: ``default.t`` and ``t`` are ``t``."""
    name = name.strip()
    if not name:
        raise ProgrammingError("option kudu.table is empty")
    db, dot, table = name.partition(".")
    if dot and db.lower() == "default":
        return table
    return name


def database_path(master: str) -> str:
    """A directory from ``kudu.master``: a path or a ``file://`` URI."""
    if "://" in master:
        u = urlparse(master)
        if u.scheme != "file":
            raise ProgrammingError(
                f"kudu.master {master!r}: only embedded databases (a path or file:// URI) "
                "are supported"
            )
        master = unquote(u.path)
    return os.path.abspath(os.path.expanduser(master))


def _bool(key: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ProgrammingError(f"option {key}: expected true or false, got {value!r}")


def _positive_int(key: str, value: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ProgrammingError(f"option {key}: expected an integer, got {value!r}") from None
    if n <= 0:
        raise ProgrammingError(f"option {key}: must be positive, got {n}")
    return n


def _int_option(opts: Mapping[str, str], name: str) -> int | None:
    """The positive integer option ``name`` (looked up lower-cased), or None if unset."""
    key = name.lower()
    return _positive_int(name, opts[key]) if key in opts else None


def parse_options(options: Mapping[str, str], *, need_table: bool = True) -> SourceOptions:
    """Validate and type the options Spark passed (keys in any case)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    unknown = sorted(k for k in opts if k not in KNOWN_OPTIONS)
    if unknown:
        known = ", ".join(k for k in KNOWN_OPTIONS if k != "path")
        raise ProgrammingError(f"unknown kudusql option(s) {', '.join(unknown)}; known: {known}")
    master = opts.get("kudu.master") or opts.get("path")
    if not master:
        raise ProgrammingError("option kudu.master (the database path) is required")
    table = opts.get("kudu.table", "")
    if need_table and not table.strip():
        raise ProgrammingError("option kudu.table is required")
    snap = None
    if "kudu.snapshottimestampmicros" in opts:
        snap = _positive_int("kudu.snapshotTimestampMicros", opts["kudu.snapshottimestampmicros"])
    elif "kudu.snapshottimestampms" in opts:
        snap = 1000 * _positive_int("kudu.snapshotTimestampMs", opts["kudu.snapshottimestampms"])
    split = _int_option(opts, "kudu.splitSizeBytes")
    batch = _int_option(opts, "kudu.batchSize") or DEFAULT_BATCH_BYTES
    min_parts = _int_option(opts, "kudusql.minPartitions")
    max_part = _int_option(opts, "kudusql.maxPartitionBytes") or DEFAULT_MAX_PARTITION_BYTES
    op = opts.get("kudu.operation", "upsert").strip().lower()
    if op not in OPERATIONS:
        raise ProgrammingError(
            f"option kudu.operation: unknown operation {op!r}; expected one of "
            + ", ".join(OPERATIONS)
        )
    if _bool("kudusql.pushFilters", opts.get("kudusql.pushfilters", "false")):
        raise ProgrammingError(PUSH_FILTERS_REFUSED)
    locality = opts.get("kudu.scanlocality", "closest_replica").strip().lower()
    if locality not in ("closest_replica", "leader_only"):
        raise ProgrammingError(
            f"option kudu.scanLocality: expected closest_replica or leader_only, got {locality!r}"
        )
    return SourceOptions(
        database=database_path(master),
        table=storage_table_name(table) if table.strip() else "",
        snapshot_micros=snap,
        split_size_bytes=split,
        batch_bytes=batch,
        fault_tolerant=_bool("kudu.faultTolerantScan", opts.get("kudu.faulttolerantscan", "false")),
        operation=op,
        ignore_null=_bool("kudu.ignoreNull", opts.get("kudu.ignorenull", "false")),
        ignore_row_errors=_bool("kudu.ignoreRowErrors", opts.get("kudu.ignorerowerrors", "false")),
        report_file=opts.get("kudusql.reportfile") or None,
        min_partitions=min_parts,
        max_partition_bytes=max_part,
    )
