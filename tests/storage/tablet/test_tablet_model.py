"""Model-based test: random write batches of all eight operations (with duplicate,
missing and malformed rows) interleaved with flushes, delta flushes, minor and major
delta compactions, merging compactions (policy-chosen and random inputs), history GC,
reopen and crashes, and a clock the test moves forward past the history it keeps;
checked after every step against a plain Python model: latest scans, scans at every
earlier timestamp still inside the history (and a clear error before it), ordered and
unordered scans with random predicates and projections, and diff scans between random
pairs of timestamps."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kudusql.common.errors import ProgrammingError
from kudusql.common.hybrid_time import HybridClock, wall_micros
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.tablet import Tablet
from tests.support.model import OPS, ModelColumn, TabletModel

NONKEY = ["c", "d", "e"]

SCHEMA = Schema.build(
    [
        ColumnSchema("a", DataType.parse("INT32"), nullable=False),
        ColumnSchema("b", DataType.parse("STRING"), nullable=False),
        ColumnSchema("c", DataType.parse("INT64")),
        ColumnSchema("d", DataType.parse("STRING"), nullable=False, default="dflt"),
        ColumnSchema("e", DataType.parse("DOUBLE")),
    ],
    ["a", "b"],
)
ARROW = {"a": pa.int32(), "b": pa.string(), "c": pa.int64(), "d": pa.string(), "e": pa.float64()}
OPTIONS = TabletOptions(
    rows_per_page=4,
    rowset_target_bytes=300,
    sync=False,
    history_max_age_s=3600,
    block_cache_bytes=1 << 20,
    bulk_load_rows=3,  # all-INSERT batches of 3+ rows take the bulk-load path
    file_grace_s=0,
)

keys_a = st.integers(0, 2)
keys_b = st.sampled_from(["", "a", "a\x00", "\x00"])
row_st = st.fixed_dictionaries(
    {
        "a": st.one_of(*([keys_a] * 12), st.none()),
        "b": keys_b,
        "c": st.one_of(st.none(), st.integers(-5, 5)),
        "d": st.one_of(*([st.sampled_from(["x", "y", ""])] * 6), st.none()),
        "e": st.one_of(st.none(), st.floats(-10, 10, allow_nan=False)),
    }
)
batch_st = st.lists(st.tuples(st.sampled_from(OPS), row_st), min_size=1, max_size=8)
present_st = st.lists(st.sampled_from(NONKEY), unique=True, max_size=3)


def _rows(table: pa.Table, names: list[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for r in table.to_pylist():
        out[(r["a"], r["b"])] = {k: r[k] for k in names if k not in ("a", "b")}
    return out


class TabletMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="kudusql-sm-")
        self.offset_us = 0
        self.clock = HybridClock(lambda: wall_micros() + self.offset_us)
        self.tablet = Tablet.create(self.dir, SCHEMA, OPTIONS, clock=self.clock)
        self.model = TabletModel(
            ["a", "b"],
            [ModelColumn("c"), ModelColumn("d", nullable=False, default="dflt"), ModelColumn("e")],
        )
        self.timestamps: list[int] = []

    def teardown(self) -> None:
        if hasattr(self, "tablet"):
            self.tablet.close(flush=False)
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(batch=batch_st, present=present_st)
    def write(self, batch: list[tuple[str, dict[str, Any]]], present: list[str]) -> None:
        ops = [o for o, _ in batch]
        rows = [r for _, r in batch]
        names = ["a", "b", *present]
        data = pa.table(
            {n: pa.array([r[n] for r in rows], type=ARROW[n]) for n in names}
            | {"op": pa.array(ops, type=pa.string())}
        )
        res = self.tablet.write(data, op_column="op")
        expected = self.model.apply(res.timestamp, ops, rows, present)
        got = [(e.index, e.status) for e in res.errors]
        assert got == expected, (got, expected)
        self.timestamps.append(res.timestamp)

    @rule(
        op=st.sampled_from(OPS),
        rows=st.lists(row_st, min_size=1, max_size=8),
        present=present_st,
        python=st.booleans(),
    )
    def write_one_op(
        self, op: str, rows: list[dict[str, Any]], present: list[str], python: bool
    ) -> None:
        """A few rows with one operation: the row path (``write`` with Arrow values, or
        ``write_rows`` with Python values), which hands what it cannot decide (updates,
        reinserts, bad values, repeated keys) to the batch path."""
        names = ["a", "b", *present]
        if python:
            res = self.tablet.write_rows(names, [[r[n] for n in names] for r in rows], op)
        else:
            data = pa.table({n: pa.array([r[n] for r in rows], type=ARROW[n]) for n in names})
            res = self.tablet.write(data, op)
        expected = self.model.apply(res.timestamp, [op] * len(rows), rows, present)
        got = [(e.index, e.status) for e in res.errors]
        assert got == expected, (got, expected)
        self.timestamps.append(res.timestamp)

    write_one_op_more = rule(
        op=st.sampled_from(OPS),
        rows=st.lists(row_st, min_size=1, max_size=8),
        present=present_st,
        python=st.booleans(),
    )(write_one_op.hypothesis_stateful_rule.function)

    # Writes are drawn three times as often as each other rule.
    write_more = rule(batch=batch_st, present=present_st)(write.hypothesis_stateful_rule.function)
    write_even_more = rule(batch=batch_st, present=present_st)(
        write.hypothesis_stateful_rule.function
    )

    @rule(
        batch=st.lists(
            st.tuples(st.sampled_from(["INSERT", "INSERT_IGNORE"]), row_st), min_size=3, max_size=8
        ),
        present=present_st,
    )
    def bulk_insert(self, batch: list[tuple[str, dict[str, Any]]], present: list[str]) -> None:
        """All-INSERT batches of 3+ rows take the bulk-load path (straight to rowsets)."""
        self.write(batch, present)

    @rule(kind=st.sampled_from(["flush", "flush_deltas", "reopen", "flush_all", "crash"]))
    def maintenance(self, kind: str) -> None:
        if kind in ("flush", "flush_all"):
            self.tablet.flush()
        if kind in ("flush_deltas", "flush_all"):
            self.tablet.flush_deltas()
        if kind == "reopen":
            self.tablet.close()
            self.tablet = Tablet.open(self.dir, OPTIONS, clock=self.clock)
        if kind == "crash":  # drop all in-memory state without flushing, reopen from disk
            self.tablet.abandon()
            self.tablet = Tablet.open(self.dir, OPTIONS, clock=self.clock)

    def _rowset_ids(self) -> list[int]:
        return [r["id"] for r in self.tablet.rowsets_info() if r["kind"] == "diskrowset"]

    @rule(data=st.data())
    def compaction(self, data: st.DataObject) -> None:
        kind = data.draw(
            st.sampled_from(["minor", "major", "merge", "merge_policy", "gc", "all", "crash"])
        )
        t, ids = self.tablet, self._rowset_ids()
        if kind in ("minor", "major") and ids:
            rid = data.draw(st.sampled_from(ids))
            (t.minor_delta_compaction if kind == "minor" else t.major_delta_compaction)(rid)
        elif kind == "merge" and ids:
            t.compact(data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True)))
        elif kind == "merge_policy":
            t.compact()
        elif kind == "gc":
            t.gc_undo()
            t.gc_deleted_rowsets()
        elif kind == "all":
            t.run_maintenance()
        elif kind == "crash" and ids:  # merge, then lose memory: the result must be durable
            t.compact(ids)
            t.abandon()
            self.tablet = Tablet.open(self.dir, OPTIONS, clock=self.clock)

    @rule(minutes=st.sampled_from([1, 30, 59, 61, 90, 180]))
    def advance_clock(self, minutes: int) -> None:
        """Move the wall clock forward; history older than history_max_age_s (an hour)
        becomes ancient: scans before it fail, compactions and GC may drop it."""
        self.offset_us += minutes * 60 * 1_000_000

    def _held(self) -> list[int]:
        """Snapshots of interest still inside the kept history."""
        ahm = self.tablet.ancient_history_mark()
        return [x for t in self.timestamps for x in (t, t + 1) if x >= ahm]

    @invariant()
    def latest_matches(self) -> None:
        if not hasattr(self, "tablet"):
            return
        got = _rows(self.tablet.scan().read_all(), NONKEY)
        assert got == self.model.rows

    @precondition(lambda self: bool(getattr(self, "timestamps", None)))
    @rule()
    def time_travel(self) -> None:
        """Every snapshot seen so far still answers as it did while it is inside the
        kept history, and fails with a clear error once it is not."""
        held = self._held()
        for snap in held:
            got = _rows(self.tablet.scan(snapshot=snap).read_all(), NONKEY)
            assert got == self.model.state_at(snap), snap
        ancient = [t for t in self.timestamps if t < self.tablet.ancient_history_mark()]
        if ancient:
            with pytest.raises(ProgrammingError, match="ancient history mark"):
                self.tablet.scan(snapshot=ancient[-1])
            with pytest.raises(ProgrammingError, match="ancient history mark"):
                self.tablet.diff_scan(ancient[-1], self.tablet.latest_timestamp())

    @rule(
        data=st.data(),
        proj=st.lists(st.sampled_from(NONKEY), unique=True, max_size=3),
        ordered=st.booleans(),
    )
    def predicate_scan(self, data: st.DataObject, proj: list[str], ordered: bool) -> None:
        kind = data.draw(st.sampled_from(["c_range", "a_eq", "b_prefix", "c_null", "a_in", "key"]))
        if kind == "c_range":
            lo, hi = data.draw(st.integers(-6, 6)), data.draw(st.integers(-6, 6))
            preds = [ColumnPredicate.ge("c", lo), ColumnPredicate.lt("c", hi)]
            keep = lambda k, r: r["c"] is not None and lo <= r["c"] < hi  # noqa: E731
        elif kind == "a_eq":
            v = data.draw(keys_a)
            preds = [ColumnPredicate.eq("a", v)]
            keep = lambda k, r: k[0] == v  # noqa: E731
        elif kind == "b_prefix":
            p = data.draw(st.sampled_from(["a", "", "\x00"]))
            preds = [ColumnPredicate.prefix("b", p)]
            keep = lambda k, r: k[1].startswith(p)  # noqa: E731
        elif kind == "c_null":
            preds = [ColumnPredicate.is_null("c")]
            keep = lambda k, r: r["c"] is None  # noqa: E731
        elif kind == "a_in":
            vs = data.draw(st.lists(keys_a, max_size=3))
            preds = [ColumnPredicate.in_list("a", vs)]
            keep = lambda k, r: k[0] in vs  # noqa: E731
        else:
            va, vb = data.draw(keys_a), data.draw(keys_b)
            preds = [ColumnPredicate.eq("a", va), ColumnPredicate.ge("b", vb)]
            keep = lambda k, r: k[0] == va and k[1] >= vb  # noqa: E731
        snap = None
        expected_state = self.model.rows
        held = self._held()
        if held and data.draw(st.booleans()):
            snap = data.draw(st.sampled_from(held))
            expected_state = self.model.state_at(snap)
        cols = ["a", "b", *proj]
        table = self.tablet.scan(cols, preds, snapshot=snap, ordered=ordered).read_all()
        assert table.column_names == cols
        got_list = [(r["a"], r["b"]) for r in table.to_pylist()]
        if ordered:
            enc = [(a, b.encode()) for a, b in got_list]
            assert enc == sorted(enc)
        got = _rows(table, proj)
        exp = {k: {c: v[c] for c in proj} for k, v in expected_state.items() if keep(k, v)}
        assert got == exp
        assert len(got_list) == len(got)

    @rule(a=keys_a, b=keys_b, proj=st.lists(st.sampled_from(NONKEY), unique=True, max_size=3))
    def point_lookup(self, a: int, b: str, proj: list[str]) -> None:
        got = self.tablet.lookup((a, b), proj)
        exp = self.model.rows.get((a, b))
        assert got == (None if exp is None else {c: exp[c] for c in proj})

    @precondition(lambda self: len(getattr(self, "timestamps", [])) >= 1)
    @rule(data=st.data())
    def diff_scan(self, data: st.DataObject) -> None:
        cands = self._held() or [self.tablet.latest_timestamp()]
        s = data.draw(st.sampled_from(cands))
        e = data.draw(st.sampled_from(cands))
        s, e = min(s, e), max(s, e)
        table = self.tablet.diff_scan(s, e).read_all()
        got: dict[tuple[Any, ...], tuple[Any, bool]] = {}
        for r in table.to_pylist():
            k = (r["a"], r["b"])
            assert k not in got, f"duplicate key {k} in diff scan"
            got[k] = ({c: r[c] for c in NONKEY} if not r["is_deleted"] else None, r["is_deleted"])
        exp = self.model.diff(s, e)
        assert got == exp


TabletMachine.TestCase.settings = settings(
    max_examples=int(__import__("os").environ.get("KUDUSQL_SM_EXAMPLES", "40")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestTabletStateMachine = TabletMachine.TestCase
