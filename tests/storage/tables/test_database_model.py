"""Model-based test of a Database: several tables with multi-tablet partitioning (hash,
range, hash and range, two hash dimensions, none) created and dropped at random, ALTER
TABLE (add nullable and NOT NULL-with-default columns, drop, drop and re-add under the
same name, rename columns (key columns too) and tables, add and drop range partitions,
multi-step ALTERs that fail as a whole), write batches of all eight operations with
duplicate, missing, malformed and unroutable rows, atomic batches across tablets,
flushes and compactions, reopen and crash-reopen; checked after every step against a
plain Python model (``tests/support/database_model.py``): the catalog, the tablet
directories on disk, unordered and ordered full scans, and (as rules) point lookups,
predicate scans with projections and scans and lookups at earlier snapshots.

``KUDUSQL_SM_EXAMPLES`` sets the number of examples (default 15).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kudusql.common.errors import DataError, IntegrityError, ProgrammingError
from kudusql.common.options import TabletOptions
from kudusql.common.predicates import ColumnPredicate
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tables import catalog
from kudusql.storage.tables.alter import (
    AddColumn,
    AddRangePartition,
    AlterStep,
    DropColumn,
    DropRangePartition,
    RenameColumn,
    RenameTable,
)
from kudusql.storage.tables.database import Database, connect
from kudusql.storage.tables.partition import HashDimension, PartitionSchema, RangeBounds
from kudusql.storage.tables.table import Table
from tests.support.database_model import (
    NO_TABLET,
    OPS,
    Key,
    MCol,
    MTable,
    Range,
    Row,
    covers,
    key_order,
    overlaps,
)

OPTIONS = TabletOptions(
    rows_per_page=4,
    rowset_target_bytes=300,
    sync=False,
    history_max_age_s=3600,
    block_cache_bytes=1 << 20,
    bulk_load_rows=3,  # all-INSERT parts of 3+ rows take the bulk-load path
    file_grace_s=0,
    threads=2,
)

TABLE_NAMES = ["t0", "t1", "t2", "t3"]
ALL_NAMES = ["a", "b", "k", "c", "d", "e", "f", "g"]
NONKEY_NAMES = ["c", "d", "e", "f", "g"]
SHAPES = ["single", "hash", "two_hash", "range", "hash_range"]
RANGE_POOL: list[Range] = [
    (None, 0),
    (-10, 0),
    (0, 10),
    (10, 20),
    (20, 30),
    (30, 40),
    (0, 20),
    (20, 40),
    (40, 50),
    (40, None),
]
ARROW = {"INT64": pa.int64(), "STRING": pa.string()}

HOT_A = [-5, 1, 5, 15, 25, 35, 45]
a_st = st.one_of(*([st.sampled_from(HOT_A)] * 12), *([st.integers(-12, 52)] * 3), st.none())
b_st = st.one_of(*([st.sampled_from(["", "a", "b\x00", "zz"])] * 15), st.none())


def value_st(typ: str, allow_null: bool = True) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any] = (
        st.integers(-5, 5) if typ == "INT64" else st.sampled_from(["x", "y", ""])
    )
    return st.one_of(*([base] * 5), st.none()) if allow_null else base


def default_st(typ: str) -> st.SearchStrategy[Any]:
    return st.integers(-9, 9) if typ == "INT64" else st.sampled_from(["p", "q"])


def bounds(r: Range) -> RangeBounds:
    lo, hi = r
    return RangeBounds(None if lo is None else (lo,), None if hi is None else (hi,))


def make_table(shape: str, with_required: bool) -> tuple[Schema, PartitionSchema, MTable]:
    cols = [
        ColumnSchema("a", DataType.parse("INT32"), nullable=False),
        ColumnSchema("b", DataType.parse("STRING"), nullable=False),
        ColumnSchema("c", DataType.parse("INT64")),
        ColumnSchema("d", DataType.parse("STRING"), nullable=False, default="dflt"),
    ]
    mcols = [MCol("c", "INT64"), MCol("d", "STRING", nullable=False, default="dflt")]
    if with_required:
        cols.append(ColumnSchema("e", DataType.parse("INT64"), nullable=False))
        mcols.append(MCol("e", "INT64", nullable=False))
    schema = Schema.build(cols, ["a", "b"])
    ranges: list[Range] | None = None
    num_hash = 1
    if shape == "single":
        ps = PartitionSchema.create(schema)
    elif shape == "hash":
        ps = PartitionSchema.create(schema, [HashDimension(("a", "b"), 3)])
        num_hash = 3
    elif shape == "two_hash":
        ps = PartitionSchema.create(
            schema, [HashDimension(("a",), 2), HashDimension(("b",), 2, seed=7)]
        )
        num_hash = 4
    elif shape == "range":
        ranges = [(0, 10), (10, 20), (30, 40)]
        ps = PartitionSchema.create(schema, (), ("a",), [bounds(r) for r in ranges])
    else:
        ranges = [(0, 20), (20, 40)]
        ps = PartitionSchema.create(
            schema, [HashDimension(("b",), 2)], ("a",), [bounds(r) for r in ranges]
        )
        num_hash = 2
    return schema, ps, MTable(shape, ["a", "b"], mcols, num_hash, ranges)


def batch_table(
    m: MTable, ops: list[str], rows: list[tuple[Any, Any, Row]], present: list[str]
) -> pa.Table:
    k0, k1 = m.key_names
    data: dict[str, pa.Array[Any]] = {
        k0: pa.array([r[0] for r in rows], pa.int32()),
        k1: pa.array([r[1] for r in rows], pa.string()),
    }
    for n in present:
        data[n] = pa.array([r[2][n] for r in rows], ARROW[m.col(n).type])
    data["__op"] = pa.array(ops, pa.string())
    return pa.table(data)


def rows_of(m: MTable, table: pa.Table) -> dict[Key, Row]:
    k0, k1 = m.key_names
    out: dict[Key, Row] = {}
    for r in table.to_pylist():
        key = (r[k0], r[k1])
        assert key not in out, f"key {key} returned twice"
        out[key] = {c.name: r[c.name] for c in m.columns}
    return out


class DatabaseMachine(RuleBasedStateMachine):
    def _has_tables(self) -> bool:
        return bool(getattr(self, "model", None))

    @initialize(shape=st.sampled_from(SHAPES), req=st.sampled_from([False, False, True]))
    def setup(self, shape: str, req: bool) -> None:
        self.path = tempfile.mkdtemp(prefix="kudusql-dbsm-")
        self.db = Database(self.path, OPTIONS, maintenance=False)
        self.model: dict[str, MTable] = {}
        self.handles: dict[str, Table] = {}
        self.create_table("t0", shape, req)

    # -- rules: each draws one of a few related steps (fewer rules make Hypothesis's
    # swarm testing, which disables a random subset of rules per example, keep writes on)
    @rule(data=st.data(), kind=st.sampled_from(["create", "create", "drop", "rename"]))
    def table_ddl(self, data: st.DataObject, kind: str) -> None:
        if kind == "create" or not self.model:
            self.create_table(
                data.draw(st.sampled_from(TABLE_NAMES), label="name"),
                data.draw(st.sampled_from(SHAPES), label="shape"),
                data.draw(st.sampled_from([False, False, True]), label="required column"),
            )
        elif kind == "drop":
            self.drop_table(data)
        else:
            self.rename_table(data)

    @precondition(_has_tables)
    @rule(
        data=st.data(),
        kind=st.sampled_from(["add", "add", "drop", "drop_readd", "rename", "failing"]),
    )
    def column_ddl(self, data: st.DataObject, kind: str) -> None:
        {
            "add": self.add_column,
            "drop": self.drop_column,
            "drop_readd": self.drop_and_readd_column,
            "rename": self.rename_column,
            "failing": self.failing_multi_step_alter,
        }[kind](data)

    @precondition(
        lambda self: any(m.ranges is not None for m in getattr(self, "model", {}).values())
    )
    @rule(data=st.data(), add=st.booleans())
    def range_ddl(self, data: st.DataObject, add: bool) -> None:
        if add:
            self.add_range_partition(data)
        else:
            self.drop_range_partition(data)

    @precondition(_has_tables)
    @rule(data=st.data(), kind=st.sampled_from(["lookup", "predicates", "predicates", "history"]))
    def read(self, data: st.DataObject, kind: str) -> None:
        if kind == "lookup":
            self.lookup(data)
        elif kind == "predicates":
            self.predicate_scan(data)
        elif any(m.history for m in self.model.values()):
            self.time_travel(data)

    read_more = precondition(_has_tables)(
        rule(
            data=st.data(), kind=st.sampled_from(["lookup", "predicates", "predicates", "history"])
        )(
            read.hypothesis_stateful_rule.function  # type: ignore[attr-defined]
        )
    )

    def teardown(self) -> None:
        if hasattr(self, "db"):
            self.db.close()
            shutil.rmtree(self.path, ignore_errors=True)

    def _pick(self, data: st.DataObject, pred: Any = None) -> tuple[str, MTable]:
        names = [n for n in sorted(self.model) if pred is None or pred(self.model[n])]
        name = data.draw(st.sampled_from(names))
        return name, self.model[name]

    # -- DDL: tables -------------------------------------------------------------------------
    def create_table(self, name: str, shape: str, req: bool) -> None:
        schema, ps, m = make_table(shape, req)
        if name in self.model:
            with pytest.raises(ProgrammingError, match="already exists"):
                self.db.create_table(name, schema, ps)
            return
        t = self.db.create_table(name, schema, ps)
        assert t.num_tablets == m.num_tablets
        m.reset_history()
        self.model[name] = m
        self.handles[name] = t

    def drop_table(self, data: st.DataObject) -> None:
        name, _ = self._pick(data)
        handle = self.handles.pop(name)
        self.db.drop_table(name)
        del self.model[name]
        with pytest.raises(ProgrammingError):
            handle.to_arrow()
        with pytest.raises(ProgrammingError, match="does not exist"):
            self.db.table(name)
        with pytest.raises(ProgrammingError, match="does not exist"):
            self.db.drop_table(name)
        self.db.drop_table(name, if_exists=True)

    def rename_table(self, data: st.DataObject) -> None:
        name, _ = self._pick(data)
        new = data.draw(st.sampled_from(TABLE_NAMES), label="new name")
        if new in self.model and new != name:
            with pytest.raises(ProgrammingError, match="already exists"):
                self.db.alter_table(name, [RenameTable(new)])
            return
        self.db.alter_table(name, [RenameTable(new)])
        handle = self.handles.pop(name)
        assert handle.name == new  # handles follow the table's id
        self.handles[new] = handle
        self.model[new] = self.model.pop(name)
        if new != name:
            assert not self.db.has_table(name)

    # -- DDL: columns ------------------------------------------------------------------------
    def _alter(self, name: str, steps: list[AlterStep], ok: bool) -> None:
        before = self.db.table(name).schema
        if not ok:
            with pytest.raises(ProgrammingError):
                self.db.alter_table(name, steps)
            assert self.db.table(name).schema == before  # all steps or none
            return
        self.db.alter_table(name, steps)

    def add_column(self, data: st.DataObject) -> None:
        name, m = self._pick(data)
        col = data.draw(st.sampled_from(["a", *NONKEY_NAMES]), label="column")
        typ = data.draw(st.sampled_from(["INT64", "STRING"]), label="type")
        nullable = data.draw(st.booleans(), label="nullable")
        with_default = data.draw(st.booleans(), label="with default")
        default = data.draw(default_st(typ)) if with_default else None
        cs = ColumnSchema(col, DataType.parse(typ), nullable=nullable, default=default)
        ok = not m.has(col) and (nullable or default is not None)
        self._alter(name, [AddColumn(cs)], ok)
        if ok:
            m.add_column(MCol(col, typ, nullable, default))

    def drop_column(self, data: st.DataObject) -> None:
        name, m = self._pick(data)
        col = data.draw(st.sampled_from(ALL_NAMES), label="column")
        ok = m.has(col) and col not in m.key_names
        self._alter(name, [DropColumn(col)], ok)
        if ok:
            m.drop_column(col)

    def drop_and_readd_column(self, data: st.DataObject) -> None:
        """Old values of a dropped column never come back under a new column of the
        same name: rows read the new column's default."""
        if not any(m.columns for m in self.model.values()):
            return
        name, m = self._pick(data, lambda m: bool(m.columns))
        col = data.draw(st.sampled_from([c.name for c in m.columns]), label="column")
        typ = data.draw(st.sampled_from(["INT64", "STRING"]), label="type")
        nullable = data.draw(st.booleans(), label="nullable")
        one_alter = data.draw(st.booleans(), label="in one ALTER")
        default = data.draw(st.one_of(st.none(), default_st(typ)) if nullable else default_st(typ))
        cs = ColumnSchema(col, DataType.parse(typ), nullable=nullable, default=default)
        if one_alter:
            self.db.alter_table(name, [DropColumn(col), AddColumn(cs)])
        else:
            self.db.alter_table(name, [DropColumn(col)])
            self.db.alter_table(name, [AddColumn(cs)])
        m.drop_column(col)
        m.add_column(MCol(col, typ, nullable, default))
        got = self.db.table(name).to_arrow([col]).column(col).to_pylist()
        assert got == [default] * len(m.rows)

    def rename_column(self, data: st.DataObject) -> None:
        name, m = self._pick(data)
        old = data.draw(st.sampled_from(m.names), label="column")
        new = data.draw(st.sampled_from(ALL_NAMES), label="new name")
        ok = new == old or not m.has(new)
        self._alter(name, [RenameColumn(old, new)], ok)
        if ok:
            m.rename_column(old, new)

    def failing_multi_step_alter(self, data: st.DataObject) -> None:
        """An ALTER whose last step fails changes nothing, not even its first steps."""
        name, m = self._pick(data)
        free = [n for n in NONKEY_NAMES if not m.has(n)]
        if not free:
            return
        new = free[0]
        steps: list[AlterStep] = [
            AddColumn(ColumnSchema(new, DataType.parse("INT64"))),
            RenameTable(name + "_renamed"),
            DropColumn(m.key_names[0]),  # a key column: always refused
        ]
        ntablets = self.db.table(name).num_tablets
        self._alter(name, steps, ok=False)
        assert self.db.has_table(name) and not self.db.has_table(name + "_renamed")
        assert self.db.table(name).num_tablets == ntablets

    # -- DDL: range partitions ---------------------------------------------------------------
    def add_range_partition(self, data: st.DataObject) -> None:
        name, m = self._pick(data, lambda m: m.ranges is not None)
        r = data.draw(st.sampled_from(RANGE_POOL), label="range")
        assert m.ranges is not None
        ok = not any(overlaps(r, x) for x in m.ranges)
        ntablets = self.db.table(name).num_tablets
        if not ok:
            with pytest.raises(ProgrammingError):
                self.db.alter_table(name, [AddRangePartition(bounds(r))])
            assert self.db.table(name).num_tablets == ntablets
            return
        self.db.alter_table(name, [AddRangePartition(bounds(r))])
        m.add_range(r)
        assert self.db.table(name).num_tablets == ntablets + m.num_hash

    def drop_range_partition(self, data: st.DataObject) -> None:
        """Dropping a range partition deletes its rows; writes to it then fail per row."""
        name, m = self._pick(data, lambda m: m.ranges is not None)
        r = data.draw(st.sampled_from(RANGE_POOL), label="range")
        existing = data.draw(st.booleans(), label="an existing range")
        assert m.ranges is not None
        if existing and m.ranges:
            full = [x for x in m.ranges if any(covers(x, k[0]) for k in m.rows)]
            r = data.draw(st.sampled_from(full or m.ranges))
        event(f"drop range holding {min(3, sum(covers(r, k[0]) for k in m.rows))}+ rows")
        if r not in m.ranges:
            with pytest.raises(ProgrammingError, match="no range partition"):
                self.db.alter_table(name, [DropRangePartition(bounds(r))])
            return
        self.db.alter_table(name, [DropRangePartition(bounds(r))])
        m.drop_range(r)
        # A write into the dropped range now fails with Kudu's per-row NotFound.
        a = r[0] if r[0] is not None else r[1] - 1  # type: ignore[operator]
        if not m.routable(a):
            t = self.db.table(name)
            data_t = batch_table(m, ["INSERT"], [(a, "a", {})], [])
            res = t.write(data_t, op_column="__op")
            assert [(e.index, e.status, e.message) for e in res.errors] == [
                (0, "NotFound", NO_TABLET)
            ]
            assert res.applied == 0
            m.record(res.timestamp)

    # -- writes ------------------------------------------------------------------------------
    def _draw_batch(
        self, data: st.DataObject, m: MTable
    ) -> tuple[list[str], list[tuple[Any, Any, Row]], list[str]]:
        names = [c.name for c in m.columns]
        present = data.draw(st.lists(st.sampled_from(names), unique=True)) if names else []
        vals = st.fixed_dictionaries(
            {
                n: value_st(m.col(n).type, m.col(n).nullable or data.draw(st.booleans()))
                for n in present
            }
        )
        batch = data.draw(
            st.lists(
                st.tuples(st.sampled_from(OPS), st.tuples(a_st, b_st, vals)),
                min_size=1,
                max_size=12,
            )
        )
        return [o for o, _ in batch], [r for _, r in batch], present

    def _draw_load(
        self, data: st.DataObject, m: MTable
    ) -> tuple[list[str], list[tuple[Any, Any, Row]], list[str]]:
        """A mostly valid batch of INSERT and UPSERT rows giving every column."""
        present = [c.name for c in m.columns]
        vals = st.fixed_dictionaries(
            {c.name: value_st(c.type, allow_null=c.nullable) for c in m.columns}
        )
        hot = [a for a in HOT_A if m.routable(a)]
        a_good = st.one_of(st.sampled_from(hot), st.integers(-12, 52)) if hot else a_st
        batch = data.draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["INSERT", "UPSERT", "UPSERT", "INSERT_IGNORE"]),
                    st.tuples(a_good, st.sampled_from(["", "a", "b\x00", "zz"]), vals),
                ),
                min_size=3,
                max_size=14,
            )
        )
        return [o for o, _ in batch], [r for _, r in batch], present

    @precondition(_has_tables)
    @rule(data=st.data())
    def batch_write(self, data: st.DataObject) -> None:
        name, m = self._pick(data)
        if data.draw(st.integers(0, 3)) == 0:
            ops, rows, present = self._draw_load(data, m)
        else:
            ops, rows, present = self._draw_batch(data, m)
        table = batch_table(m, ops, rows, present)
        if data.draw(st.integers(0, 15), label="drop a key column") == 0:
            # A batch without a key column: every row fails (rows that cannot be routed
            # go to the first tablet, which rejects them), unless there is no tablet.
            table = table.drop_columns([data.draw(st.sampled_from(m.key_names))])
            res = self.handles[name].write(table, op_column="__op")
            status = "NotFound" if m.ranges == [] else "InvalidArgument"
            assert [(e.index, e.status) for e in res.errors] == [
                (i, status) for i in range(len(ops))
            ]
            assert (res.applied, res.ignored) == (0, 0)
            m.record(res.timestamp)
            return
        res = self.handles[name].write(table, op_column="__op")
        exp = m.apply(ops, rows, present)
        for _, status, no_tablet in exp.errors:
            event(f"write error {'no tablet' if no_tablet else status}")
        event(f"write applied {min(exp.applied, 3)}+ rows")
        got = [(e.index, e.status) for e in res.errors]
        assert got == [(i, s) for i, s, _ in exp.errors], (got, exp.errors)
        for e, (_, _, no_tablet) in zip(res.errors, exp.errors, strict=True):
            assert (e.message == NO_TABLET) == no_tablet, e
        assert (res.applied, res.ignored) == (exp.applied, exp.ignored)
        m.record(res.timestamp)

    # Writes are drawn twice as often as each other rule.
    write_more = precondition(_has_tables)(
        rule(data=st.data())(batch_write.hypothesis_stateful_rule.function)  # type: ignore[attr-defined]
    )

    @precondition(_has_tables)
    @rule(
        data=st.data(),
        bad=st.sampled_from(["none", "none", "dup", "missing", "unrouted", "null_key", "null"]),
    )
    def atomic_write(self, data: st.DataObject, bad: str) -> None:
        """An atomic batch across tablets applies everywhere, or (one bad row) nowhere."""
        name, m = self._pick(data)
        routable = [a for a in range(-12, 53) if m.routable(a)]
        if not routable:
            return
        required = [c.name for c in m.columns if not c.nullable and c.default is None]
        optional = [c.name for c in m.columns if c.name not in required]
        present = required + (
            data.draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []
        )
        if not optional and not required:
            present = []
        vals = st.fixed_dictionaries(
            {n: value_st(m.col(n).type, allow_null=m.col(n).nullable) for n in present}
        )
        fresh = st.tuples(st.sampled_from(routable), st.sampled_from(["", "a", "zz", "q"]))
        existing = list(m.rows)
        good_ops = ["INSERT", "UPSERT"] + (["UPDATE", "DELETE"] if existing and present else [])
        rows: list[tuple[Any, Any, Row]] = []
        ops: list[str] = []
        seen: set[Key] = set()
        for _ in range(data.draw(st.integers(2, 8))):
            op = data.draw(st.sampled_from(good_ops))
            key = data.draw(st.sampled_from(existing) if op in ("UPDATE", "DELETE") else fresh)
            if key in seen or (op == "INSERT" and key in m.rows):
                continue
            seen.add(key)
            rows.append((key[0], key[1], data.draw(vals)))
            ops.append(op)
        pos = data.draw(st.integers(0, len(rows)))
        if bad == "dup" and existing:
            k = data.draw(st.sampled_from(existing))
            rows.insert(pos, (k[0], k[1], data.draw(vals)))
            ops.insert(pos, "INSERT")
        elif bad == "missing":
            k = data.draw(fresh)
            if k not in m.rows and k not in seen:
                rows.insert(pos, (k[0], k[1], data.draw(vals)))
                ops.insert(pos, data.draw(st.sampled_from(["UPDATE", "DELETE"])))
        elif bad == "unrouted" and len(routable) < 65:
            a = data.draw(st.sampled_from([a for a in range(-12, 53) if not m.routable(a)]))
            rows.insert(pos, (a, "a", data.draw(vals)))
            ops.insert(pos, "UPSERT")
        elif bad == "null_key":
            rows.insert(pos, (None, "a", data.draw(vals)))
            ops.insert(pos, "UPSERT")
        elif bad == "null":
            notnull = [n for n in present if not m.col(n).nullable]
            k = data.draw(fresh)
            if notnull and k not in m.rows and k not in seen:
                v = dict(data.draw(vals))
                v[notnull[0]] = None
                rows.insert(pos, (k[0], k[1], v))
                ops.insert(pos, "INSERT")
        if not rows:
            return
        trial = MTable(m.shape, m.key_names, m.columns, m.num_hash, m.ranges)
        trial.rows = {k: dict(v) for k, v in m.rows.items()}
        exp = trial.apply(ops, rows, present)
        table = batch_table(m, ops, rows, present)
        before = self.handles[name].to_arrow()
        if exp.errors:
            if any(no_tablet for _, _, no_tablet in exp.errors):
                kind: Any = DataError
            elif any(s in ("AlreadyPresent", "NotFound") for _, s, _ in exp.errors):
                kind = IntegrityError
            else:
                kind = DataError
            event(f"atomic rejected ({bad})")
            with pytest.raises(kind, match="atomic write batch rejected"):
                self.handles[name].write(table, op_column="__op", atomic=True)
            assert self.handles[name].to_arrow().sort_by(
                [(n, "ascending") for n in m.key_names]
            ) == before.sort_by([(n, "ascending") for n in m.key_names])
            return
        event(f"atomic applied ({bad})")
        res = self.handles[name].write(table, op_column="__op", atomic=True)
        assert res.errors == [] and res.applied == len(rows)
        m.rows = trial.rows
        m.record(res.timestamp)

    # -- maintenance and lifecycle -----------------------------------------------------------
    @precondition(_has_tables)
    @rule(
        data=st.data(),
        kind=st.sampled_from(["flush", "table", "db", "flush+table", "gc", "reopen", "reopen"]),
    )
    def maintenance(self, data: st.DataObject, kind: str) -> None:
        if kind == "reopen":
            self.reopen(
                data.draw(st.booleans(), label="crash"), data.draw(st.booleans(), label="connect")
            )
            return
        name, _ = self._pick(data)
        t = self.handles[name]
        if kind in ("flush", "flush+table"):
            t.flush()
        if kind in ("table", "flush+table"):
            t.run_maintenance()
        if kind == "db":
            self.db.run_maintenance()
        if kind == "gc":
            t.run_maintenance(flush=False, compact=False)

    def reopen(self, crash: bool, via_connect: bool) -> None:
        """Close (or drop as a crash would) and reopen: everything persists."""
        if crash:
            self.db.abandon()
        else:
            self.db.close()
        old = self.handles
        with pytest.raises(ProgrammingError, match="closed"):
            self.db.table_names()
        if via_connect:
            self.db = connect(self.path, options=OPTIONS, maintenance=False, create=False)
        else:
            self.db = Database(self.path, OPTIONS, maintenance=False)
        self.handles = {n: self.db.table(n) for n in self.model}
        for n, h in self.handles.items():
            assert h.id == old[n].id

    # -- reads -------------------------------------------------------------------------------
    @invariant()
    def catalog_matches(self) -> None:
        if not hasattr(self, "db"):
            return
        assert self.db.table_names() == sorted(self.model)
        want_dirs = set()
        for name, m in self.model.items():
            t = self.db.table(name)
            assert t.schema.names == m.names
            assert t.schema.key_names == m.key_names
            assert t.num_tablets == m.num_tablets
            want_dirs |= {
                os.path.basename(catalog.tablet_path(self.path, e.id)) for e in t.meta.tablets
            }
        assert set(os.listdir(os.path.join(self.path, catalog.TABLETS_DIR))) == want_dirs

    @invariant()
    def full_scans_match(self) -> None:
        if not hasattr(self, "db"):
            return
        for name, m in self.model.items():
            t = self.handles[name]
            assert rows_of(m, t.to_arrow()) == m.rows
            ordered = t.to_arrow(ordered=True)
            keys = [(r[m.key_names[0]], r[m.key_names[1]]) for r in ordered.to_pylist()]
            assert keys == sorted(m.rows, key=key_order)
            assert rows_of(m, ordered) == m.rows
            assert t.count_rows() == len(m.rows)

    def lookup(self, data: st.DataObject) -> None:
        name, m = self._pick(data)
        keys = list(m.rows)
        existing = data.draw(st.booleans(), label="an existing key")
        if keys and existing:
            key = data.draw(st.sampled_from(keys))
        else:
            key = (data.draw(st.integers(-12, 52)), data.draw(st.sampled_from(["", "a", "q"])))
        cols = data.draw(st.one_of(st.none(), st.lists(st.sampled_from(m.names), unique=True)))
        got = self.handles[name].lookup(key, cols)
        if key not in m.rows:
            assert got is None
            return
        full = m.full_row(key)
        assert got == (full if cols is None else {c: full[c] for c in cols})

    def predicate_scan(self, data: st.DataObject) -> None:
        name, m = self._pick(data)
        ordered = data.draw(st.booleans(), label="ordered")
        ka, kb = m.key_names
        ints = [c.name for c in m.columns if c.type == "INT64"]
        strs = [c.name for c in m.columns if c.type == "STRING"]
        kinds = ["a_eq", "a_range", "b_eq", "a_in", "key_eq"]
        kinds += ["int_eq", "null"] if ints else []
        kinds += ["str_eq"] if strs else []
        kind = data.draw(st.sampled_from(kinds))
        preds: list[ColumnPredicate]
        keep: Callable[[Key, Row], bool]
        if kind == "a_eq":
            v = data.draw(st.integers(-12, 52))
            preds = [ColumnPredicate.eq(ka, v)]
            keep = lambda k, r: k[0] == v  # noqa: E731
        elif kind == "a_range":
            lo, hi = data.draw(st.integers(-15, 55)), data.draw(st.integers(-15, 55))
            preds = [ColumnPredicate.ge(ka, lo), ColumnPredicate.lt(ka, hi)]
            keep = lambda k, r: lo <= k[0] < hi  # noqa: E731
        elif kind == "b_eq":
            s = data.draw(st.sampled_from(["", "a", "b\x00", "zz", "q"]))
            preds = [ColumnPredicate.eq(kb, s)]
            keep = lambda k, r: k[1] == s  # noqa: E731
        elif kind == "a_in":
            vs = data.draw(st.lists(st.sampled_from(HOT_A), max_size=3))
            preds = [ColumnPredicate.in_list(ka, vs)]
            keep = lambda k, r: k[0] in vs  # noqa: E731
        elif kind == "key_eq":
            key = data.draw(st.sampled_from(list(m.rows))) if m.rows else (1, "a")
            preds = [ColumnPredicate.eq(ka, key[0]), ColumnPredicate.eq(kb, key[1])]
            keep = lambda k, r: k == key  # noqa: E731
        elif kind == "int_eq":
            c, v = data.draw(st.sampled_from(ints)), data.draw(st.integers(-9, 9))
            preds = [ColumnPredicate.eq(c, v)]
            keep = lambda k, r: r[c] == v  # noqa: E731
        elif kind == "null":
            c = data.draw(st.sampled_from(ints))
            preds = [ColumnPredicate.is_null(c)]
            keep = lambda k, r: r[c] is None  # noqa: E731
        else:
            c, s = data.draw(st.sampled_from(strs)), data.draw(st.sampled_from(["x", "", "p"]))
            preds = [ColumnPredicate.eq(c, s)]
            keep = lambda k, r: r[c] == s  # noqa: E731
        state, snap = m.rows, None
        at_snapshot = data.draw(st.booleans(), label="at an earlier snapshot")
        if m.history and at_snapshot:
            ts = data.draw(st.sampled_from([h[0] for h in m.history]))
            snap = ts + data.draw(st.integers(0, 1))
            state = m.state_at(snap)
        proj = data.draw(st.lists(st.sampled_from(m.names), unique=True, min_size=1))
        if ordered:
            proj = [k for k in m.key_names if k not in proj] + proj
        got = self.handles[name].to_arrow(proj, preds, snapshot=snap, ordered=ordered)
        assert got.column_names == proj
        expected = [
            {**dict(zip(m.key_names, k, strict=True)), **r} for k, r in state.items() if keep(k, r)
        ]
        assert Counter(tuple(r[c] for c in proj) for r in got.to_pylist()) == Counter(
            tuple(r[c] for c in proj) for r in expected
        ), (kind, preds, snap)
        if ordered:
            keys = [(r[ka], r[kb]) for r in got.to_pylist()]
            assert keys == sorted(keys, key=key_order)

    def time_travel(self, data: st.DataObject) -> None:
        """Scans and lookups at the timestamp of an earlier write see the state before it,
        and one tick later the state after it."""
        name, m = self._pick(data, lambda m: bool(m.history))
        i = data.draw(st.integers(0, len(m.history) - 1))
        ts, after = m.history[i]
        t = self.handles[name]
        assert rows_of(m, t.to_arrow(snapshot=ts + 1)) == after
        assert rows_of(m, t.to_arrow(snapshot=ts, ordered=True)) == m.state_at(ts)
        if after:
            key = data.draw(st.sampled_from(sorted(after, key=key_order)))
            got = t.lookup(key, [c.name for c in m.columns], snapshot=ts + 1)
            assert got == after[key]


DatabaseMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("KUDUSQL_SM_EXAMPLES", "15")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestDatabaseStateMachine = DatabaseMachine.TestCase


def test_range_partition_rows_outside_and_readd() -> None:
    """A dropped range's rows stay gone when a range covering the same keys is added
    back, and a range partition on an empty table of ranges routes nothing."""
    path = tempfile.mkdtemp(prefix="kudusql-db-")
    try:
        with Database(path, OPTIONS, maintenance=False) as db:
            schema, ps, m = make_table("hash_range", False)
            t = db.create_table("t", schema, ps)
            rows = [(a, b, {"c": a}) for a in (1, 19, 20, 39) for b in ("a", "zz")]
            res = t.write(batch_table(m, ["INSERT"] * len(rows), rows, ["c"]), op_column="__op")
            assert res.applied == 8 and not res.errors
            t.flush()
            db.alter_table("t", [DropRangePartition(bounds((0, 20)))])
            db.alter_table("t", [AddRangePartition(bounds((0, 20)))])
            got = sorted((r["a"], r["b"]) for r in t.to_arrow().to_pylist())
            assert got == [(20, "a"), (20, "zz"), (39, "a"), (39, "zz")]
            assert t.lookup((1, "a")) is None
            db.alter_table("t", [DropRangePartition(bounds((0, 20)))])
            db.alter_table("t", [DropRangePartition(bounds((20, 40)))])
            assert t.num_tablets == 0 and t.to_arrow().num_rows == 0
            assert t.lookup((20, "a")) is None
            with pytest.raises(DataError, match="atomic write batch rejected"):
                t.write(
                    batch_table(m, ["UPSERT"], [(5, "a", {})], []), op_column="__op", atomic=True
                )
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_write_to_table_without_range_partitions_fails_per_row() -> None:
    """Once every range partition is dropped, each row of a write fails with Kudu's
    per-row NotFound (it once went to a tablet slot that no longer exists)."""
    path = tempfile.mkdtemp(prefix="kudusql-db-")
    try:
        with Database(path, OPTIONS, maintenance=False) as db:
            schema, ps, m = make_table("range", False)
            t = db.create_table("t", schema, ps)
            for r in [(0, 10), (10, 20), (30, 40)]:
                db.alter_table("t", [DropRangePartition(bounds(r))])
            assert t.num_tablets == 0
            for n in (1, 20):  # the small-batch and the vectorized router
                rows: list[tuple[Any, Any, Row]] = [(5 + i, "a", {}) for i in range(n - 1)]
                rows.append((None, "a", {}))
                res = t.write(batch_table(m, ["UPSERT"] * n, rows, []), op_column="__op")
                assert [(e.index, e.status, e.message) for e in res.errors] == [
                    (i, "NotFound", NO_TABLET) for i in range(n)
                ]
                assert res.applied == 0
            assert t.lookup((5, "a")) is None and t.to_arrow().num_rows == 0
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_update_of_added_column_survives_major_delta_compaction() -> None:
    path = tempfile.mkdtemp(prefix="kudusql-db-")
    try:
        with Database(path, OPTIONS, maintenance=False) as db:
            schema, ps, m = make_table("single", False)
            t = db.create_table("t", schema, ps)
            t.insert(batch_table(m, ["INSERT"], [(1, "a", {"c": 5})], ["c"]), op_column="__op")
            t.flush()
            db.alter_table("t", [AddColumn(ColumnSchema("f", DataType.parse("INT64")))])
            upd = pa.table(
                {"a": pa.array([1], pa.int32()), "b": ["a"], "f": pa.array([7], pa.int64())}
            )
            assert t.update(upd).applied == 1
            assert t.lookup((1, "a"), ["c", "f"]) == {"c": 5, "f": 7}
            (tablet,) = t.tablets()
            tablet.flush_deltas()
            (rid,) = [r["id"] for r in tablet.rowsets_info() if r["kind"] == "diskrowset"]
            assert tablet.major_delta_compaction(rid)
            assert t.lookup((1, "a"), ["c", "f"]) == {"c": 5, "f": 7}
    finally:
        shutil.rmtree(path, ignore_errors=True)
