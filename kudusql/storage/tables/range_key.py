"""Canonical key components: the value arithmetic behind range partition keys and pruning.

This module owns what range partitioning and partition pruning need to know about one
key column's values, independent of any row:

* a value's *canonical component*, an order-preserving stand-in that is cheap to do
  arithmetic on: an ``int`` for fixed-width types (the big-endian unsigned reading of the
  column's key encoding) and the raw ``bytes`` for STRING, BINARY and VARCHAR;
* the type's minimum and maximum component (strings have no maximum);
* the successor ("increment": the smallest value greater than a given one, ``+1`` for
  integers, ``+ b"\\0"`` for strings) and the predecessor ("decrement", which fails for a
  string that does not end in ``\\0``);
* encoding a tuple of components as a range key.

The byte format belongs to ``kudusql.common.keys``; components are read back from
``encode_key`` and encoded with its escaping rules, so the two cannot disagree.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from kudusql.common.errors import ProgrammingError
from kudusql.common.keys import encode_key, encode_key_prefix
from kudusql.common.types import DataType, TypeKind

__all__ = ["Component", "KeyDomain", "encode_components", "increment_components"]

# An int (fixed-width types) or bytes (strings); one column's components are all of one
# kind, so they compare with each other. Typed Any so comparisons need no casts.
Component: TypeAlias = Any


@dataclass(frozen=True)
class KeyDomain:
    """The canonical components of one key column type: bounds, successor, encoding."""

    type: DataType
    width: int | None  # bytes of the key encoding; None for strings
    min: Component
    max: Component | None  # None: no largest value (strings)

    @staticmethod
    def of(dtype: DataType) -> KeyDomain:
        """The domain of a key column type; ProgrammingError for types a key cannot have."""
        return _domain(dtype)

    def component(self, value: object) -> Component:
        """The canonical component of a Python value (DataError if it does not fit)."""
        enc = encode_key([value], [self.type])
        return enc if self.width is None else int.from_bytes(enc, "big")

    def successor(self, c: Component) -> Component | None:
        """The smallest component greater than ``c``; None when ``c`` is the maximum."""
        if isinstance(c, bytes):
            return c + b"\x00"
        assert isinstance(self.max, int)
        return c + 1 if c < self.max else None

    def predecessor(self, c: Component) -> Component | None:
        """The largest component smaller than ``c``, or None when there is none that can
        be written down (the minimum, or a string not ending in ``\\0``)."""
        if isinstance(c, bytes):
            return c[:-1] if c.endswith(b"\x00") else None
        assert isinstance(self.min, int)
        return c - 1 if c > self.min else None

    def encode(self, c: Component, last: bool) -> bytes:
        """This component's bytes in a key; ``last`` if it is the key's final column."""
        if isinstance(c, bytes):
            return encode_key_prefix([c], [self.type], 1 if last else 2)
        assert self.width is not None
        out: bytes = c.to_bytes(self.width, "big")
        return out


@functools.lru_cache(maxsize=256)
def _domain(dtype: DataType) -> KeyDomain:
    if not dtype.key_allowed:
        raise ProgrammingError(f"type {dtype} cannot be part of a key")
    width = dtype.key_width
    if width is None:
        return KeyDomain(dtype, None, b"", None)
    if dtype.kind is TypeKind.DECIMAL:
        # Like Kudu, the bounds are the largest magnitudes the precision allows.
        assert dtype.precision is not None
        bias, span = 1 << 127, 10**dtype.precision - 1
        return KeyDomain(dtype, width, bias - span, bias + span)
    # Integers, DATE (the full int32 range of days, wider than Kudu's years 1..9999, so
    # that no stored value falls outside it) and TIMESTAMP (int64 microseconds).
    return KeyDomain(dtype, width, 0, (1 << (8 * width)) - 1)


def encode_components(parts: Sequence[Component], domains: Sequence[KeyDomain]) -> bytes:
    """Encode a key of ``len(domains)`` columns from its leading ``parts``.

    Columns after ``parts`` take their minimum, exactly as Kudu fills the unset columns of
    a split row or range bound (a trailing string minimum contributes no bytes)."""
    if len(parts) > len(domains):
        raise ProgrammingError(f"{len(parts)} values for a key of {len(domains)} columns")
    last = len(domains) - 1
    full = [*parts, *(d.min for d in domains[len(parts) :])]
    return b"".join(
        d.encode(c, i == last) for i, (d, c) in enumerate(zip(domains, full, strict=True))
    )


def increment_components(
    parts: Sequence[Component], domains: Sequence[KeyDomain]
) -> list[Component] | None:
    """The key after ``parts`` (components of the leading ``len(parts)`` columns).

    The last column takes its successor; a column at its maximum wraps to its minimum and
    carries into the column before. None when every column is at its maximum: no such key
    exists, so an exclusive upper bound made this way is unbounded."""
    out = list(parts)
    for i in range(len(out) - 1, -1, -1):
        nxt = domains[i].successor(out[i])
        if nxt is not None:
            out[i] = nxt
            return out
        out[i] = domains[i].min
    return None
