"""A plain-Python model of a database of partitioned tables, the oracle for the
database state machine (``tests/storage/tables/test_database_model.py``).

Every table is two key columns (an INT32 and a STRING, renamable) and a list of
non-key columns; its rows are a dict from key tuple to a dict of non-key values by
column name. Range-partitioned tables keep their ranges on the first key column as
half-open ``[lo, hi)`` pairs (None: unbounded). A write batch is applied row by row
with Kudu's rules, plus the table layer's routing rule: a row whose key no range
partition covers fails with "No tablet covering the requested range partition".
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Key = tuple[Any, ...]
Row = dict[str, Any]
Range = tuple[int | None, int | None]

OPS = [
    "INSERT",
    "INSERT_IGNORE",
    "UPSERT",
    "UPSERT_IGNORE",
    "UPDATE",
    "UPDATE_IGNORE",
    "DELETE",
    "DELETE_IGNORE",
]

NO_TABLET = "No tablet covering the requested range partition"


@dataclass
class MCol:
    name: str
    type: str  # "INT64" or "STRING"
    nullable: bool = True
    default: Any = None


@dataclass
class WriteOutcome:
    errors: list[tuple[int, str, bool]]  # (row index, status, is the no-tablet error)
    applied: int
    ignored: int


def covers(r: Range, a: int) -> bool:
    lo, hi = r
    return (lo is None or lo <= a) and (hi is None or a < hi)


def overlaps(r1: Range, r2: Range) -> bool:
    lo1, hi1 = r1
    lo2, hi2 = r2
    below = hi1 is not None and lo2 is not None and hi1 <= lo2
    above = hi2 is not None and lo1 is not None and hi2 <= lo1
    return not (below or above)


@dataclass
class MTable:
    shape: str
    key_names: list[str]
    columns: list[MCol]  # non-key, in schema order
    num_hash: int  # tablets per range partition
    ranges: list[Range] | None  # None: no range partitioning
    rows: dict[Key, Row] = field(default_factory=dict)
    #: (timestamp, state after the batch) of the writes since the last DDL statement,
    #: and the state before the first of them.
    history: list[tuple[int, dict[Key, Row]]] = field(default_factory=list)
    base: dict[Key, Row] = field(default_factory=dict)

    # -- description -----------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [*self.key_names, *(c.name for c in self.columns)]

    def col(self, name: str) -> MCol:
        return next(c for c in self.columns if c.name == name)

    def has(self, name: str) -> bool:
        return name in self.names

    @property
    def num_tablets(self) -> int:
        return self.num_hash * (1 if self.ranges is None else len(self.ranges))

    def routable(self, a: int) -> bool:
        return self.ranges is None or any(covers(r, a) for r in self.ranges)

    def full_row(self, key: Key) -> Row:
        """The row with its key columns, by the current column names."""
        return {**dict(zip(self.key_names, key, strict=True)), **self.rows[key]}

    # -- history ---------------------------------------------------------------------------
    def reset_history(self) -> None:
        self.history = []
        self.base = copy.deepcopy(self.rows)

    def state_at(self, snapshot: int) -> dict[Key, Row]:
        """Rows visible at ``snapshot``: the state after the last write before it."""
        state = self.base
        for ts, st in self.history:
            if ts < snapshot:
                state = st
            else:
                break
        return state

    # -- writes ----------------------------------------------------------------------------
    def apply(
        self, ops: Sequence[str], batch: Sequence[tuple[Any, Any, Row]], present: Sequence[str]
    ) -> WriteOutcome:
        """Apply a batch of (op, a, b, values of ``present`` columns) rows in place."""
        errors: list[tuple[int, str, bool]] = []
        applied = ignored = 0
        pcols = [c for c in self.columns if c.name in present]
        for i, (op, (a, b, vals)) in enumerate(zip(ops, batch, strict=True)):
            if self.ranges is not None and not self.ranges:
                errors.append((i, "NotFound", True))  # no tablet at all
                continue
            if a is None or b is None:
                errors.append((i, "InvalidArgument", False))
                continue
            if not self.routable(a):
                errors.append((i, "NotFound", True))
                continue
            inserting = op.startswith(("INSERT", "UPSERT"))
            updating = op.startswith("UPDATE")
            bad = False
            for c in self.columns:
                if c.name in present:
                    if vals[c.name] is None and not c.nullable and (inserting or updating):
                        bad = True
                elif not c.nullable and c.default is None and inserting:
                    bad = True
            if updating and not pcols:
                bad = True
            if bad:
                errors.append((i, "InvalidArgument", False))
                continue
            key = (a, b)
            exists = key in self.rows
            ignore = op.endswith("_IGNORE")
            if op.startswith("INSERT"):
                if exists:
                    if ignore:
                        ignored += 1
                    else:
                        errors.append((i, "AlreadyPresent", False))
                    continue
                self.rows[key] = {
                    c.name: vals[c.name] if c.name in present else c.default for c in self.columns
                }
            elif op.startswith("UPSERT"):
                if exists:
                    for c in pcols:
                        self.rows[key][c.name] = vals[c.name]
                else:
                    self.rows[key] = {
                        c.name: vals[c.name] if c.name in present else c.default
                        for c in self.columns
                    }
            elif op.startswith(("UPDATE", "DELETE")):
                if not exists:
                    if ignore:
                        ignored += 1
                    else:
                        errors.append((i, "NotFound", False))
                    continue
                if updating:
                    for c in pcols:
                        self.rows[key][c.name] = vals[c.name]
                else:
                    del self.rows[key]
            applied += 1
        return WriteOutcome(errors, applied, ignored)

    def record(self, ts: int) -> None:
        self.history.append((ts, copy.deepcopy(self.rows)))

    # -- DDL -------------------------------------------------------------------------------
    def add_column(self, c: MCol) -> None:
        self.columns.append(c)
        for r in self.rows.values():
            r[c.name] = c.default
        self.reset_history()

    def drop_column(self, name: str) -> None:
        self.columns = [c for c in self.columns if c.name != name]
        for r in self.rows.values():
            del r[name]
        self.reset_history()

    def rename_column(self, old: str, new: str) -> None:
        if old in self.key_names:
            self.key_names = [new if k == old else k for k in self.key_names]
        else:
            self.col(old).name = new
            for r in self.rows.values():
                r[new] = r.pop(old)
        self.reset_history()

    def add_range(self, r: Range) -> None:
        assert self.ranges is not None
        self.ranges.append(r)
        self.reset_history()

    def drop_range(self, r: Range) -> None:
        assert self.ranges is not None
        self.ranges.remove(r)
        self.rows = {k: v for k, v in self.rows.items() if not covers(r, k[0])}
        self.reset_history()


def key_order(key: Key) -> tuple[int, bytes]:
    """Primary-key order of an (INT32, STRING) key: numeric, then bytewise."""
    return (key[0], key[1].encode())
