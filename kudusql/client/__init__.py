"""The Python client API, modelled on Apache Kudu's Python client (``import kudu``).

This package owns the user-facing, Kudu-style object API over the tables layer
(``kudusql.storage.tables``): connecting (``connect``, ``Client``), schemas
(``schema_builder``, type constants, ``Schema``), partitioning (``Partitioning``,
``RangePartition``), DDL (``create_table``, ``delete_table``, ``new_table_alterer``, table
owner and comment, soft delete and ``recall_table``, ``get_table_statistics``), rows
(``PartialRow``, ``KuduValue``), row operations and write sessions (``table.new_insert``
..., ``Session`` with manual, sync and background flush modes, pending errors and write
op metrics), column predicates (``table['a'] > 1``), scanners (tuples, Arrow, pandas,
key bounds, snapshots and time travel), scan tokens, Arrow bulk writes
(``table.insert_arrow``, ``Session.apply_arrow``) and kudu-python's ``kudu.util``
conversions (``util``). It holds no storage logic: sessions turn buffered operations into
Arrow batches for ``Table.write``, scanners wrap ``Table.scan``. It never imports the SQL
layers.

Usage::

    import kudusql.client as kudu

    client = kudu.connect('/tmp/db')
    builder = kudu.schema_builder()
    builder.add_column('key').type(kudu.int64).nullable(False).primary_key()
    builder.add_column('value', kudu.string)
    schema = builder.build()
    parts = kudu.Partitioning().add_hash_partitions(['key'], 2)
    table = client.create_table('t', schema, parts)
    session = client.new_session()
    session.apply(table.new_insert({'key': 1, 'value': 'a'}))
    session.flush()
    rows = table.scanner().add_predicate(table['key'] >= 1).open().read_all_tuples()

On a cluster (``kudusql cluster start``), connect as kudu-python does, with the
cluster's secret (``secret_file=`` or ``KUDUSQL_SECRET_FILE``)::

    client = kudu.connect('127.0.0.1', 7051, secret_file='/tmp/c/cluster.secret')
    # or kudu.connect('kudusql://127.0.0.1:7051?secret_file=/tmp/c/cluster.secret')

and everything above works alike; scan tokens then name each tablet's tablet server.

Code written for kudu-python runs with ``import kudusql.client as kudu`` where kudusql has
the feature: scanned TIMESTAMPs are UTC-aware datetimes (``to_pandas``:
``datetime64[ns, UTC]``); errors have kudu-python's classes (``KuduNotFound``,
``KuduInvalidArgument``, ``KeyError``, ``IndexError``, ``TypeError``, ``ValueError``, ...),
each also the PEP 249 class of ``kudusql.common.errors``.

Differences from Kudu:

- ``connect`` takes one master (a host and port, or lists of one), or a database
  directory for an embedded database (a one-element list is accepted, ``port`` and
  timeouts are then ignored); clients of one process share an open embedded database.
  There is one copy of each tablet, so ``n_replicas`` above 1 is refused, replica
  selection policies are all met by it, and ``is_multimaster`` is False. An embedded
  database refuses what needs a cluster (``list_tablet_servers``, authentication).
  A cluster authenticates with its shared secret and TLS, not Kerberos or JWTs, and
  refuses soft delete and recall (its master keeps no soft-deleted tables). Absent:
  a token's tablet replicas, ``scanner.get_current_server``, ``get_resource_metrics``
  and ``set_cache_blocks``.
- ``latest_observed_timestamp()`` on a cluster includes every server's answer (Kudu's
  propagated timestamp): at or after the last write's own HybridTime.
- ``latest_observed_timestamp()`` is a ``HybridTime`` (an ``int``), not a datetime; it is
  accepted by ``set_snapshot`` (see ``timestamps``).
- ``KuduError.failed_op()`` returns the operation itself, and
  ``was_possibly_successful()`` is exact (Kudu's always says True).
- ``get_projection_schema()`` is an Arrow schema (``SchemaBuilder.copy_column`` takes its
  fields); the ``ENCODING_*``/``COMPRESSION_*`` constants are names, not Kudu's codes.
- Key columns are moved first when a schema is built (Kudu requires them listed first),
  and a key column's type is checked then (BOOL, FLOAT and DOUBLE are refused), not at
  CreateTable.
- ``Partitioning`` without range columns has no range partitioning; ``background``
  sessions flush inside ``apply``; write op metrics count an UPDATE IGNORE that drops an
  immutable cell as applied only; a key column's storage attributes cannot be altered.
"""

import importlib.util

from kudusql.client.alter import TableAlterer
from kudusql.client.client import (
    ENCRYPTION_OPTIONAL,
    ENCRYPTION_REQUIRED,
    ENCRYPTION_REQUIRED_REMOTE,
    Client,
    TableStatistics,
    connect,
)
from kudusql.client.partitioning import (
    EXCLUSIVE_BOUND,
    INCLUSIVE_BOUND,
    Partitioning,
    RangePartition,
)
from kudusql.client.predicate import Column, Predicate
from kudusql.client.row import KuduValue, PartialRow
from kudusql.client.scanner import (
    CLOSEST_REPLICA,
    FIRST_REPLICA,
    LEADER_ONLY,
    READ_AT_SNAPSHOT,
    READ_LATEST,
    READ_YOUR_WRITES,
    MissingDependencyError,
    RowBatch,
    Scanner,
    ScanToken,
    ScanTokenBuilder,
)
from kudusql.client.schema import (
    BINARY,
    BOOL,
    COMPRESSION_DEFAULT,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZLIB,
    COMPRESSION_ZSTD,
    DATE,
    DECIMAL,
    DOUBLE,
    ENCODING_AUTO,
    ENCODING_BIT_SHUFFLE,
    ENCODING_DICT,
    ENCODING_PLAIN,
    ENCODING_PREFIX,
    ENCODING_RLE,
    FLOAT,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UNIXTIME_MICROS,
    VARCHAR,
    ColumnSchema,
    ColumnSpec,
    ColumnTypeAttributes,
    KuduType,
    Schema,
    SchemaBuilder,
    binary,
    bool_,
    date,
    decimal,
    double,
    float_,
    int8,
    int16,
    int32,
    int64,
    schema_builder,
    string,
    unixtime_micros,
    varchar,
)
from kudusql.client.schema import bool_ as bool
from kudusql.client.schema import float_ as float
from kudusql.client.session import (
    FLUSH_AUTO_BACKGROUND,
    FLUSH_AUTO_SYNC,
    FLUSH_MANUAL,
    KuduError,
    Session,
)
from kudusql.client.table import Table
from kudusql.client.timestamps import HybridTime
from kudusql.client.util import TimeDelta, timedelta
from kudusql.client.write import (
    Delete,
    DeleteIgnore,
    Insert,
    InsertIgnore,
    Update,
    UpdateIgnore,
    Upsert,
    UpsertIgnore,
    WriteOperation,
)
from kudusql.common.errors import (
    KuduAlreadyPresent,
    KuduBadStatus,
    KuduException,
    KuduInvalidArgument,
    KuduNotFound,
    KuduNotSupported,
)
from kudusql.common.row_operations import RowError, WriteOp, WriteResult

timestamp = unixtime_micros
string_ = string
double_ = double

#: kudu-python's build flags: DECIMAL is always supported; pandas when it is installed
#: (``Scanner.to_pandas``).
CLIENT_SUPPORTS_DECIMAL = True
CLIENT_SUPPORTS_PANDAS = importlib.util.find_spec("pandas") is not None

__all__ = [
    "BINARY",
    "BOOL",
    "CLIENT_SUPPORTS_DECIMAL",
    "CLIENT_SUPPORTS_PANDAS",
    "CLOSEST_REPLICA",
    "COMPRESSION_DEFAULT",
    "COMPRESSION_LZ4",
    "COMPRESSION_NONE",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_ZLIB",
    "COMPRESSION_ZSTD",
    "DATE",
    "DECIMAL",
    "DOUBLE",
    "ENCODING_AUTO",
    "ENCODING_BIT_SHUFFLE",
    "ENCODING_DICT",
    "ENCODING_PLAIN",
    "ENCODING_PREFIX",
    "ENCODING_RLE",
    "ENCRYPTION_OPTIONAL",
    "ENCRYPTION_REQUIRED",
    "ENCRYPTION_REQUIRED_REMOTE",
    "EXCLUSIVE_BOUND",
    "FIRST_REPLICA",
    "FLOAT",
    "FLUSH_AUTO_BACKGROUND",
    "FLUSH_AUTO_SYNC",
    "FLUSH_MANUAL",
    "INCLUSIVE_BOUND",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "LEADER_ONLY",
    "READ_AT_SNAPSHOT",
    "READ_LATEST",
    "READ_YOUR_WRITES",
    "STRING",
    "UNIXTIME_MICROS",
    "VARCHAR",
    "Client",
    "Column",
    "ColumnSchema",
    "ColumnSpec",
    "ColumnTypeAttributes",
    "Delete",
    "DeleteIgnore",
    "HybridTime",
    "Insert",
    "InsertIgnore",
    "KuduAlreadyPresent",
    "KuduBadStatus",
    "KuduError",
    "KuduException",
    "KuduInvalidArgument",
    "KuduNotFound",
    "KuduNotSupported",
    "KuduType",
    "KuduValue",
    "MissingDependencyError",
    "PartialRow",
    "Partitioning",
    "Predicate",
    "RangePartition",
    "RowBatch",
    "RowError",
    "ScanToken",
    "ScanTokenBuilder",
    "Scanner",
    "Schema",
    "SchemaBuilder",
    "Session",
    "Table",
    "TableAlterer",
    "TableStatistics",
    "TimeDelta",
    "Update",
    "UpdateIgnore",
    "Upsert",
    "UpsertIgnore",
    "WriteOp",
    "WriteOperation",
    "WriteResult",
    "binary",
    "bool",
    "bool_",
    "connect",
    "date",
    "decimal",
    "double",
    "double_",
    "float",
    "float_",
    "int8",
    "int16",
    "int32",
    "int64",
    "schema_builder",
    "string",
    "string_",
    "timedelta",
    "timestamp",
    "unixtime_micros",
    "varchar",
]
