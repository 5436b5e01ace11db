"""The value conversions kudu-python offers in ``kudu.util`` (timestamps as microseconds
since the epoch, DECIMALs as unscaled integers, DATEs as days since the epoch), and
``TimeDelta``/``timedelta``, Kudu's duration type.

Timestamps follow the client's rule: a naive datetime is UTC, an aware one is converted
to UTC, and datetimes given back are UTC-aware.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import numpy as np

from kudusql.client.row import ISO_FORMAT, parse_timestamp
from kudusql.common.errors import KuduTypeError, KuduValueError

__all__ = [
    "TimeDelta",
    "date_to_unix_epoch_days",
    "from_hybridtime",
    "from_unixtime_micros",
    "from_unscaled_decimal",
    "get_decimal_scale",
    "timedelta",
    "to_unixtime_micros",
    "to_unscaled_decimal",
    "unix_epoch_days_to_date",
]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_DATE = datetime.date(1970, 1, 1)


def to_unixtime_micros(timestamp: Any, format: str = ISO_FORMAT) -> int:
    """Microseconds since the epoch of a datetime, a string parsed with ``format``, or a
    ``(string, format)`` pair."""
    if isinstance(timestamp, tuple) and len(timestamp) == 2:
        timestamp, format = timestamp
    if isinstance(timestamp, str):
        try:
            timestamp = parse_timestamp(timestamp, format)
        except ValueError as e:
            raise KuduValueError(f"invalid timestamp {timestamp!r}: {e}") from None
    if not isinstance(timestamp, datetime.datetime):
        raise KuduValueError(
            "Invalid timestamp type: a timestamp is a datetime.datetime or a string, not "
            f"{type(timestamp).__name__}"
        )
    if timestamp.tzinfo is None:
        timestamp = timestamp.replace(tzinfo=datetime.UTC)
    d: datetime.timedelta = timestamp - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def from_unixtime_micros(unixtime_micros: int) -> datetime.datetime:
    """The UTC-aware datetime of microseconds since the epoch."""
    if isinstance(unixtime_micros, bool | np.bool_) or not isinstance(
        unixtime_micros, int | np.integer
    ):
        raise KuduValueError(f"Invalid unixtime_micros value: {unixtime_micros!r} is not an int")
    return _EPOCH + datetime.timedelta(microseconds=int(unixtime_micros))


def from_hybridtime(hybridtime: int) -> datetime.datetime:
    """The UTC-aware datetime just after a raw HybridTime's physical time: a snapshot
    scan at it sees the writes at that HybridTime."""
    return from_unixtime_micros((int(hybridtime) >> 12) + 1)


def get_decimal_scale(value: decimal.Decimal) -> int:
    """The number of digits after the point of ``value``."""
    exp = value.as_tuple().exponent
    return max(0, -exp) if isinstance(exp, int) else 0


def to_unscaled_decimal(value: decimal.Decimal, context: decimal.Context | None = None) -> int:
    """``value`` without its point (``Decimal('123.45')`` -> 12345)."""
    ctx = context or decimal.getcontext()
    return int(value.scaleb(get_decimal_scale(value), ctx).to_integral_exact(context=ctx))


def from_unscaled_decimal(
    unscaled: int, scale: int, context: decimal.Context | None = None
) -> decimal.Decimal:
    """The Decimal of an unscaled integer and a scale (12345, 2 -> ``Decimal('123.45')``)."""
    ctx = context or decimal.getcontext()
    return decimal.Decimal(unscaled, ctx).scaleb(-scale, ctx)


def unix_epoch_days_to_date(ndays: int) -> datetime.date:
    """The date ``ndays`` days after 1970-01-01."""
    return _EPOCH_DATE + datetime.timedelta(days=int(ndays))


def date_to_unix_epoch_days(date: datetime.date) -> int:
    """The days from 1970-01-01 to ``date``."""
    if isinstance(date, datetime.datetime):
        date = date.date()
    if not isinstance(date, datetime.date):
        raise KuduTypeError(f"a date is a datetime.date, not {type(date).__name__}")
    return (date - _EPOCH_DATE).days


class TimeDelta:
    """A duration (Kudu's ``MonoDelta``), in nanoseconds; ``TimeDelta()`` is unset."""

    __slots__ = ("_nanos",)

    def __init__(self) -> None:
        self._nanos: int | None = None

    @classmethod
    def from_nanos(cls, nanos: int) -> TimeDelta:
        out = cls()
        out._nanos = int(nanos)
        return out

    @classmethod
    def from_micros(cls, micros: int) -> TimeDelta:
        return cls.from_nanos(int(micros) * 1000)

    @classmethod
    def from_millis(cls, millis: int) -> TimeDelta:
        return cls.from_nanos(int(millis) * 1_000_000)

    @classmethod
    def from_seconds(cls, seconds: float) -> TimeDelta:
        return cls.from_nanos(round(seconds * 1_000_000_000))

    def _value(self) -> int:
        if self._nanos is None:
            raise KuduValueError("the TimeDelta is not set")
        return self._nanos

    def to_nanos(self) -> int:
        return self._value()

    def to_micros(self) -> int:
        return self._value() // 1000

    def to_millis(self) -> int:
        return self._value() // 1_000_000

    def to_seconds(self) -> float:
        return self._value() / 1_000_000_000

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TimeDelta):
            return NotImplemented
        return self._nanos == other._nanos

    def __lt__(self, other: TimeDelta) -> bool:
        return self._value() < other._value()

    def __le__(self, other: TimeDelta) -> bool:
        return self._value() <= other._value()

    def __hash__(self) -> int:
        return hash(self._nanos)

    def __repr__(self) -> str:
        if self._nanos is None:
            return "kudu.TimeDelta()"
        return f"kudu.TimeDelta({self._nanos / 1_000_000_000:.3f}s)"


def timedelta(
    seconds: float = 0, millis: float = 0, micros: float = 0, nanos: int = 0
) -> TimeDelta:
    """A ``TimeDelta`` of the sum of the parts given."""
    total = round(seconds * 1_000_000_000 + millis * 1_000_000 + micros * 1000) + int(nanos)
    return TimeDelta.from_nanos(total)
