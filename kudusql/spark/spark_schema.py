"""Types between kudusql and Spark: the schema Spark sees, the Arrow batches it accepts,
and the check that a DataFrame fits a table.

A table's columns become a Spark ``StructType`` (TIMESTAMP, Kudu's UNIXTIME_MICROS in
UTC, becomes Spark's ``timestamp``; VARCHAR(n) becomes ``string``), and every batch a
read task yields is cast to exactly the Arrow schema Spark derives from it (Spark
rejects anything else: ``large_string``, a timestamp without the UTC zone, different
nullability). A DataFrame written to a table must name existing columns, and each
column's Spark type must be of the same family as the table column's (integers,
floating point, decimals, strings, binary, boolean, date, timestamp); values out of a
narrower column's range then fail row by row in storage, like any other bad value.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import types as st
from pyspark.sql.pandas.types import to_arrow_schema

from kudusql.common.errors import ProgrammingError
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType, TypeKind

_SPARK_OF: dict[TypeKind, st.DataType] = {
    TypeKind.BOOL: st.BooleanType(),
    TypeKind.INT8: st.ByteType(),
    TypeKind.INT16: st.ShortType(),
    TypeKind.INT32: st.IntegerType(),
    TypeKind.INT64: st.LongType(),
    TypeKind.FLOAT: st.FloatType(),
    TypeKind.DOUBLE: st.DoubleType(),
    TypeKind.STRING: st.StringType(),
    TypeKind.VARCHAR: st.StringType(),
    TypeKind.BINARY: st.BinaryType(),
    TypeKind.DATE: st.DateType(),
    TypeKind.TIMESTAMP: st.TimestampType(),
}

_FAMILY = {
    TypeKind.BOOL: "boolean",
    TypeKind.INT8: "integer",
    TypeKind.INT16: "integer",
    TypeKind.INT32: "integer",
    TypeKind.INT64: "integer",
    TypeKind.FLOAT: "floating point",
    TypeKind.DOUBLE: "floating point",
    TypeKind.DECIMAL: "decimal",
    TypeKind.STRING: "string",
    TypeKind.VARCHAR: "string",
    TypeKind.BINARY: "binary",
    TypeKind.DATE: "date",
    TypeKind.TIMESTAMP: "timestamp",
}


def spark_type(t: DataType) -> st.DataType:
    if t.kind is TypeKind.DECIMAL:
        assert t.precision is not None and t.scale is not None
        return st.DecimalType(t.precision, t.scale)
    return _SPARK_OF[t.kind]


def kudusql_type(t: st.DataType, column: str) -> DataType:
    """The natural kudusql type of a Spark type (for CREATE TABLE from a DataFrame)."""
    if isinstance(t, st.DecimalType):
        return DataType(TypeKind.DECIMAL, precision=t.precision, scale=t.scale)
    if isinstance(t, st.VarcharType):
        return DataType(TypeKind.VARCHAR, length=t.length)
    if isinstance(t, (st.StringType, st.CharType)):
        return DataType(TypeKind.STRING)
    if isinstance(t, (st.TimestampType, st.TimestampNTZType)):
        return DataType(TypeKind.TIMESTAMP)
    for kind, s in _SPARK_OF.items():
        if kind not in (TypeKind.VARCHAR,) and type(s) is type(t):
            return DataType(kind)
    raise ProgrammingError(
        f"column {column!r}: Spark type {t.simpleString()} has no kudusql equivalent"
    )


def _spark_family(t: st.DataType) -> str | None:
    if isinstance(t, st.BooleanType):
        return "boolean"
    if isinstance(t, (st.ByteType, st.ShortType, st.IntegerType, st.LongType)):
        return "integer"
    if isinstance(t, (st.FloatType, st.DoubleType)):
        return "floating point"
    if isinstance(t, st.DecimalType):
        return "decimal"
    if isinstance(t, (st.StringType, st.VarcharType, st.CharType)):
        return "string"
    if isinstance(t, st.BinaryType):
        return "binary"
    if isinstance(t, st.DateType):
        return "date"
    if isinstance(t, (st.TimestampType, st.TimestampNTZType)):
        return "timestamp"
    return None


def find_column(table: Schema, name: str) -> str | None:
    """The table column named ``name``: exactly, else ignoring case (as Spark does)."""
    if name in table.names:
        return name
    hits = [n for n in table.names if n.lower() == name.lower()]
    return hits[0] if len(hits) == 1 else None


def spark_schema(schema: Schema, columns: list[str] | None = None) -> st.StructType:
    """The Spark schema of ``columns`` (default: all) of a table."""
    names = schema.names if columns is None else columns
    fields = []
    for n in names:
        c = schema.column(n)
        fields.append(st.StructField(c.name, spark_type(c.type), nullable=c.nullable))
    return st.StructType(fields)


def pruned_schema(table: Schema, name: str, columns: list[str]) -> st.StructType:
    """The Spark schema of ``columns`` of table ``name`` (matched ignoring case), with the
    table's types and nullability: the schema to give a read of a subset of the columns.

    Python data sources get no column pruning from Spark, so a read of fewer columns
    needs a user-given schema; one built from the table keeps NOT NULL columns
    non-nullable, which spares Spark a null check per value when it turns the Arrow
    batches into rows (a schema string such as ``"id bigint"`` makes every column
    nullable)."""
    return spark_schema(table, [_column_of(table, name, c, "").name for c in columns])


def arrow_schema_for(schema: st.StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects of batches for ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")


def _column_of(table: Schema, name: str, column: str, where: str) -> ColumnSchema:
    found = find_column(table, column)
    if found is None:
        raise ProgrammingError(
            f"column {column!r}{where} is not in table {name!r} (columns: {', '.join(table.names)})"
        )
    return table.column(found)


def read_columns(table: Schema, name: str, requested: st.StructType) -> list[str]:
    """The table columns a read with the user-given schema ``requested`` projects to,
    checking each exists and has the table's Spark type, and that a column the table
    allows NULLs in is not declared non-nullable (Spark would read its NULLs as values)."""
    out = []
    for f in requested.fields:
        c = _column_of(table, name, f.name, "")
        want = spark_type(c.type)
        if f.dataType != want:
            raise ProgrammingError(
                f"schema mismatch for column {c.name!r} of table {name!r}: the table has "
                f"{c.type} (Spark {want.simpleString()}), the given schema says "
                f"{f.dataType.simpleString()}"
            )
        if c.nullable and not f.nullable:
            raise ProgrammingError(
                f"schema mismatch for column {c.name!r} of table {name!r}: the column "
                "allows NULL, the given schema says NOT NULL"
            )
        out.append(c.name)
    return out


def check_write_schema(table: Schema, name: str, df: st.StructType, operation: str) -> list[str]:
    """The table column for each DataFrame field, in field order; raises a
    ProgrammingError naming the first column that does not fit."""
    out = []
    for f in df.fields:
        c = _column_of(table, name, f.name, " of the DataFrame")
        fam = _spark_family(f.dataType)
        if fam != _FAMILY[c.type.kind]:
            raise ProgrammingError(
                f"schema mismatch for column {c.name!r}: table {name!r} has {c.type}, "
                f"the DataFrame has {f.dataType.simpleString()}"
            )
        out.append(c.name)
    inserting = operation in ("insert", "insert_ignore")
    missing = [
        c.name
        for c in table.key_columns
        if c.name not in out and not (inserting and c.auto_incrementing)
    ]
    if missing:
        raise ProgrammingError(
            f"the DataFrame lacks primary key column(s) {', '.join(missing)} of table "
            f"{name!r}, which every {operation} needs"
        )
    return out


def to_storage(batch: pa.RecordBatch, table: Schema | None, columns: list[str]) -> pa.RecordBatch:
    """A Spark Arrow batch renamed to the table's column names, with timestamps made
    zone-less (they are UTC on both sides) and dictionary columns decoded; everything
    else stays as Spark sent it and storage casts and checks each value."""
    arrays: list[Any] = []
    for i, _ in enumerate(columns):
        a = batch.column(i)
        if pa.types.is_timestamp(a.type) and a.type.tz is not None:
            a = a.cast(pa.timestamp(a.type.unit))
        elif pa.types.is_dictionary(a.type):
            a = a.cast(a.type.value_type)
        arrays.append(a)
    return pa.RecordBatch.from_arrays(arrays, names=columns)
