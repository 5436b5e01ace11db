"""Range partitions as Kudu's client prints them (what Impala's SHOW RANGE PARTITIONS shows).

This module owns the text of a range partition read back from its encoded range keys,
so every way of writing a bound (``1 < VALUES <= 10``, ``VALUE = 5``, split rows) prints
in one canonical form, inclusive lower and exclusive upper, as Kudu's Java client
formats it (``Partition.formatRangePartition``, which Impala calls):

* ``UNBOUNDED`` when both ends are open; ``VALUES < u`` and ``VALUES >= l`` when one is;
* ``VALUE = v`` when the upper key is the lower key's successor (one key value);
* ``l <= VALUES < u`` otherwise;
* one value per range column (unset trailing columns show their minimum), in
  parentheses when there are several: ``(1, "a") <= VALUES < (2, "b")``.

Values print as Kudu prints cells: strings in double quotes with SQL escapes, dates as
``2009-01-01``, timestamps as ``2009-01-01T00:00:00.000000Z``, decimals with their
scale, binary as a quoted string with ``\\xNN`` escapes (or a byte list when mostly not
ASCII). ``sql_values`` swaps the value format for SQL literals, for SHOW CREATE TABLE.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

from kudusql.common.errors import DataError
from kudusql.common.keys import decode_key
from kudusql.common.types import DataType, TypeKind
from kudusql.storage.tables.range_key import KeyDomain

__all__ = ["format_range", "kudu_value", "sql_value"]

_EPOCH = datetime.datetime(1970, 1, 1)
_EPOCH_DATE = datetime.date(1970, 1, 1)

#: A decoded key cell: its column type and its stored value (days for DATE,
#: microseconds for TIMESTAMP; other types as ``decode_key`` gives them).
Cell = tuple[DataType, Any]


def format_range(
    lower_key: bytes,
    upper_key: bytes,
    types: Sequence[DataType],
    value: Callable[[DataType, Any], str] | None = None,
    trim_minimums: bool = False,
) -> str:
    """The text of the range partition ``[lower_key, upper_key)`` of range columns of
    ``types`` (``b""``: that end is unbounded); ``value`` formats one cell (default
    ``kudu_value``, which receives dates as day numbers and timestamps as microseconds
    since the epoch, so values beyond Python's calendar print too). ``trim_minimums``
    leaves out trailing cells at their type's minimum (a bound then names a prefix of
    the range columns, which means the same: SQL can write it back)."""
    fmt = value or kudu_value
    if not lower_key and not upper_key:
        return "UNBOUNDED"

    def row(key: bytes) -> str:
        cells = _cells(key, types)
        while trim_minimums and len(cells) > 1 and _is_minimum(*cells[-1]):
            cells.pop()
        texts = [fmt(t, v) for t, v in cells]
        return texts[0] if len(texts) == 1 else f"({', '.join(texts)})"

    if not upper_key:
        return f"VALUES >= {row(lower_key)}"
    if not lower_key:
        return f"VALUES < {row(upper_key)}"
    if _is_successor(lower_key, upper_key, types):
        return f"VALUE = {row(lower_key)}"
    return f"{row(lower_key)} <= VALUES < {row(upper_key)}"


def _stored_type(t: DataType) -> DataType:
    """DATE and TIMESTAMP keys decode as the integers they are stored as."""
    if t.kind is TypeKind.DATE:
        return DataType(TypeKind.INT32)
    if t.kind is TypeKind.TIMESTAMP:
        return DataType(TypeKind.INT64)
    return t


def _cells(key: bytes, types: Sequence[DataType]) -> list[Cell]:
    try:
        values = decode_key(key, [_stored_type(t) for t in types])
    except DataError:
        return [(DataType(TypeKind.BINARY), key)]
    return list(zip(types, values, strict=True))


def _is_minimum(t: DataType, v: Any) -> bool:
    domain = KeyDomain.of(_stored_type(t))
    return bool(domain.component(v) == domain.min)


def _is_successor(lower: bytes, upper: bytes, types: Sequence[DataType]) -> bool:
    """Whether ``upper`` is the key right after ``lower`` (Kudu's "incremented" row:
    the last column's successor, ``+ \\0`` for a string, ``+ 1`` for a number)."""
    last = types[-1]
    if last.is_varlen:
        return upper == lower + b"\x00"
    width = last.key_width
    assert width is not None
    if len(lower) != len(upper):
        return False
    fixed = all(not t.is_varlen for t in types)
    head = 0 if fixed else len(lower) - width
    if lower[:head] != upper[:head]:
        return False
    return int.from_bytes(upper[head:], "big") == int.from_bytes(lower[head:], "big") + 1


def kudu_value(t: DataType, v: Any) -> str:
    """One cell as Kudu's client prints it (see the module docstring)."""
    kind = t.kind
    if kind in (TypeKind.STRING, TypeKind.VARCHAR):
        return '"' + "".join(_ESCAPES.get(ch) or _control(ch) for ch in v) + '"'
    if kind is TypeKind.BINARY:
        return _pretty_bytes(v)
    if kind is TypeKind.DATE:
        try:
            return (_EPOCH_DATE + datetime.timedelta(days=v)).isoformat()
        except OverflowError:
            return str(v)
    if kind is TypeKind.TIMESTAMP:
        try:
            ts = _EPOCH + datetime.timedelta(microseconds=v)
        except OverflowError:
            return str(v)
        return ts.strftime("%Y-%m-%dT%H:%M:%S") + f".{ts.microsecond:06d}Z"
    if kind is TypeKind.BOOL:
        return str(bool(v)).lower()
    return str(v)


def sql_value(t: DataType, v: Any) -> Any:
    """A decoded cell as the Python value of its column type (dates and timestamps from
    their stored numbers), for callers that print SQL literals."""
    if t.kind is TypeKind.DATE:
        return _EPOCH_DATE + datetime.timedelta(days=v)
    if t.kind is TypeKind.TIMESTAMP:
        return _EPOCH + datetime.timedelta(microseconds=v)
    return v


_ESCAPES = {
    "\0": "\\0",
    "'": "\\'",
    '"': '\\"',
    "\b": "\\b",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\\": "\\\\",
    "\x1a": "\\Z",
}


def _control(ch: str) -> str:
    return f"\\u{ord(ch):04x}" if ch < " " else ch


def _pretty_bytes(b: bytes) -> str:
    out = []
    ascii_count = 0
    for x in b:
        if 0x20 <= x <= 0x7E:
            ascii_count += 1
            out.append(chr(x))
        elif x == 0x0A:
            out.append("\\n")
        elif x == 0x09:
            out.append("\\t")
        else:
            out.append(f"\\x{x:02X}")
    if ascii_count < len(b) // 2:
        return "[" + ", ".join(str(x - 256 if x > 127 else x) for x in b) + "]"
    return '"' + "".join(out) + '"'
