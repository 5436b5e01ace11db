"""HybridTime values handed to users, and the conversion of snapshot arguments.

A ``HybridTime`` is an ``int`` (the raw 64-bit value: physical microseconds << 12 |
logical counter) that knows it is one. The client reports the timestamps it observes as
HybridTimes, and a scanner given a HybridTime ``h`` reads every write at or before
``h``. Plain integers and datetimes are microseconds since the epoch, as in Kudu's
``set_snapshot``, and read the writes made before that instant.
"""

from __future__ import annotations

import datetime
from typing import Any

from kudusql.client.row import parse_timestamp
from kudusql.common.errors import KuduValueError, ProgrammingError
from kudusql.common.hybrid_time import LOGICAL_BITS, LOGICAL_MASK, from_micros

__all__ = ["HybridTime", "raw_snapshot_of", "snapshot_of"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
#: 9999-12-31T23:59:59.999999Z in microseconds since the epoch.
MAX_MICROS = 253_402_300_799_999_999


class HybridTime(int):
    """A raw HybridTime; ``physical_micros`` and ``logical`` are its two parts."""

    @classmethod
    def from_micros(cls, micros: int, logical: int = 0) -> HybridTime:
        return cls(from_micros(int(micros), logical))

    @property
    def physical_micros(self) -> int:
        return int(self) >> LOGICAL_BITS

    @property
    def logical(self) -> int:
        return int(self) & LOGICAL_MASK

    def to_datetime(self) -> datetime.datetime:
        """The physical part as an aware UTC datetime."""
        return _EPOCH + datetime.timedelta(microseconds=self.physical_micros)

    def __repr__(self) -> str:
        return f"HybridTime(P:{self.physical_micros} L:{self.logical})"

    # ``ht - 1`` stays a HybridTime (a plain int would be read as microseconds).
    def __add__(self, other: int) -> HybridTime:  # type: ignore[override]
        return HybridTime(int(self) + int(other))

    __radd__ = __add__

    def __sub__(self, other: int) -> HybridTime:  # type: ignore[override]
        return HybridTime(int(self) - int(other))


def micros_of(value: Any, fmt: str | None = None) -> int:
    """Microseconds since the epoch of a datetime (naive means UTC), an int, a string
    parsed with ``fmt`` (``strptime``; without one, ISO 8601) or a ``(string, format)``
    pair."""
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(x, str) for x in value):
        value, fmt = value
    if isinstance(value, str):
        try:
            value = parse_timestamp(value, fmt or None)
        except ValueError as e:
            raise KuduValueError(f"invalid timestamp {value!r}: {e}") from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        delta: datetime.timedelta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProgrammingError(
            f"a snapshot timestamp is a HybridTime, a datetime or microseconds since the "
            f"epoch, not {type(value).__name__}"
        )
    return int(value)


def snapshot_of(value: Any, fmt: str | None = None) -> int:
    """The storage snapshot (sees writes with timestamp < it) for a user's timestamp."""
    if isinstance(value, HybridTime):
        return raw_snapshot_of(int(value))
    micros = micros_of(value, fmt)
    if micros < 0:
        raise ProgrammingError("a snapshot timestamp must not be before the Unix epoch")
    if micros > MAX_MICROS:
        raise ProgrammingError(
            f"snapshot timestamp {micros} is past the year 9999 in microseconds: a raw "
            "HybridTime (such as WriteResult.timestamp)? Pass HybridTime(ts) or use "
            "set_snapshot_raw(ts)"
        )
    return from_micros(micros)


def raw_snapshot_of(hybrid_time: int) -> int:
    """The storage snapshot that sees every write at or before a raw HybridTime."""
    if isinstance(hybrid_time, bool) or not isinstance(hybrid_time, int) or hybrid_time < 0:
        raise ProgrammingError(f"a raw HybridTime is a non-negative int, not {hybrid_time!r}")
    return int(hybrid_time) + 1
