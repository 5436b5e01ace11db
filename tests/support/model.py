"""A plain-Python model of one tablet's semantics, the oracle for the state machine.

It applies a write batch row by row with Kudu's rules and keeps the full state after
every batch, so any snapshot and any diff between two snapshots can be answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Key = tuple[Any, ...]
Row = dict[str, Any]

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
INSERT_OPS = {"INSERT", "INSERT_IGNORE"}
UPSERT_OPS = {"UPSERT", "UPSERT_IGNORE"}
UPDATE_OPS = {"UPDATE", "UPDATE_IGNORE"}
DELETE_OPS = {"DELETE", "DELETE_IGNORE"}


@dataclass
class ModelColumn:
    name: str
    nullable: bool = True
    default: Any = None


@dataclass
class TabletModel:
    key_names: list[str]
    columns: list[ModelColumn]  # non-key columns
    rows: dict[Key, Row] = field(default_factory=dict)
    # (timestamp, state after the batch, keys changed by the batch)
    history: list[tuple[int, dict[Key, Row], set[Key]]] = field(default_factory=list)

    def apply(
        self, ts: int, ops: Sequence[str], batch: Sequence[Row], present: Sequence[str]
    ) -> list[tuple[int, str]]:
        """Apply a batch; returns the (row index, status) of every failed row."""
        errors: list[tuple[int, str]] = []
        touched: set[Key] = set()
        nonkey_present = [c for c in self.columns if c.name in present]
        for i, (op, row) in enumerate(zip(ops, batch, strict=True)):
            if any(row.get(k) is None for k in self.key_names):
                errors.append((i, "InvalidArgument"))
                continue
            key = tuple(row[k] for k in self.key_names)
            inserting = op in INSERT_OPS or op in UPSERT_OPS
            updating = op in UPDATE_OPS
            bad = False
            for c in self.columns:
                if c.name in present:
                    if row.get(c.name) is None and not c.nullable and (inserting or updating):
                        bad = True
                elif not c.nullable and c.default is None and inserting:
                    bad = True
            if updating and not nonkey_present:
                bad = True
            if bad:
                errors.append((i, "InvalidArgument"))
                continue
            exists = key in self.rows
            ignore = op.endswith("_IGNORE")
            if op in INSERT_OPS:
                if exists:
                    if not ignore:
                        errors.append((i, "AlreadyPresent"))
                    continue
                self.rows[key] = self._full(row, present)
                touched.add(key)
            elif op in UPSERT_OPS:
                if exists:
                    if nonkey_present:
                        for c in nonkey_present:
                            self.rows[key][c.name] = row.get(c.name)
                        touched.add(key)
                else:
                    self.rows[key] = self._full(row, present)
                    touched.add(key)
            elif op in UPDATE_OPS:
                if not exists:
                    if not ignore:
                        errors.append((i, "NotFound"))
                    continue
                for c in nonkey_present:
                    self.rows[key][c.name] = row.get(c.name)
                touched.add(key)
            elif op in DELETE_OPS:
                if not exists:
                    if not ignore:
                        errors.append((i, "NotFound"))
                    continue
                del self.rows[key]
                touched.add(key)
        self.history.append((ts, {k: dict(v) for k, v in self.rows.items()}, touched))
        return errors

    def _full(self, row: Row, present: Sequence[str]) -> Row:
        out: Row = {}
        for c in self.columns:
            out[c.name] = row.get(c.name) if c.name in present else c.default
        return out

    def state_at(self, snapshot: int) -> dict[Key, Row]:
        """Rows visible at a snapshot: the state after the last batch with ts < snapshot."""
        state: dict[Key, Row] = {}
        for ts, st, _ in self.history:
            if ts < snapshot:
                state = st
            else:
                break
        return state

    def diff(self, start: int, end: int) -> dict[Key, tuple[Row | None, bool]]:
        """Kudu's diff scan: key -> (values at end or None, is_deleted)."""
        changed: set[Key] = set()
        for ts, _, touched in self.history:
            if start <= ts < end:
                changed |= touched
        s0, s1 = self.state_at(start), self.state_at(end)
        out: dict[Key, tuple[Row | None, bool]] = {}
        for k in changed:
            if k not in s0 and k not in s1:
                continue
            out[k] = (s1.get(k), k not in s1)
        return out
