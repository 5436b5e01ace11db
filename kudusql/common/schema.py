"""Table schemas: columns with ids that are never reused, primary keys, defaults.

Data binds to column ids, not names: renaming a column keeps its data, and dropping
then re-adding a column of the same name gives a new id, so old values stay gone.
The primary key is the ordered set of leading columns; key columns are never NULL
and never BOOL, FLOAT or DOUBLE (Kudu's rules).

A *non-unique* primary key (Kudu 1.17) is the declared key columns followed by the
hidden ``auto_incrementing_id`` BIGINT NOT NULL column, whose values each tablet
assigns on insert; together they are unique. The column name is reserved: no other
column may take it (compared ignoring case, as SQL finds columns).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from kudusql.common.errors import ProgrammingError
from kudusql.common.json_values import from_json_value, to_json_value
from kudusql.common.types import DataType

MAX_COLUMNS = 300
#: The hidden last key column of a non-unique primary key (Kudu's name).
AUTO_INCREMENTING_COLUMN = "auto_incrementing_id"


@dataclass(frozen=True)
class ColumnSchema:
    """One column. ``default`` is the write default (a Python value) or None;
    ``read_default`` is what rows written before the column existed read (set by ALTER
    TABLE ADD COLUMN and never changed after, so a later SET DEFAULT rewrites no history).
    """

    name: str
    type: DataType
    nullable: bool = True
    default: Any = None
    id: int = -1
    encoding: str | None = None
    compression: str | None = None
    block_size: int | None = None
    comment: str = ""
    immutable: bool = False
    read_default: Any = None
    #: The hidden ``auto_incrementing_id`` key column of a non-unique primary key.
    auto_incrementing: bool = False

    @classmethod
    def auto_incrementing_id(cls) -> ColumnSchema:
        """The column a non-unique primary key ends with (values assigned by tablets)."""
        return cls(AUTO_INCREMENTING_COLUMN, DataType.parse("INT64"), False, auto_incrementing=True)

    def arrow_field(self) -> pa.Field[Any]:
        return self.type.arrow_field(self.name, self.nullable)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": str(self.type), "id": self.id}
        if not self.nullable:
            d["nullable"] = False
        if self.default is not None:
            d["default"] = to_json_value(self.default)
        for k in ("encoding", "compression", "block_size"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.comment:
            d["comment"] = self.comment
        if self.immutable:
            d["immutable"] = True
        if self.read_default is not None:
            d["read_default"] = to_json_value(self.read_default)
        if self.auto_incrementing:
            d["auto_incrementing"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ColumnSchema:
        t = DataType.parse(d["type"])
        default = d.get("default")
        if default is not None:
            default = _from_json_value(default, t)
        read_default = d.get("read_default")
        if read_default is not None:
            read_default = _from_json_value(read_default, t)
        return cls(
            name=d["name"],
            type=t,
            nullable=d.get("nullable", True),
            default=default,
            id=d["id"],
            encoding=d.get("encoding"),
            compression=d.get("compression"),
            block_size=d.get("block_size"),
            comment=d.get("comment", ""),
            immutable=d.get("immutable", False),
            read_default=read_default,
            # absent in schemas written before non-unique keys existed
            auto_incrementing=d.get("auto_incrementing", False),
        )


@dataclass(frozen=True)
class Schema:
    """An ordered list of columns whose first ``num_key_columns`` form the primary key."""

    columns: tuple[ColumnSchema, ...]
    num_key_columns: int
    next_column_id: int = 0
    _by_name: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _by_id: dict[int, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        cols = list(self.columns)
        next_id = max([self.next_column_id, *(c.id + 1 for c in cols)])
        for i, c in enumerate(cols):
            if c.id < 0:
                cols[i] = replace(c, id=next_id)
                next_id += 1
        object.__setattr__(self, "columns", tuple(cols))
        object.__setattr__(self, "next_column_id", next_id)
        self._validate()
        self._by_name.update({c.name: i for i, c in enumerate(cols)})
        self._by_id.update({c.id: i for i, c in enumerate(cols)})

    @classmethod
    def build(
        cls, columns: Iterable[ColumnSchema], key: Sequence[str], *, key_unique: bool = True
    ) -> Schema:
        """A schema whose key is ``key``; key columns are moved first, in key order.
        With ``key_unique=False`` the key is non-unique: the hidden
        ``auto_incrementing_id`` column follows the key columns and ends the key."""
        cols = list(columns)
        names = [c.name for c in cols]
        for k in key:
            if k not in names:
                raise ProgrammingError(f"primary key column {k!r} is not a column of the table")
        if len(set(key)) != len(key):
            raise ProgrammingError("a primary key column is listed twice")
        keyed = [replace(cols[names.index(k)], nullable=False) for k in key]
        rest = [c for c in cols if c.name not in key]
        if not key_unique:
            if not key:
                raise ProgrammingError("a non-unique primary key needs at least one column")
            keyed.append(ColumnSchema.auto_incrementing_id())
        return cls(tuple(keyed + rest), len(keyed))

    def _validate(self) -> None:
        if self.num_key_columns < 1:
            raise ProgrammingError("a table needs a primary key of at least one column")
        if len(self.columns) > MAX_COLUMNS:
            raise ProgrammingError(f"a table has at most {MAX_COLUMNS} columns")
        seen: set[str] = set()
        ids: set[int] = set()
        for i, c in enumerate(self.columns):
            if not c.name:
                raise ProgrammingError("a column needs a name")
            if c.name in seen:
                raise ProgrammingError(f"duplicate column name {c.name!r}")
            if c.id in ids:
                raise ProgrammingError(f"duplicate column id {c.id}")
            seen.add(c.name)
            ids.add(c.id)
            if c.auto_incrementing:
                _check_auto_incrementing(c, i, self.num_key_columns)
            elif c.name.lower() == AUTO_INCREMENTING_COLUMN:
                raise ProgrammingError(_RESERVED.format(name=c.name))
            if i < self.num_key_columns:
                if c.nullable:
                    raise ProgrammingError(f"key column {c.name!r} cannot be nullable")
                if not c.type.key_allowed:
                    raise ProgrammingError(
                        f"key column {c.name!r} cannot be of type {c.type} "
                        "(BOOL, FLOAT and DOUBLE are not allowed in a primary key)"
                    )

    # -- lookups --------------------------------------------------------------------------
    @property
    def key_columns(self) -> tuple[ColumnSchema, ...]:
        return self.columns[: self.num_key_columns]

    @property
    def auto_incrementing_index(self) -> int | None:
        """The position of the hidden ``auto_incrementing_id`` column (always the last
        key column), or None when the primary key is unique."""
        last = self.columns[self.num_key_columns - 1]
        return self.num_key_columns - 1 if last.auto_incrementing else None

    @property
    def key_unique(self) -> bool:
        """Whether the declared key columns are unique (False: a non-unique primary key,
        which DESCRIBE shows as ``key_unique`` false on every key column)."""
        return self.auto_incrementing_index is None

    @property
    def declared_key_names(self) -> list[str]:
        """The key columns the table was declared with (without the hidden
        ``auto_incrementing_id``): what partitioning and a default range may use."""
        n = self.num_key_columns - (0 if self.key_unique else 1)
        return [c.name for c in self.columns[:n]]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def key_names(self) -> list[str]:
        return [c.name for c in self.key_columns]

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    def index_of(self, name: str) -> int:
        try:
            return self._by_name[name]
        except KeyError:
            raise ProgrammingError(f"unknown column {name!r}") from None

    def column(self, name: str) -> ColumnSchema:
        return self.columns[self.index_of(name)]

    def column_by_id(self, col_id: int) -> ColumnSchema | None:
        i = self._by_id.get(col_id)
        return None if i is None else self.columns[i]

    def is_key(self, name: str) -> bool:
        return self.index_of(name) < self.num_key_columns

    def arrow_schema(self, names: Sequence[str] | None = None) -> pa.Schema:
        cols = self.columns if names is None else [self.column(n) for n in names]
        return pa.schema([c.arrow_field() for c in cols])

    # -- evolution (ALTER TABLE) ---------------------------------------------------------------
    def add_column(self, col: ColumnSchema) -> Schema:
        """A copy with ``col`` appended under a new id. Rows already stored read its
        default (NULL if it has none); a NOT NULL column therefore needs a default."""
        if self.has_column(col.name):
            raise ProgrammingError(f"column {col.name!r} already exists")
        if col.auto_incrementing or col.name.lower() == AUTO_INCREMENTING_COLUMN:
            raise ProgrammingError(_RESERVED.format(name=col.name))
        default = None if col.default is None else col.type.python_value(col.default)
        if not col.nullable and default is None:
            raise ProgrammingError(
                f"cannot add NOT NULL column {col.name!r} without a default: the rows "
                "already in the table need a value"
            )
        new = replace(col, id=self.next_column_id, default=default, read_default=default)
        return Schema((*self.columns, new), self.num_key_columns, self.next_column_id + 1)

    def drop_column(self, name: str) -> Schema:
        """A copy without column ``name`` (never a key column). Its id is not reused."""
        i = self.index_of(name)
        if self.columns[i].auto_incrementing:
            raise ProgrammingError(f"cannot drop the auto-incrementing column {name!r}")
        if i < self.num_key_columns:
            raise ProgrammingError(f"cannot drop primary key column {name!r}")
        cols = self.columns[:i] + self.columns[i + 1 :]
        return Schema(cols, self.num_key_columns, self.next_column_id)

    def rename_column(self, old: str, new: str) -> Schema:
        """A copy with column ``old`` called ``new``; its data (bound to its id) stays."""
        i = self.index_of(old)
        if old != new and self.has_column(new):
            raise ProgrammingError(f"column {new!r} already exists")
        if self.columns[i].auto_incrementing and old != new:
            raise ProgrammingError(f"cannot rename the auto-incrementing column {old!r}")
        cols = list(self.columns)
        cols[i] = replace(cols[i], name=new)
        return Schema(tuple(cols), self.num_key_columns, self.next_column_id)

    _ALTERABLE = frozenset({"default", "encoding", "compression", "block_size", "comment"})

    def alter_column(self, name: str, **changes: Any) -> Schema:
        """A copy with column attributes changed: ``default`` (write default; rows stored
        before keep what they read), ``encoding``, ``compression``, ``block_size`` (for
        files written from now on) and ``comment``. A key column allows only ``comment``."""
        unknown = set(changes) - self._ALTERABLE
        if unknown:
            raise ProgrammingError(
                f"cannot alter {', '.join(sorted(unknown))} of column {name!r}; alterable: "
                f"{', '.join(sorted(self._ALTERABLE))}"
            )
        i = self.index_of(name)
        if i < self.num_key_columns and set(changes) - {"comment"}:
            raise ProgrammingError(
                f"cannot alter {', '.join(sorted(set(changes) - {'comment'}))} of primary key "
                f"column {name!r}"
            )
        col = self.columns[i]
        if changes.get("default") is not None:
            changes["default"] = col.type.python_value(changes["default"])
        # Dropping the write default of a NOT NULL column is allowed (Kudu): writes must
        # then give a value; rows stored before the column existed keep its read default.
        cols = list(self.columns)
        cols[i] = replace(col, **changes)
        return Schema(tuple(cols), self.num_key_columns, self.next_column_id)

    # -- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": [c.to_dict() for c in self.columns],
            "num_key_columns": self.num_key_columns,
            "next_column_id": self.next_column_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schema:
        return cls(
            tuple(ColumnSchema.from_dict(c) for c in d["columns"]),
            d["num_key_columns"],
            d.get("next_column_id", 0),
        )


_RESERVED = (
    "column name {name!r} is reserved by Kudu (the auto-incrementing column of a "
    "non-unique primary key)"
)


def _check_auto_incrementing(c: ColumnSchema, i: int, num_key_columns: int) -> None:
    if (
        i != num_key_columns - 1
        or c.name != AUTO_INCREMENTING_COLUMN
        or c.nullable
        or str(c.type) != "INT64"
    ):
        raise ProgrammingError(
            f"the auto-incrementing column must be the last key column, named "
            f"{AUTO_INCREMENTING_COLUMN!r}, of type INT64 and NOT NULL (column {c.name!r})"
        )


def _from_json_value(v: Any, t: DataType) -> Any:
    return t.python_value(from_json_value(v, "schema"))
