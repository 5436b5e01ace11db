"""The Python client API, modelled on Apache Kudu's Python client (``import kudu``).

This package owns the user-facing, Kudu-style object API over the tables layer
(``kudusql.storage.tables``): connecting (``connect``, ``Client``), schemas
(``schema_builder``, type constants, ``Schema``), partitioning (``Partitioning``),
DDL (``create_table``, ``delete_table``, ``new_table_alterer``), row operations and
write sessions (``table.new_insert`` ..., ``Session`` with manual, sync and background
flush modes and pending errors), column predicates (``table['a'] > 1``), scanners
(tuples, Arrow, pandas, snapshots and time travel), scan tokens, and Arrow bulk writes
(``table.insert_arrow``, ``Session.apply_arrow``). It holds no storage logic: sessions
turn buffered operations into Arrow batches for ``Table.write``, scanners wrap
``Table.scan``. It never imports the SQL layers.

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

Differences from Kudu are noted where they occur (``Partitioning`` without range
columns, ``background`` sessions flushing inside ``apply``, snapshot conventions in
``timestamps``); every error raised is a ``kudusql.common.errors`` class.
"""

from kudusql.client.alter import TableAlterer
from kudusql.client.client import Client, connect
from kudusql.client.partitioning import EXCLUSIVE_BOUND, INCLUSIVE_BOUND, Partitioning
from kudusql.client.predicate import Column, Predicate
from kudusql.client.scanner import (
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
    COMPRESSION_DEFAULT,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    ENCODING_AUTO,
    ENCODING_BIT_SHUFFLE,
    ENCODING_DICT,
    ENCODING_PLAIN,
    ENCODING_RLE,
    ColumnSchema,
    ColumnSpec,
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
from kudusql.common.row_operations import RowError, WriteOp, WriteResult

timestamp = unixtime_micros

__all__ = [
    "COMPRESSION_DEFAULT",
    "COMPRESSION_LZ4",
    "COMPRESSION_NONE",
    "COMPRESSION_ZSTD",
    "ENCODING_AUTO",
    "ENCODING_BIT_SHUFFLE",
    "ENCODING_DICT",
    "ENCODING_PLAIN",
    "ENCODING_RLE",
    "EXCLUSIVE_BOUND",
    "FLUSH_AUTO_BACKGROUND",
    "FLUSH_AUTO_SYNC",
    "FLUSH_MANUAL",
    "INCLUSIVE_BOUND",
    "READ_AT_SNAPSHOT",
    "READ_LATEST",
    "READ_YOUR_WRITES",
    "Client",
    "Column",
    "ColumnSchema",
    "ColumnSpec",
    "Delete",
    "DeleteIgnore",
    "HybridTime",
    "Insert",
    "InsertIgnore",
    "KuduError",
    "KuduType",
    "MissingDependencyError",
    "Partitioning",
    "Predicate",
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
    "float",
    "float_",
    "int8",
    "int16",
    "int32",
    "int64",
    "schema_builder",
    "string",
    "timestamp",
    "unixtime_micros",
    "varchar",
]
