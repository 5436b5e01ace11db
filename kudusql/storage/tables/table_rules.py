"""What a table may be: the checks of CREATE and ALTER and the catalog entry they make.

The embedded catalog (``database.py``) and the cluster's client (which keeps a table's
entry at the master) apply the same rules, so a table is refused, or made, alike in
both modes.
"""

from __future__ import annotations

from collections.abc import Mapping

from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import Schema
from kudusql.storage.cfile import parse_compression, parse_encoding
from kudusql.storage.tables.alter import AlterResult
from kudusql.storage.tables.catalog import TableMeta, TabletEntry
from kudusql.storage.tables.partition import PartitionSchema, create_partitions

#: The table property of a replication factor (Impala's spelling for Kudu tables).
NUM_REPLICAS_PROPERTY = "kudu.num_tablet_replicas"

#: Most tablets one table may have (a typo in a bucket count should not make 10^6).
MAX_TABLETS_PER_TABLE = 4096


def check_storage_attributes(schema: Schema) -> None:
    """Unknown encodings or compressions fail the DDL, not a later flush."""
    for c in schema.columns:
        parse_encoding(c.encoding)
        parse_compression(c.compression)
        if c.block_size is not None and c.block_size <= 0:
            raise ProgrammingError(f"column {c.name!r}: BLOCK_SIZE must be positive")


def num_replicas_property(properties: Mapping[str, str] | None) -> int | None:
    """The replication factor a CREATE TABLE asks for (``'kudu.num_tablet_replicas'``),
    or None when it asks for none. A positive odd integer (Kudu refuses an even one: a
    majority of 2 or 4 tolerates no more failures than 1 or 3)."""
    text = (properties or {}).get(NUM_REPLICAS_PROPERTY)
    if text is None:
        return None
    try:
        n = int(str(text).strip())
    except ValueError:
        raise ProgrammingError(
            f"table property {NUM_REPLICAS_PROPERTY!r} = {text!r} is not an integer"
        ) from None
    if n < 1:
        raise ProgrammingError(
            f"table property {NUM_REPLICAS_PROPERTY!r} = {n}: a table needs at least 1 replica"
        )
    if n % 2 == 0:
        raise ProgrammingError(
            f"table property {NUM_REPLICAS_PROPERTY!r} = {n}: the number of replicas must be"
            f" odd (an even number tolerates no more failed replicas than {n - 1})"
        )
    return n


def new_table_meta(
    table_id: int,
    name: str,
    schema: Schema,
    partition_schema: PartitionSchema,
    first_tablet_id: int,
    *,
    properties: Mapping[str, str] | None,
    owner: str,
    comment: str,
    created_micros: int,
) -> TableMeta:
    """A new table's catalog entry, one tablet per partition (ids from
    ``first_tablet_id``), after every CREATE TABLE check."""
    if not name:
        raise ProgrammingError("a table needs a name")
    partition_schema.validate(schema)
    check_storage_attributes(schema)
    num_replicas_property(properties)
    parts = create_partitions(partition_schema, schema)
    if len(parts) > MAX_TABLETS_PER_TABLE:
        raise ProgrammingError(
            f"table {name!r} would have {len(parts)} tablets; at most "
            f"{MAX_TABLETS_PER_TABLE} (fewer buckets or range partitions)"
        )
    return TableMeta(
        table_id,
        name,
        schema,
        partition_schema,
        tuple(TabletEntry.of(first_tablet_id + i, p) for i, p in enumerate(parts)),
        properties=dict(properties or {}),
        created_micros=created_micros,
        owner=owner,
        comment=comment,
    )


def check_altered(old_name: str, result: AlterResult) -> None:
    """The checks an ALTER TABLE's result passes before anything changes."""
    check_storage_attributes(result.meta.schema)
    if len(result.meta.tablets) > MAX_TABLETS_PER_TABLE:
        raise ProgrammingError(
            f"table {old_name!r} would have {len(result.meta.tablets)} tablets; at most "
            f"{MAX_TABLETS_PER_TABLE}"
        )
