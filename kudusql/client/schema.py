"""Schemas the Kudu Python client way: ``schema_builder()``, column specs, the type
constants (``int64``, ``string``, ``unixtime_micros``, ...) and read-only views of a
table's schema (``Schema``, ``ColumnSchema``).

Everything here wraps ``kudusql.common.schema``; ``Schema.core`` and
``ColumnSchema.core`` give the storage objects back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa

from kudusql.client.row import KuduValue, PartialRow
from kudusql.common.errors import (
    KuduIndexError,
    KuduInvalidArgument,
    KuduKeyError,
    KuduNotSupported,
    KuduValueError,
    NotSupportedError,
    ProgrammingError,
)
from kudusql.common.schema import AUTO_INCREMENTING_COLUMN
from kudusql.common.schema import ColumnSchema as CoreColumn
from kudusql.common.schema import Schema as CoreSchema
from kudusql.common.types import DataType, TypeKind

__all__ = [
    "BINARY",
    "BOOL",
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
    "FLOAT",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "STRING",
    "UNIXTIME_MICROS",
    "VARCHAR",
    "ColumnSchema",
    "ColumnSpec",
    "ColumnTypeAttributes",
    "KuduType",
    "Schema",
    "SchemaBuilder",
    "TypeLike",
    "binary",
    "bool_",
    "date",
    "decimal",
    "double",
    "float_",
    "int8",
    "int16",
    "int32",
    "int64",
    "resolve_type",
    "schema_builder",
    "string",
    "unixtime_micros",
    "varchar",
]


class KuduType:
    """A column type by Kudu's name (``kudu.int64.name == 'int64'``); ``type`` is its
    type code (``kudu.schema.INT64``). DECIMAL and VARCHAR take their precision/scale or
    length from the column spec."""

    __slots__ = ("kind", "name")

    def __init__(self, name: str, kind: TypeKind) -> None:
        self.name = name
        self.kind = kind

    @property
    def type(self) -> TypeKind:
        """The type code, one of ``INT8`` ... ``DATE`` of this module."""
        return self.kind

    def new_value(self, value: Any) -> KuduValue:
        """``value`` as a ``KuduValue`` of this type."""
        return KuduValue(self, value)

    def __repr__(self) -> str:
        return f"KuduType({self.name})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KuduType):
            return self.kind is other.kind
        if isinstance(other, str):
            return other.lower() == self.name
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.kind)


int8 = KuduType("int8", TypeKind.INT8)
int16 = KuduType("int16", TypeKind.INT16)
int32 = KuduType("int32", TypeKind.INT32)
int64 = KuduType("int64", TypeKind.INT64)
string = KuduType("string", TypeKind.STRING)
bool_ = KuduType("bool", TypeKind.BOOL)
float_ = KuduType("float", TypeKind.FLOAT)
double = KuduType("double", TypeKind.DOUBLE)
binary = KuduType("binary", TypeKind.BINARY)
unixtime_micros = KuduType("unixtime_micros", TypeKind.TIMESTAMP)
decimal = KuduType("decimal", TypeKind.DECIMAL)
varchar = KuduType("varchar", TypeKind.VARCHAR)
date = KuduType("date", TypeKind.DATE)

#: Type codes (``KuduType.type``), by Kudu's names.
INT8 = TypeKind.INT8
INT16 = TypeKind.INT16
INT32 = TypeKind.INT32
INT64 = TypeKind.INT64
STRING = TypeKind.STRING
BOOL = TypeKind.BOOL
FLOAT = TypeKind.FLOAT
DOUBLE = TypeKind.DOUBLE
BINARY = TypeKind.BINARY
UNIXTIME_MICROS = TypeKind.TIMESTAMP
DECIMAL = TypeKind.DECIMAL
VARCHAR = TypeKind.VARCHAR
DATE = TypeKind.DATE

_BY_KIND = {
    t.kind: t
    for t in (
        int8,
        int16,
        int32,
        int64,
        string,
        bool_,
        float_,
        double,
        binary,
        unixtime_micros,
        decimal,
        varchar,
        date,
    )
}
_BY_NAME = {t.name: t for t in _BY_KIND.values()}
_BY_NAME.update({"timestamp": unixtime_micros, "boolean": bool_, "str": string})

TypeLike = KuduType | DataType | str | pa.DataType


def kudu_type(t: DataType) -> KuduType:
    return _BY_KIND[t.kind]


def resolve_type(
    t: TypeLike,
    precision: int | None = None,
    scale: int | None = None,
    length: int | None = None,
    *,
    column: str = "",
) -> DataType:
    """The storage type of a Kudu type (constant, name, ``DataType`` or Arrow type) with
    the column's type attributes."""
    where = f" of column {column!r}" if column else ""
    if isinstance(t, DataType):
        base = t
        kind = t.kind
    elif isinstance(t, pa.DataType):
        base = DataType.from_arrow(t)
        kind = base.kind
    elif isinstance(t, KuduType):
        base = None
        kind = t.kind
    elif isinstance(t, str):
        known = _BY_NAME.get(t.strip().lower())
        if known is not None:
            base, kind = None, known.kind
        else:
            base = DataType.parse(t)  # DECIMAL(10,2), VARCHAR(20), BIGINT, ...
            kind = base.kind
    else:
        raise KuduValueError(f"Invalid type: unknown type {t!r}{where}")
    if kind is TypeKind.DECIMAL:
        p = precision if precision is not None else (base.precision if base else None)
        s = scale if scale is not None else (base.scale if base else 0)
        if p is None:
            raise KuduInvalidArgument(
                f"no precision provided for DECIMAL column: {column} (a DECIMAL column "
                "needs a precision)"
            )
        if length is not None:
            raise KuduInvalidArgument(
                f"length is not applicable to DECIMAL column: {column} (length applies to "
                "VARCHAR only)"
            )
        return _data_type(kind, column, precision=p, scale=s or 0)
    if precision is not None or scale is not None:
        what = "precision" if precision is not None else "scale"
        raise KuduInvalidArgument(
            f"{what} is not applicable to {kind.value} column: {column} (precision and "
            "scale apply to DECIMAL only)"
        )
    if kind is TypeKind.VARCHAR:
        n = length if length is not None else (base.length if base else None)
        if n is None:
            raise KuduInvalidArgument(
                f"no length provided for VARCHAR column: {column} (a VARCHAR column needs a length)"
            )
        if not 1 <= n <= 65535:
            raise KuduInvalidArgument(f"length must be between 1 and 65535: {column}")
        return _data_type(kind, column, length=n)
    if length is not None:
        raise KuduInvalidArgument(
            f"length is not applicable to {kind.value} column: {column} (length applies to "
            "VARCHAR only)"
        )
    return base if base is not None else DataType(kind)


def _data_type(kind: TypeKind, column: str, **attrs: int) -> DataType:
    try:
        return DataType(kind, **attrs)
    except ProgrammingError as e:
        raise KuduInvalidArgument(f"{e}: {column}") from None


# -- encodings and compression ----------------------------------------------------------------
ENCODING_AUTO = "auto"
ENCODING_PLAIN = "plain"
ENCODING_DICT = "dict"
ENCODING_RLE = "rle"
ENCODING_BIT_SHUFFLE = "bit_shuffle"
ENCODING_PREFIX = "prefix"

COMPRESSION_DEFAULT = "default"
COMPRESSION_NONE = "none"
COMPRESSION_LZ4 = "lz4"
COMPRESSION_ZSTD = "zstd"
COMPRESSION_SNAPPY = "snappy"
COMPRESSION_ZLIB = "zlib"

_ENCODINGS: dict[str, str | None] = {
    "auto": None,
    "auto_encoding": None,
    "default": None,
    "plain": "plain",
    "plain_encoding": "plain",
    "dict": "dict",
    "dict_encoding": "dict",
    "dictionary": "dict",
    "rle": "rle",
    "bit_shuffle": "bit_shuffle",
    "bitshuffle": "bit_shuffle",
    "bitpack": "bitpack",
    # Kudu's encodings that kudusql's pages lack: recorded, and pages choose their own.
    "prefix": "prefix_encoding",
    "prefix_encoding": "prefix_encoding",
    "group_varint": "group_varint",
}
#: The client's names of stored encoding names that differ.
_SHOWN_ENCODINGS = {"prefix_encoding": ENCODING_PREFIX}

_COMPRESSIONS: dict[str, str | None] = {
    "default": None,
    "default_compression": None,
    "none": "none",
    "no_compression": "none",
    "lz4": "lz4",
    "zstd": "zstd",
    # Kudu's codecs that kudusql lacks: recorded, and stored with LZ4 / zstd.
    "snappy": "snappy",
    "zlib": "zlib",
}


def parse_encoding(name: str | None, column: str = "") -> str | None:
    """The stored encoding name for a Kudu encoding name (None: chosen per page)."""
    if name is None:
        return None
    key = str(name).strip().lower()
    if key not in _ENCODINGS:
        raise KuduValueError(
            f"Invalid encoding type: {name!r} of column {column!r} "
            "(expected auto, plain, prefix, dict, rle or bit_shuffle)"
        )
    return _ENCODINGS[key]


def parse_compression(name: str | None, column: str = "") -> str | None:
    """The stored compression name for a Kudu compression name (None: the default)."""
    if name is None:
        return None
    key = str(name).strip().lower()
    if key not in _COMPRESSIONS:
        raise KuduValueError(
            f"Invalid compression type: {name} (column {column!r}; expected default, "
            "none, lz4, zstd, snappy or zlib)"
        )
    return _COMPRESSIONS[key]


_UNSET: Any = object()


class ColumnSpec:
    """A column being defined (``SchemaBuilder.add_column``) or altered
    (``TableAlterer.add_column``/``alter_column``); every setter returns the spec, so
    calls chain: ``builder.add_column('v').type(kudu.int32).nullable(False).default(0)``.
    """

    def __init__(self, name: str, *, altering: bool = False) -> None:
        self.name = name
        self._altering = altering
        self._set: dict[str, Any] = {}

    def __repr__(self) -> str:
        attrs = ", ".join(f"{k}={v!r}" for k, v in self._set.items())
        return f"ColumnSpec({self.name!r}{', ' if attrs else ''}{attrs})"

    def _put(self, key: str, value: Any) -> ColumnSpec:
        self._set[key] = value
        return self

    def set(self, **settings: Any) -> ColumnSpec:
        """Call the setter of each setting given (None: not given), in the order given."""
        for name, value in settings.items():
            if value is not None:
                getattr(self, name)(value)
        return self

    def type(self, type_: TypeLike) -> ColumnSpec:
        """The column type: a constant (``kudu.int64``), a name (``'int64'``,
        ``'decimal(10,2)'``), a ``DataType`` or an Arrow type."""
        return self._put("type", type_)

    def precision(self, precision: int) -> ColumnSpec:
        return self._put("precision", precision)

    def scale(self, scale: int) -> ColumnSpec:
        return self._put("scale", scale)

    def length(self, length: int) -> ColumnSpec:
        return self._put("length", length)

    def nullable(self, nullable: bool = True) -> ColumnSpec:
        return self._put("nullable", bool(nullable))

    def primary_key(self) -> ColumnSpec:
        """Make this column the (single-column) primary key; for a compound key use
        ``SchemaBuilder.set_primary_keys``. Overrides ``non_unique_primary_key()``."""
        self._set.pop("non_unique", None)
        return self._put("primary_key", True)

    def non_unique_primary_key(self) -> ColumnSpec:
        """Make this column a non-unique primary key (Kudu 1.17's
        ``NonUniquePrimaryKey``): the tablets append the hidden ``auto_incrementing_id``
        column to the key and number the rows that share a value."""
        self._put("non_unique", True)
        return self._put("primary_key", True)

    def default(self, value: Any) -> ColumnSpec:
        return self._put("default", value)

    def clear_default(self) -> ColumnSpec:
        """Remove the default (when altering a column: drop its current default)."""
        if not self._altering:
            self._set["remove_default"] = True
        return self._put("default", None)

    remove_default = clear_default

    def compression(self, compression: str) -> ColumnSpec:
        parse_compression(compression, self.name)  # an unknown name fails here
        return self._put("compression", compression)

    def encoding(self, encoding: str) -> ColumnSpec:
        parse_encoding(encoding, self.name)  # an unknown name fails here
        return self._put("encoding", encoding)

    def block_size(self, block_size: int) -> ColumnSpec:
        if int(block_size) <= 0:
            raise ProgrammingError(f"block size of column {self.name!r} must be positive")
        return self._put("block_size", int(block_size))

    def comment(self, comment: str) -> ColumnSpec:
        return self._put("comment", str(comment))

    def immutable(self, immutable: bool = True) -> ColumnSpec:
        """An immutable column: set at INSERT, never changed by UPDATE."""
        return self._put("immutable", bool(immutable))

    def mutable(self, mutable: bool = True) -> ColumnSpec:
        """Kudu's name for the opposite of ``immutable``."""
        return self.immutable(not mutable)

    def rename(self, new_name: str) -> ColumnSpec:
        """Rename the column (``alter_column`` only: a schema being built refuses it)."""
        return self._put("rename", str(new_name))

    # -- resolution ---------------------------------------------------------------------------
    def _data_type(self) -> DataType:
        t = self._set.get("type")
        if t is None:
            raise ProgrammingError(f"no type given for column {self.name!r}")
        return resolve_type(
            t,
            self._set.get("precision"),
            self._set.get("scale"),
            self._set.get("length"),
            column=self.name,
        )

    def _check_creatable(self) -> None:
        """Raises for the settings that only alter an existing column."""
        if "rename" in self._set:
            raise KuduNotSupported(
                f"cannot rename a column during CreateTable: {self.name} (rename() applies "
                "to a column being altered)"
            )
        if self._set.get("remove_default"):
            raise KuduNotSupported(
                f"cannot remove the default of a column during CreateTable: {self.name}"
            )

    def _column(self, *, key: bool) -> CoreColumn:
        """The storage column this spec defines (``key``: it is a primary-key column)."""
        self._check_creatable()
        t = self._data_type()
        nullable = self._set.get("nullable", not key)
        if key and nullable:
            raise ProgrammingError(f"primary key column {self.name!r} cannot be nullable")
        default = self._set.get("default")
        if default is not None:
            default = _convert_default(t, default, self.name)
        return CoreColumn(
            name=self.name,
            type=t,
            nullable=nullable,
            default=default,
            encoding=parse_encoding(self._set.get("encoding"), self.name),
            compression=parse_compression(self._set.get("compression"), self.name),
            block_size=self._set.get("block_size"),
            comment=self._set.get("comment", ""),
            immutable=self._set.get("immutable", False),
        )

    def _changes(self, current: CoreColumn) -> tuple[dict[str, Any], str | None]:
        """For ``alter_column``: the attribute changes and the new name (if renamed)."""
        for attr in ("type", "precision", "scale", "length", "nullable", "primary_key"):
            if attr in self._set:
                raise NotSupportedError(
                    f"cannot change the {attr.replace('_', ' ')} of column {self.name!r}: "
                    "Kudu alters only a column's name, default, encoding, compression, "
                    "block size and comment"
                )
        if "immutable" in self._set:
            raise NotSupportedError(f"cannot change whether column {self.name!r} is immutable")
        changes: dict[str, Any] = {}
        if "default" in self._set:
            d = self._set["default"]
            changes["default"] = None if d is None else _convert_default(current.type, d, self.name)
        if "encoding" in self._set:
            changes["encoding"] = parse_encoding(self._set["encoding"], self.name)
        if "compression" in self._set:
            changes["compression"] = parse_compression(self._set["compression"], self.name)
        for attr in ("block_size", "comment"):
            if attr in self._set:
                changes[attr] = self._set[attr]
        return changes, self._set.get("rename")


def _convert_default(t: DataType, value: Any, column: str) -> Any:
    if type(value) is KuduValue:
        value = value.value
    try:
        return t.python_value(value)
    except ProgrammingError:
        raise ProgrammingError(
            f"default {value!r} of column {column!r} is not a valid {t}"
        ) from None


class SchemaBuilder:
    """Builds a ``Schema``: ``add_column`` each column, mark the key with
    ``ColumnSpec.primary_key()`` or ``set_primary_keys``, then ``build()``."""

    def __init__(self) -> None:
        self._specs: list[ColumnSpec] = []
        self._key: list[str] | None = None
        self._key_unique = True

    def add_column(
        self,
        name: str,
        type_: TypeLike | None = None,
        nullable: bool | None = None,
        compression: str | None = None,
        encoding: str | None = None,
        primary_key: bool = False,
        block_size: int | None = None,
        default: Any = None,
        precision: int | None = None,
        scale: int | None = None,
        length: int | None = None,
        comment: str | None = None,
        non_unique_primary_key: bool = False,
    ) -> ColumnSpec:
        """Add a column; returns its spec for further chained settings."""
        if not isinstance(name, str) or not name:
            raise KuduInvalidArgument("a column needs a non-empty name")
        spec = ColumnSpec(name).set(
            type=type_,
            nullable=nullable,
            compression=compression,
            encoding=encoding,
            block_size=block_size,
            default=default,
            precision=precision,
            scale=scale,
            length=length,
            comment=comment,
        )
        if primary_key:
            spec.primary_key()
        if non_unique_primary_key:
            spec.non_unique_primary_key()
        self._specs.append(spec)
        return spec

    def copy_column(self, colschema: ColumnSchema | pa.Field[Any]) -> ColumnSpec:
        """Add a column like ``colschema`` (its name, full type and nullability): a
        ``ColumnSchema`` or an Arrow field (``scanner.get_projection_schema()`` gives
        them)."""
        if isinstance(colschema, pa.Field):
            t = DataType.from_arrow(colschema.type)
            return self.add_column(colschema.name, t, colschema.nullable)
        return self.add_column(colschema.name, colschema.data_type, colschema.nullable)

    def set_primary_keys(self, key_names: Sequence[str] | str) -> SchemaBuilder:
        """The primary key columns, in key order (a compound key)."""
        names = [key_names] if isinstance(key_names, str) else list(key_names)
        if not names:
            raise ProgrammingError("a primary key needs at least one column")
        self._key = names
        self._key_unique = True
        return self

    def set_non_unique_primary_keys(self, key_names: Sequence[str] | str) -> SchemaBuilder:
        """A non-unique primary key of these columns (Kudu 1.17's
        ``SetNonUniquePrimaryKey``; see ``ColumnSpec.non_unique_primary_key``)."""
        self.set_primary_keys(key_names)
        self._key_unique = False
        return self

    def build(self) -> Schema:
        """The schema. Key columns come first, in key order (Kudu requires them listed
        first; here they are moved there)."""
        if not self._specs:
            raise KuduInvalidArgument("a schema needs at least one column")
        for s in self._specs:
            s._check_creatable()
        marked = [s.name for s in self._specs if s._set.get("primary_key")]
        if self._key is not None and marked:
            call = "SetPrimaryKey()" if self._key_unique else "SetNonUniquePrimaryKey()"
            raise KuduInvalidArgument(
                f"primary key specified by both {call} and on a specific column: "
                f"{', '.join(marked)} (set_primary_keys() or set_non_unique_primary_keys(), "
                "and primary_key() or non_unique_primary_key())"
            )
        if len(marked) > 1:
            raise KuduInvalidArgument(
                f"multiple columns specified for primary key: {', '.join(marked)} "
                "(use set_primary_keys() for a compound key)"
            )
        key = self._key if self._key is not None else marked
        if not key:
            raise KuduInvalidArgument(
                "no primary key specified: call primary_key() on a column or set_primary_keys()"
            )
        names = [s.name for s in self._specs]
        seen: set[str] = set()
        for s in self._specs:
            if s.name in seen:
                raise KuduInvalidArgument(f"Duplicate column name: {s.name}")
            seen.add(s.name)
            if s.name.lower() == AUTO_INCREMENTING_COLUMN:
                raise KuduInvalidArgument(
                    f"{AUTO_INCREMENTING_COLUMN} is a reserved column name (the hidden key "
                    "column of a non-unique primary key)"
                )
        for k in key:
            if k not in names:
                raise KuduInvalidArgument(
                    f"primary key column not defined: {k} (not a column of the schema)"
                )
        cols = [s._column(key=s.name in key) for s in self._specs]
        unique = self._key_unique and not any(s._set.get("non_unique") for s in self._specs)
        try:
            core = CoreSchema.build(cols, key, key_unique=unique)
        except ProgrammingError as e:
            raise KuduInvalidArgument(str(e)) from None
        return Schema(core)


def schema_builder() -> SchemaBuilder:
    """A new ``SchemaBuilder`` (``kudu.schema_builder()``)."""
    return SchemaBuilder()


class ColumnTypeAttributes:
    """A column's type attributes: ``precision`` and ``scale`` (DECIMAL), ``length``
    (VARCHAR); None where they do not apply."""

    __slots__ = ("length", "precision", "scale")

    def __init__(self, t: DataType) -> None:
        self.precision = t.precision
        self.scale = t.scale
        self.length = t.length

    def __repr__(self) -> str:
        return (
            f"ColumnTypeAttributes(precision={self.precision}, scale={self.scale}, "
            f"length={self.length})"
        )


class ColumnSchema:
    """A read-only view of one column of a schema."""

    def __init__(self, core: CoreColumn, is_key: bool) -> None:
        self._core = core
        self._is_key = is_key

    @property
    def core(self) -> CoreColumn:
        return self._core

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def type(self) -> KuduType:
        return kudu_type(self._core.type)

    @property
    def data_type(self) -> DataType:
        """The full storage type (``DECIMAL(10,2)``, ``VARCHAR(20)``, ...)."""
        return self._core.type

    @property
    def nullable(self) -> bool:
        return self._core.nullable

    @property
    def primary_key(self) -> bool:
        return self._is_key

    @property
    def default(self) -> Any:
        return self._core.default

    @property
    def precision(self) -> int | None:
        return self._core.type.precision

    @property
    def scale(self) -> int | None:
        return self._core.type.scale

    @property
    def length(self) -> int | None:
        return self._core.type.length

    @property
    def encoding(self) -> str:
        e = self._core.encoding
        return ENCODING_AUTO if e is None else _SHOWN_ENCODINGS.get(e, e)

    @property
    def compression(self) -> str:
        return self._core.compression or COMPRESSION_DEFAULT

    @property
    def block_size(self) -> int | None:
        return self._core.block_size

    @property
    def comment(self) -> str:
        return self._core.comment

    @property
    def auto_incrementing(self) -> bool:
        """The hidden ``auto_incrementing_id`` key column of a non-unique primary key."""
        return self._core.auto_incrementing

    @property
    def immutable(self) -> bool:
        return self._core.immutable

    @property
    def mutable(self) -> bool:
        """Kudu's name for the opposite of ``immutable``."""
        return not self._core.immutable

    @property
    def type_attributes(self) -> ColumnTypeAttributes:
        return ColumnTypeAttributes(self._core.type)

    def type_to_string(self) -> str:
        """The type and nullability as Kudu prints them (``DECIMAL(8, 2) NOT NULL``)."""
        t = self._core.type
        if t.kind is TypeKind.DECIMAL:
            name = f"DECIMAL({t.precision}, {t.scale})"
        elif t.kind is TypeKind.VARCHAR:
            name = f"VARCHAR({t.length})"
        else:
            name = self.type.name.upper()
        return f"{name} {'NULLABLE' if self.nullable else 'NOT NULL'}"

    def equals(self, other: ColumnSchema) -> bool:
        return replace(self._core, id=0) == replace(other._core, id=0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ColumnSchema) and self.equals(other)

    def __hash__(self) -> int:
        return hash((self.name, str(self._core.type)))

    def __repr__(self) -> str:
        return f"ColumnSchema(name={self.name}, type={self.type.name}, nullable={self.nullable})"


class Schema:
    """A read-only view of a table schema: ``names``, ``primary_keys()``, columns by
    position or name (``schema['key']``), iteration and ``to_arrow()``."""

    def __init__(self, core: CoreSchema) -> None:
        self._core = core

    @property
    def core(self) -> CoreSchema:
        return self._core

    @property
    def names(self) -> list[str]:
        return self._core.names

    @property
    def num_columns(self) -> int:
        return len(self._core.columns)

    def primary_keys(self) -> list[str]:
        return self._core.key_names

    @property
    def key_unique(self) -> bool:
        """False for a non-unique primary key, whose last key column is the hidden
        ``auto_incrementing_id`` the tablets assign."""
        return self._core.key_unique

    def primary_key_indices(self) -> list[int]:
        return list(range(self._core.num_key_columns))

    def get_loc(self, name: str) -> int:
        return self._core.index_of(name)

    @staticmethod
    def get_auto_incrementing_column_name() -> str:
        """The name of the hidden key column of a non-unique primary key."""
        return AUTO_INCREMENTING_COLUMN

    def at(self, i: int) -> ColumnSchema:
        n = len(self._core.columns)
        if isinstance(i, bool) or not isinstance(i, int):
            raise KuduKeyError(f"a column is named by a str or an int, not {i!r}")
        if not -n <= i < n:
            raise KuduIndexError(f"Column index {i} is not in range (the schema has {n} columns)")
        i %= n
        return ColumnSchema(self._core.columns[i], i < self._core.num_key_columns)

    def __getitem__(self, key: int | str) -> ColumnSchema:
        if isinstance(key, str):
            if not self._core.has_column(key):
                raise KuduKeyError(
                    f"unknown column {key!r} (columns: {', '.join(self._core.names)})"
                )
            return self.at(self._core.index_of(key))
        return self.at(key)

    def new_row(self, record: Any = None) -> PartialRow:
        """A ``PartialRow`` of this schema, with the cells of ``record`` (dict, tuple or
        list) if given."""
        return PartialRow(self._core, record)

    def __len__(self) -> int:
        return len(self._core.columns)

    def __iter__(self) -> Iterator[ColumnSchema]:
        return (self.at(i) for i in range(len(self)))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._core.has_column(name)

    def to_arrow(self) -> pa.Schema:
        return self._core.arrow_schema()

    def equals(self, other: Schema) -> bool:
        return _strip_ids(self._core.columns) == _strip_ids(
            other._core.columns
        ) and self._core.num_key_columns == (other._core.num_key_columns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.equals(other)

    def __hash__(self) -> int:
        return hash(tuple(self.names))

    def __repr__(self) -> str:
        lines = []
        for c in self:
            t = str(c.data_type)
            lines.append(f"  {c.name} {t}{'' if c.nullable else ' NOT NULL'}")
        lines.append(f"  PRIMARY KEY ({', '.join(self.primary_keys())})")
        return "kudusql.client.Schema {\n" + ",\n".join(lines) + "\n}"


def _strip_ids(cols: Iterable[CoreColumn]) -> list[CoreColumn]:
    return [replace(c, id=0) for c in cols]
