"""Column types: Kudu's type system and its exact mapping to and from Arrow.

| kudusql     | Arrow                      | note                                   |
|-------------|----------------------------|----------------------------------------|
| BOOL        | bool                       |                                        |
| INT8..INT64 | int8..int64                |                                        |
| FLOAT       | float32                    |                                        |
| DOUBLE      | float64                    |                                        |
| DECIMAL(p,s)| decimal128(p, s)           | 1 <= p <= 38, 0 <= s <= p              |
| STRING      | string                     |                                        |
| BINARY      | binary                     |                                        |
| VARCHAR(n)  | string (+ field metadata)  | 1 <= n <= 65535 characters             |
| DATE        | date32                     | days since the epoch                   |
| TIMESTAMP   | timestamp[us]              | Kudu's UNIXTIME_MICROS, UTC, no zone   |
"""

from __future__ import annotations

import datetime
import decimal
import enum
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kudusql.common.errors import ProgrammingError

# DO NOT CHANGE: on-disk (type names are stored in schemas in metadata files).
VARCHAR_METADATA_KEY = b"kudusql.varchar_length"
MAX_CELL_BYTES = 64 * 1024
MAX_DECIMAL_PRECISION = 38
MAX_VARCHAR_LENGTH = 65535


class TypeKind(enum.Enum):
    BOOL = "BOOL"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FLOAT = "FLOAT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    STRING = "STRING"
    BINARY = "BINARY"
    VARCHAR = "VARCHAR"
    DATE = "DATE"
    TIMESTAMP = "TIMESTAMP"


_INT_KINDS = {TypeKind.INT8: 1, TypeKind.INT16: 2, TypeKind.INT32: 4, TypeKind.INT64: 8}
_VARLEN_KINDS = {TypeKind.STRING, TypeKind.BINARY, TypeKind.VARCHAR}
_SIMPLE_ARROW: dict[TypeKind, pa.DataType] = {
    TypeKind.BOOL: pa.bool_(),
    TypeKind.INT8: pa.int8(),
    TypeKind.INT16: pa.int16(),
    TypeKind.INT32: pa.int32(),
    TypeKind.INT64: pa.int64(),
    TypeKind.FLOAT: pa.float32(),
    TypeKind.DOUBLE: pa.float64(),
    TypeKind.STRING: pa.string(),
    TypeKind.BINARY: pa.binary(),
    TypeKind.VARCHAR: pa.string(),
    TypeKind.DATE: pa.date32(),
    TypeKind.TIMESTAMP: pa.timestamp("us"),
}
_ALIASES = {
    "BOOLEAN": "BOOL",
    "TINYINT": "INT8",
    "SMALLINT": "INT16",
    "INT": "INT32",
    "INTEGER": "INT32",
    "BIGINT": "INT64",
    "REAL": "FLOAT",
    "FLOAT4": "FLOAT",
    "FLOAT8": "DOUBLE",
    "UNIXTIME_MICROS": "TIMESTAMP",
    "TEXT": "STRING",
}
_TYPE_RE = re.compile(r"^\s*([A-Za-z_0-9]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")


@dataclass(frozen=True)
class DataType:
    """A column type; ``precision``/``scale`` for DECIMAL, ``length`` for VARCHAR."""

    kind: TypeKind
    precision: int | None = None
    scale: int | None = None
    length: int | None = None

    def __post_init__(self) -> None:
        if self.kind is TypeKind.DECIMAL:
            p, s = self.precision, self.scale
            if p is None or s is None or not (1 <= p <= MAX_DECIMAL_PRECISION) or not (0 <= s <= p):
                raise ProgrammingError(
                    f"DECIMAL precision must be 1..38 and scale 0..precision, got ({p}, {s})"
                )
        elif self.kind is TypeKind.VARCHAR and (
            self.length is None or not (1 <= self.length <= MAX_VARCHAR_LENGTH)
        ):
            raise ProgrammingError(f"VARCHAR length must be 1..65535, got {self.length}")

    # -- naming -------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> DataType:
        """Parse ``INT64``, ``BIGINT``, ``DECIMAL(10,2)``, ``VARCHAR(20)`` and friends."""
        m = _TYPE_RE.match(text)
        if not m:
            raise ProgrammingError(f"unknown type {text!r}")
        name = m.group(1).upper()
        name = _ALIASES.get(name, name)
        try:
            kind = TypeKind(name)
        except ValueError:
            raise ProgrammingError(f"unknown type {text!r}") from None
        a = int(m.group(2)) if m.group(2) else None
        b = int(m.group(3)) if m.group(3) else None
        if kind is TypeKind.DECIMAL:
            return cls(kind, precision=a if a is not None else 18, scale=b if b is not None else 0)
        if kind is TypeKind.VARCHAR:
            return cls(kind, length=a)
        if a is not None:
            raise ProgrammingError(f"type {name} takes no parameters: {text!r}")
        return cls(kind)

    def __str__(self) -> str:
        if self.kind is TypeKind.DECIMAL:
            return f"DECIMAL({self.precision},{self.scale})"
        if self.kind is TypeKind.VARCHAR:
            return f"VARCHAR({self.length})"
        return str(self.kind.value)

    # -- properties ---------------------------------------------------------------------
    @property
    def is_integer(self) -> bool:
        return self.kind in _INT_KINDS

    @property
    def is_varlen(self) -> bool:
        return self.kind in _VARLEN_KINDS

    @property
    def key_allowed(self) -> bool:
        """Kudu forbids BOOL, FLOAT and DOUBLE in primary keys."""
        return self.kind not in (TypeKind.BOOL, TypeKind.FLOAT, TypeKind.DOUBLE)

    @property
    def key_width(self) -> int | None:
        """Bytes of the key encoding for fixed-width types, None for strings."""
        if self.kind in _INT_KINDS:
            return _INT_KINDS[self.kind]
        if self.kind is TypeKind.DATE:
            return 4
        if self.kind is TypeKind.TIMESTAMP:
            return 8
        if self.kind is TypeKind.DECIMAL:
            return 16
        return None

    # -- Arrow ----------------------------------------------------------------------------
    def arrow_type(self) -> pa.DataType:
        if self.kind is TypeKind.DECIMAL:
            assert self.precision is not None and self.scale is not None
            return pa.decimal128(self.precision, self.scale)
        return _SIMPLE_ARROW[self.kind]

    def arrow_field(self, name: str, nullable: bool = True) -> pa.Field[Any]:
        meta = None
        if self.kind is TypeKind.VARCHAR:
            meta = {VARCHAR_METADATA_KEY: str(self.length).encode()}
        return pa.field(name, self.arrow_type(), nullable=nullable, metadata=meta)

    @classmethod
    def from_arrow(cls, t: pa.DataType, metadata: dict[bytes, bytes] | None = None) -> DataType:
        """The kudusql type of an Arrow type; raises ProgrammingError for types Kudu lacks."""
        if metadata and VARCHAR_METADATA_KEY in metadata:
            return cls(TypeKind.VARCHAR, length=int(metadata[VARCHAR_METADATA_KEY]))
        if pa.types.is_decimal(t):
            if t.precision > MAX_DECIMAL_PRECISION:
                raise ProgrammingError(f"DECIMAL precision {t.precision} exceeds 38")
            return cls(TypeKind.DECIMAL, precision=t.precision, scale=t.scale)
        if pa.types.is_timestamp(t):
            return cls(TypeKind.TIMESTAMP)
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return cls(TypeKind.STRING)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            return cls(TypeKind.BINARY)
        if pa.types.is_date(t):
            return cls(TypeKind.DATE)
        for kind, at in _SIMPLE_ARROW.items():
            if kind is not TypeKind.VARCHAR and at == t:
                return cls(kind)
        if pa.types.is_dictionary(t):
            return cls.from_arrow(t.value_type)
        raise ProgrammingError(f"Arrow type {t} has no kudusql equivalent")

    def python_value(self, v: object) -> object:
        """Check and convert a Python value to this type (used for defaults, bounds and
        predicate literals)."""
        # Plain ints and strings skip Arrow: building a one-value array probes for pandas
        # (a failed import when it is absent) and costs ~300 µs per call.
        bounds = _INT_BOUNDS.get(self.kind)
        if bounds is not None and type(v) is int:
            if not bounds[0] <= v <= bounds[1]:
                raise ProgrammingError(f"value {v!r} is not a valid {self}")
            return v
        if self.kind is TypeKind.STRING and type(v) is str and len(v) * 4 <= MAX_CELL_BYTES:
            return v
        if self.kind is TypeKind.DECIMAL and isinstance(v, int) and not isinstance(v, bool):
            v = decimal.Decimal(v)  # Arrow does not cast an int64 array to a decimal
        arr, bad = cast_array(pa.array([v]), self)
        if bad is not None and bad[0]:
            raise ProgrammingError(f"value {v!r} is not a valid {self}")
        return arr[0].as_py()


def display_value(v: object) -> str:
    """A value as a row error shows it: SQL's text of it (strings quoted, NULL, numbers
    as written), so a value shows the same whether it came as a Python float, a
    ``Decimal`` or a SQL literal."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):  # as kudusql SQL writes it: a backslash escapes (Impala's rule)
        return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"
    if isinstance(v, bytes):
        return "X'" + v.hex() + "'"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    return str(v)


_INT_BOUNDS = {
    TypeKind.INT8: (-(2**7), 2**7 - 1),
    TypeKind.INT16: (-(2**15), 2**15 - 1),
    TypeKind.INT32: (-(2**31), 2**31 - 1),
    TypeKind.INT64: (-(2**63), 2**63 - 1),
}

# Built once: converting a Python int to an Arrow scalar probes for pandas on every call.
_MAX_CELL_SCALAR = pa.scalar(MAX_CELL_BYTES, pa.int32())


def cast_array(
    arr: pa.Array[Any] | pa.ChunkedArray[Any], dtype: DataType
) -> tuple[pa.Array[Any], np.ndarray | None]:
    """Cast ``arr`` to ``dtype``'s Arrow type.

    Returns the cast array and a boolean mask of the rows whose value could not be
    represented (wrong type, overflow, too large); those rows are NULL in the result.
    The mask is None when every row cast cleanly, the common, vectorized case.
    """
    out: pa.Array[Any] = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    target = dtype.arrow_type()
    bad: np.ndarray | None = None
    if out.type != target:
        src = out.type
        if pa.types.is_decimal(target) and pa.types.is_floating(src):
            # Round half away from zero to the scale first, as SQL (DuckDB) does; a plain
            # cast takes the binary value (0.045 is 0.04499..., giving 0.04).
            out = pc.round(out, target.scale, round_mode="half_towards_infinity")
        elif pa.types.is_decimal(target) and pa.types.is_integer(src):
            # Arrow sizes an integer-to-decimal cast for the widest value of the source
            # type (19 digits plus the scale); 38 digits hold every int64, and the step
            # to the column's precision then fails only the values that overflow it.
            out = _cast_or_rowwise(out, pa.decimal128(MAX_DECIMAL_PRECISION, 0))[0]
        elif pa.types.is_floating(target) and pa.types.is_decimal(src):
            # Arrow multiplies by a power of ten in floating point (0.3 -> 0.30000000000000004);
            # the decimal text parses to the nearest double, as a SQL literal does.
            out = pc.cast(out, pa.string())
        if target == pa.float32() and not pa.types.is_integer(out.type):
            out, bad = _to_float32(out)
        else:
            out, bad = _cast_or_rowwise(out, target)
        if pa.types.is_date(target) and pa.types.is_timestamp(src):
            lost = _time_of_day_lost(arr, out)
            if lost.any():
                bad = _merge_bad(bad, lost)
                out = pc.if_else(pa.array(lost), pa.scalar(None, target), out)
    if dtype.kind is TypeKind.VARCHAR:
        assert dtype.length is not None
        # Kudu truncates VARCHAR values longer than the declared length.
        out = pc.utf8_slice_codeunits(out, 0, dtype.length)
    if dtype.is_varlen and len(out):
        # The stubs only accept the concrete binary/string array classes.
        lengths: pa.Array[Any] = pc.binary_length(out)  # type: ignore[call-overload]
        too_big = pc.greater(lengths, _MAX_CELL_SCALAR)
        if pc.any(too_big).as_py():
            mask = too_big.to_numpy(zero_copy_only=False).astype(bool)
            mask &= ~np.asarray(pc.is_null(lengths))
            bad = mask if bad is None else (bad | mask)
            out = pc.if_else(too_big, pa.scalar(None, target), out)
    return out, bad


def _cast_or_rowwise(
    arr: pa.Array[Any], target: pa.DataType
) -> tuple[pa.Array[Any], np.ndarray | None]:
    """A safe cast; when some value does not convert, the rows that fail are found one
    by one (the error path) and come back NULL with their mask."""
    try:
        return pc.cast(arr, target, safe=True), None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _cast_rowwise(arr, target)


def _to_float32(arr: pa.Array[Any]) -> tuple[pa.Array[Any], np.ndarray | None]:
    """A FLOAT column's values: through DOUBLE (the nearest double, then the nearest
    float), and a finite value beyond FLOAT's range is a bad value, not infinity."""
    wide, bad = _cast_or_rowwise(arr, pa.float64())
    out = pc.cast(wide, pa.float32())
    overflow = pc.and_(pc.is_inf(out), pc.invert(pc.is_inf(wide)))
    if pc.any(overflow).as_py():
        mask = np.asarray(overflow.to_numpy(zero_copy_only=False), dtype=bool)
        bad = _merge_bad(bad, mask)
        out = pc.if_else(overflow, pa.scalar(None, pa.float32()), out)
    return out, bad


def _time_of_day_lost(src: pa.Array[Any] | pa.ChunkedArray[Any], out: pa.Array[Any]) -> np.ndarray:
    """Rows of a TIMESTAMP -> DATE cast whose time of day was not midnight (the date
    alone would lose it), in the local time the cast used."""
    ts: Any = src.combine_chunks() if isinstance(src, pa.ChunkedArray) else src
    if ts.type.tz is not None:
        ts = pc.local_timestamp(ts)
    per_day = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}
    ticks = np.asarray(ts.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False))
    valid = np.asarray(out.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    lost: np.ndarray = (ticks % per_day[ts.type.unit] != 0) & valid
    return lost


def _merge_bad(bad: np.ndarray | None, mask: np.ndarray) -> np.ndarray | None:
    if not mask.any():
        return bad
    return mask if bad is None else (bad | mask)


def _cast_rowwise(arr: pa.Array[Any], target: pa.DataType) -> tuple[pa.Array[Any], np.ndarray]:
    """Error path only: find which rows fail to cast, one by one."""
    out: list[object] = []
    bad = np.zeros(len(arr), dtype=bool)
    for i, v in enumerate(arr):
        if not v.is_valid:
            out.append(None)
            continue
        try:
            # Slice, not as_py(): some values have no Python form (nanoseconds).
            out.append(pc.cast(arr.slice(i, 1), target, safe=True)[0].as_py())
        except (
            pa.ArrowInvalid,
            pa.ArrowNotImplementedError,
            pa.ArrowTypeError,
            TypeError,
            ValueError,
        ):
            out.append(None)
            bad[i] = True
    return pa.array(out, type=target), bad
