"""Turn predicates on a primary-key prefix into encoded key bounds [lo, hi).

Equality predicates on leading key columns, optionally followed by a range on the next
key column, bound the encoded keys of every matching row, so a scan can seek the key
index of each DiskRowSet to a rowid range instead of reading every page. The bounds
only narrow; every predicate is still evaluated on the rows read.
"""

from __future__ import annotations

from collections.abc import Sequence

from kudusql.common.keys import encode_key_prefix, prefix_successor
from kudusql.common.predicates import ColumnPredicate, PredicateKind
from kudusql.common.schema import Schema


def key_bounds(
    schema: Schema, preds: Sequence[ColumnPredicate]
) -> tuple[bytes | None, bytes | None]:
    """Inclusive lower and exclusive upper encoded-key bounds implied by ``preds``."""
    nk = schema.num_key_columns
    types = [c.type for c in schema.key_columns]
    by_col: dict[str, list[ColumnPredicate]] = {}
    for p in preds:
        by_col.setdefault(p.column, []).append(p)
    prefix: list[object] = []
    for i, col in enumerate(schema.key_columns):
        ps = by_col.get(col.name, [])
        eq = next((p.value for p in ps if p.kind is PredicateKind.EQ), None)
        if eq is None:
            eq = next(
                (p.values[0] for p in ps if p.kind is PredicateKind.IN and len(p.values) == 1),
                None,
            )
        if eq is not None:
            prefix.append(eq)
            continue
        last = i == nk - 1
        lo: bytes | None = None
        hi: bytes | None = None
        for p in ps:
            if p.kind is not PredicateKind.RANGE:
                continue
            if p.lower is not None:
                enc = encode_key_prefix([*prefix, p.lower], types, nk)
                cand = enc if p.lower_inclusive else _after(enc, last)
                if cand is not None and (lo is None or cand > lo):
                    lo = cand
            if p.upper is not None:
                enc = encode_key_prefix([*prefix, p.upper], types, nk)
                cand2 = _after(enc, last) if p.upper_inclusive else enc
                if cand2 is not None and (hi is None or cand2 < hi):
                    hi = cand2
        if prefix:
            base = encode_key_prefix(prefix, types, nk)
            if lo is None:
                lo = base
            if hi is None:
                hi = prefix_successor(base)
        return lo, hi
    # Every key column has an equality: a single key.
    enc = encode_key_prefix(prefix, types, nk)
    return enc, enc + b"\x00"


def _after(enc: bytes, last: bool) -> bytes | None:
    """The smallest bound above every key that equals ``enc`` on this column."""
    return enc + b"\x00" if last else prefix_successor(enc)
