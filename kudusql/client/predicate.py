"""``Column`` (``table['col']``), whose comparison operators make scan predicates, and
``Predicate``, the predicate they make, for ``Scanner.add_predicate``.

A literal is checked against its column as a cell value is (``row.check_value``): a value
of the wrong kind raises ``TypeError`` (``KuduTypeError``) when the predicate is made,
as in kudu-python; a str is accepted for a BINARY column (its UTF-8 bytes), and a
TIMESTAMP takes the forms a cell does (datetime, microseconds, ISO string, ``(string,
format)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kudusql.client.row import KuduValue, check_value
from kudusql.client.schema import ColumnSchema
from kudusql.common.errors import KuduTypeError, NotSupportedError
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.types import TypeKind

if TYPE_CHECKING:
    from kudusql.client.table import Table

__all__ = ["Column", "Predicate"]


class Predicate:
    """A scan predicate on one column (``table['a'] > 10``), for ``Scanner.add_predicate``.
    ``predicate`` is the storage ``ColumnPredicate``, its literal already converted to
    the column's type."""

    __slots__ = ("predicate", "table_id")

    def __init__(self, table_id: int | str, predicate: ColumnPredicate) -> None:
        self.table_id = table_id
        self.predicate = predicate

    def __repr__(self) -> str:
        return f"Predicate({self.predicate})"


class Column:
    """A column of a table, for building predicates: ``table['a'] >= 0``,
    ``table['a'].in_list([1, 2])``, ``table['s'].is_null()``."""

    __slots__ = ("name", "parent", "spec")

    def __init__(self, parent: Table, spec: ColumnSchema) -> None:
        self.parent = parent
        self.spec = spec
        self.name = spec.name

    def __repr__(self) -> str:
        return f"Column({self.name}, parent={self.parent.name}, type={self.spec.type.name})"

    def _bind(self, pred: ColumnPredicate) -> Predicate:
        return Predicate(self.parent.id, pred.bind(self.parent.core.schema))

    def _value(self, value: Any, op: str) -> Any:
        if type(value) is KuduValue:
            value = value.value
        if value is None:
            raise KuduTypeError(
                f"cannot compare column {self.name!r} {op} None; use is_null() or is_not_null()"
            )
        core = self.spec.core
        if core.type.kind is TypeKind.BINARY and isinstance(value, str):
            return value.encode("utf-8")
        if core.type.kind is TypeKind.VARCHAR and isinstance(value, str):
            return value  # compared whole: truncating it would widen the match
        return check_value(replace(core, nullable=True), value)

    def __lt__(self, value: Any) -> Predicate:
        return self._bind(ColumnPredicate.lt(self.name, self._value(value, "<")))

    def __le__(self, value: Any) -> Predicate:
        return self._bind(ColumnPredicate.le(self.name, self._value(value, "<=")))

    def __gt__(self, value: Any) -> Predicate:
        return self._bind(ColumnPredicate.gt(self.name, self._value(value, ">")))

    def __ge__(self, value: Any) -> Predicate:
        return self._bind(ColumnPredicate.ge(self.name, self._value(value, ">=")))

    def __eq__(self, value: Any) -> Predicate:  # type: ignore[override]
        return self._bind(ColumnPredicate.eq(self.name, self._value(value, "==")))

    def __ne__(self, value: Any) -> Predicate:  # type: ignore[override]
        raise NotSupportedError(
            f"!= predicates are not supported (column {self.name!r}); Kudu scans take "
            "=, <, <=, >, >=, IN lists and NULL tests"
        )

    __hash__ = object.__hash__

    def in_list(self, values: Sequence[Any]) -> Predicate:
        """``column IN values`` (None values never match)."""
        if isinstance(values, (str, bytes)):
            raise KuduTypeError("in_list() takes a list of values, not a single string")
        checked = [None if v is None else self._value(v, "IN") for v in values]
        return self._bind(ColumnPredicate.in_list(self.name, checked))

    def is_null(self) -> Predicate:
        return self._bind(ColumnPredicate.is_null(self.name))

    def is_not_null(self) -> Predicate:
        return self._bind(ColumnPredicate.is_not_null(self.name))

    def prefix(self, prefix: str | bytes) -> Predicate:
        """``column LIKE 'prefix%'`` (string and binary columns)."""
        return self._bind(ColumnPredicate.prefix(self.name, prefix))
