"""The SQLAlchemy types of Kudu's column types, both ways.

This module owns the mapping of a kudusql column type (``kudusql.common.types.DataType``,
as SHOW CREATE TABLE declares it) to the SQLAlchemy type reflection reports, and the
two types SQLAlchemy has no generic name for: ``TINYINT`` (Kudu's INT8) and ``STRING``
(a string of any length; ``VARCHAR(n)`` is the bounded one). The other direction,
SQLAlchemy types to Kudu DDL, is the type compiler in ``compiler.py``.

=============  =========================================
Kudu           SQLAlchemy
=============  =========================================
BOOL           ``BOOLEAN``
INT8           ``TINYINT`` (a ``SmallInteger``)
INT16          ``SMALLINT``
INT32          ``INTEGER``
INT64          ``BIGINT``
FLOAT          ``REAL`` (a 32-bit ``Float``)
DOUBLE         ``DOUBLE``
DECIMAL(p,s)   ``DECIMAL(p, s)``
STRING         ``STRING`` (a ``String`` without length)
VARCHAR(n)     ``VARCHAR(n)``
BINARY         ``BINARY`` (a ``LargeBinary``)
DATE           ``DATE``
TIMESTAMP      ``TIMESTAMP`` (UTC, naive)
=============  =========================================
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import types as sqltypes

from kudusql.common.types import DataType, TypeKind


class TINYINT(sqltypes.SmallInteger):
    """Kudu's one-byte integer (INT8, SQL ``TINYINT``)."""

    __visit_name__ = "TINYINT"


class STRING(sqltypes.String):
    """Kudu's STRING: text of any length (``String()`` without a length compiles to it
    too)."""

    __visit_name__ = "STRING"


class BINARY(sqltypes.LargeBinary):
    """Kudu's BINARY: bytes of any length."""

    __visit_name__ = "BINARY"


def sqlalchemy_type(t: DataType) -> sqltypes.TypeEngine[Any]:
    """The SQLAlchemy type reflection gives a column of kudusql type ``t``."""
    k = t.kind
    if k is TypeKind.DECIMAL:
        return sqltypes.DECIMAL(precision=t.precision, scale=t.scale)
    if k is TypeKind.VARCHAR:
        return sqltypes.VARCHAR(length=t.length)
    simple: dict[TypeKind, type[sqltypes.TypeEngine[Any]]] = {
        TypeKind.BOOL: sqltypes.BOOLEAN,
        TypeKind.INT8: TINYINT,
        TypeKind.INT16: sqltypes.SMALLINT,
        TypeKind.INT32: sqltypes.INTEGER,
        TypeKind.INT64: sqltypes.BIGINT,
        TypeKind.FLOAT: sqltypes.REAL,
        TypeKind.DOUBLE: sqltypes.DOUBLE,
        TypeKind.STRING: STRING,
        TypeKind.BINARY: BINARY,
        TypeKind.DATE: sqltypes.DATE,
        TypeKind.TIMESTAMP: sqltypes.TIMESTAMP,
    }
    return simple[k]()
