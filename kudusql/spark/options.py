"""The options of the ``kudusql`` Spark data source: names, parsing, validation.

Spark hands options over as a case-insensitive mapping with lower-cased keys
(``.option(...)``, ``load(path)`` as ``path``, ``OPTIONS (...)`` of a SQL view). This
module owns the list of options the source understands: every option of kudu-spark's
``DefaultSource`` (so a job written for Kudu runs unchanged apart from ``kudu.master``),
kudusql's own ``kudusql.*`` options, and what each does here. It turns them into a
typed ``SourceOptions`` and fails with one clear message on a bad value. An option it
does not know is logged as a warning and ignored, as kudu-spark ignores unknown options.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from kudusql.cluster.client.target import SCHEME, ClusterTarget, is_cluster_url
from kudusql.common.errors import ProgrammingError

log = logging.getLogger("kudusql.spark")

#: Write operations (storage's names); kudu-spark's hyphenated spellings
#: (``insert-ignore``) name the same ones.
OPERATIONS = (
    "insert",
    "insert_ignore",
    "upsert",
    "upsert_ignore",
    "update",
    "update_ignore",
    "delete",
    "delete_ignore",
)

#: The prefix of the table names Impala gives the Kudu tables it creates
#: (``impala::db.t``); the SQL layer names the same table ``db.t``.
IMPALA_PREFIX = "impala::"

#: Every option, lower-cased (Spark lower-cases keys), with what it does here. The
#: first block is kudu-spark's ``DefaultSource`` (``docs/SPARK.md`` has the table).
KNOWN_OPTIONS = {
    "kudu.master": "the database: a directory path or a file:// URI; or a cluster's master, "
    "HOST:PORT (kudu-spark's meaning) or kudusql://HOST:PORT[?secret_file=F&tls_ca=C]",
    "kudu.table": "the table: t (database default), db.t, or Impala's impala::db.t",
    "kudu.operation": "insert, insert-ignore, upsert (default), upsert-ignore, update, "
    "update-ignore, delete or delete-ignore (or with _ for -)",
    "kudu.faulttolerantscan": "true: each scan piece returns its rows in primary-key order",
    "kudu.scanlocality": "closest_replica or leader_only: every tablet is local here",
    "kudu.ignorenull": "true: a NULL in an upsert or update leaves the stored value",
    "kudu.ignoreduplicaterowerrors": "true: an insert skips rows whose key exists (insert-ignore)",
    "kudu.repartition": "true: KuduContext writes repartition the DataFrame by the table's "
    "partitioning (one task per tablet); every write routes rows to tablets anyway",
    "kudu.repartition.sort": "with kudu.repartition: sort each partition by primary key "
    "(default true); every write sorts each tablet's rows by key anyway",
    "kudu.scanrequesttimeoutms": "accepted: a scan here waits on no tablet server",
    "kudu.socketreadtimeoutms": "accepted: deprecated in kudu-spark, no effect there either",
    "kudu.batchsize": "bytes per Arrow batch a read task yields (default 20 MiB)",
    "kudu.keepaliveperiodms": "accepted: there is no remote scanner to keep alive",
    "kudu.splitsizebytes": "split a tablet's scan into pieces of about this many bytes",
    "kudu.handleschemadrift": "true: add the DataFrame's columns the table lacks, as "
    "nullable columns, before writing",
    "kudu.usedrivermetadata": "accepted: tasks always get the table's metadata from the "
    "driver (in scan tokens and the write plan)",
    "kudu.snapshottimestampms": "read at this wall-clock time (milliseconds)",
    "kudu.saslprotocolname": "accepted: an embedded database has no connection to authenticate",
    "kudu.requireauthentication": "accepted: an embedded database has no connection to "
    "authenticate; access is the file system's permissions",
    "kudu.encryptionpolicy": "optional, required or required_remote: accepted, nothing "
    "travels over a network",
    # -- beyond kudu-spark's DefaultSource ---------------------------------------------------
    "path": "the database, when given as load(path) / save(path)",
    "kudu.snapshottimestampmicros": "read at this wall-clock time (microseconds since the epoch)",
    "kudu.ignorerowerrors": "true: apply the good rows and count the bad ones "
    "instead of failing the job",
    "kudu.operation.timeout.ms": "how long a write's commit waits for the database's "
    "writer lock (default 30000, Kudu's operation timeout)",
    "kudu.operationtimeoutms": "the same as kudu.operation.timeout.ms",
    "checkpointlocation": "a streaming query's checkpoint (Spark's option)",
    "kudusql.secretfile": "a cluster's secret file (else the URL's secret_file, else the "
    "driver's KUDUSQL_SECRET_FILE, else each executor's)",
    "kudusql.tlsca": "a cluster's TLS CA certificate (else the URL's tls_ca, else KUDUSQL_TLS_CA)",
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
#: Kudu's default operation timeout (``kudu.operation.timeout.ms``).
DEFAULT_LOCK_TIMEOUT_S = 30.0


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
    repartition: bool = False
    repartition_sort: bool = True
    handle_schema_drift: bool = False
    #: Seconds a commit waits for the database's writer lock.
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
    #: The cluster when ``kudu.master`` names a master (``database`` is then its
    #: ``kudusql://HOST:PORT``); None for an embedded database.
    cluster: ClusterTarget | None = None


def storage_table_name(name: str) -> str:
    """The storage name of a table name as a Kudu job gives it: ``t``, ``db.t``, or the
    name Impala gave a Kudu table it created, ``impala::db.t``, which the SQL layer calls
    ``db.t``; ``default.t`` is ``t`` (the SQL layer's database ``default``)."""
    name = name.strip()
    if name.lower().startswith(IMPALA_PREFIX):
        name = name[len(IMPALA_PREFIX) :].strip()
    if not name:
        raise ProgrammingError("option kudu.table is empty")
    db, dot, table = name.partition(".")
    if dot and db.lower() == "default":
        return table
    return name


#: ``kudu.master`` as kudu-spark means it: a master's ``HOST:PORT`` (no slash; a
#: directory whose name looks like that is given as ``./name``).
_HOST_PORT = re.compile(r"^[^/\\\s,]+:\d+$")


def names_cluster(master: str) -> bool:
    """Whether ``kudu.master`` names a cluster's master rather than a directory."""
    m = master.strip()
    return is_cluster_url(m) or bool(_HOST_PORT.match(m)) or _several_masters(m)


def _several_masters(master: str) -> bool:
    parts = [p.strip() for p in master.split(",")]
    return len(parts) > 1 and all(_HOST_PORT.match(p) for p in parts if p)


def cluster_target(
    master: str, *, secret_file: str | None = None, tls_ca: str | None = None
) -> ClusterTarget:
    """The cluster ``kudu.master`` names (``HOST:PORT``, several comma-separated, or
    ``kudusql://HOST:PORT[,HOST:PORT...]``), with its credentials: ``secret_file`` /
    ``tls_ca`` (the ``kudusql.*`` options), else the URL's parameters, else this
    process's environment (``cluster/client/target.py``)."""
    m = ",".join(p.strip() for p in master.strip().split(","))
    url = m if is_cluster_url(m) else SCHEME + m
    return ClusterTarget.parse(url, secret_file=secret_file, tls_ca=tls_ca)


def database_path(master: str) -> str:
    """A directory from ``kudu.master``: a path or a ``file://`` URI (a cluster's
    address is refused: callers that take a cluster check ``names_cluster`` first)."""
    if names_cluster(master):
        raise ProgrammingError(
            f"kudu.master {master!r} names a cluster, which this needs a directory for"
        )
    if "://" in master:
        u = urlparse(master)
        if u.scheme != "file":
            raise ProgrammingError(
                f"kudu.master {master!r}: expected a directory, a file:// URI, a master's "
                "HOST:PORT or kudusql://HOST:PORT"
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


def operation_name(value: str) -> str:
    """Storage's name of a ``kudu.operation`` value (``insert-ignore`` is
    ``insert_ignore``; any case)."""
    op = value.strip().lower().replace("-", "_")
    if op not in OPERATIONS:
        raise ProgrammingError(
            f"option kudu.operation: unknown operation {value.strip()!r}; expected one of "
            + ", ".join(o.replace("_", "-") for o in OPERATIONS)
        )
    return op


_warned: set[str] = set()


def _warn_unknown(keys: list[str]) -> None:
    """Log each unknown option once per process (the source parses its options in every
    call Spark makes)."""
    new = [k for k in keys if k not in _warned]
    if new:
        _warned.update(new)
        log.warning(
            "kudusql: ignoring unknown option(s) %s (kudu-spark ignores unknown options too; "
            "see docs/SPARK.md for the options kudusql knows)",
            ", ".join(new),
        )


def _choice(opts: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    v = opts.get(name.lower(), default).strip().lower()
    if v not in allowed:
        raise ProgrammingError(f"option {name}: expected {' or '.join(allowed)}, got {v!r}")
    return v


def _timeout_s(opts: Mapping[str, str]) -> float:
    for name in ("kudu.operation.timeout.ms", "kudu.operationTimeoutMs"):
        if name.lower() in opts:
            v = opts[name.lower()]
            try:
                ms = int(str(v).strip())
            except ValueError:
                raise ProgrammingError(f"option {name}: expected an integer, got {v!r}") from None
            if ms < 0:
                raise ProgrammingError(f"option {name}: must not be negative, got {ms}")
            return ms / 1000
    return DEFAULT_LOCK_TIMEOUT_S


def parse_options(options: Mapping[str, str], *, need_table: bool = True) -> SourceOptions:
    """Validate and type the options Spark passed (keys in any case)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    unknown = sorted(k for k in opts if k not in KNOWN_OPTIONS)
    if unknown:
        _warn_unknown(unknown)
    master = opts.get("kudu.master") or opts.get("path")
    if not master:
        raise ProgrammingError(
            "option kudu.master (the database path, or a cluster's HOST:PORT) is required"
        )
    cluster = None
    if names_cluster(master):
        cluster = cluster_target(
            master,
            secret_file=opts.get("kudusql.secretfile") or None,
            tls_ca=opts.get("kudusql.tlsca") or None,
        )
        database = f"{SCHEME}{cluster.address}"
    else:
        database = database_path(master)
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
    # Accepted, with nothing to do here (docs/SPARK.md); their values are still checked.
    for name in ("kudu.scanRequestTimeoutMs", "kudu.socketReadTimeoutMs", "kudu.keepAlivePeriodMs"):
        _int_option(opts, name)
    for name in ("kudu.useDriverMetadata", "kudu.requireAuthentication"):
        _bool(name, opts.get(name.lower(), "false"))
    _choice(opts, "kudu.encryptionPolicy", ("optional", "required", "required_remote"), "optional")
    op = operation_name(opts.get("kudu.operation", "upsert"))
    if op == "insert" and _bool(
        "kudu.ignoreDuplicateRowErrors", opts.get("kudu.ignoreduplicaterowerrors", "false")
    ):
        op = "insert_ignore"  # kudu-spark's older spelling of insert-ignore
    if _bool("kudusql.pushFilters", opts.get("kudusql.pushfilters", "false")):
        raise ProgrammingError(PUSH_FILTERS_REFUSED)
    _choice(opts, "kudu.scanLocality", ("closest_replica", "leader_only"), "closest_replica")
    return SourceOptions(
        database=database,
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
        repartition=_bool("kudu.repartition", opts.get("kudu.repartition", "false")),
        repartition_sort=_bool("kudu.repartition.sort", opts.get("kudu.repartition.sort", "true")),
        handle_schema_drift=_bool(
            "kudu.handleSchemaDrift", opts.get("kudu.handleschemadrift", "false")
        ),
        lock_timeout_s=_timeout_s(opts),
        cluster=cluster,
    )
