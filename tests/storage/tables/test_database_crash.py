"""SIGKILL a real writer process doing DDL and multi-tablet writes; after each kill the
database opens, lists exactly the tables whose creation was acknowledged (the op in
flight may or may not have happened, and is resolved by looking), has no orphan tablet
directories, every tablet is on the catalog's schema, and every table holds exactly the
rows of the acknowledged writes (the write in flight: all of its keys or none, across
its tablets)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kudusql.storage.tables import catalog
from kudusql.storage.tables.database import Database
from tests.support import db_crash_writer as cw

ROOT = str(Path(__file__).resolve().parents[3])


class Model:
    def __init__(self) -> None:
        self.rows: dict[str, dict[int, int]] = {}
        self.cols: dict[str, list[str]] = {}

    def apply(self, op: dict[str, Any], result: dict[str, Any]) -> None:
        kind, name = op["op"], op["table"]
        if kind == "create":
            self.rows[name], self.cols[name] = {}, ["k", "v"]
        elif kind == "drop":
            del self.rows[name], self.cols[name]
        elif kind == "add_column":
            self.cols[name].append(op["column"])
        elif kind == "drop_range":
            rows = self.rows[name]
            for k in [k for k in rows if op["lo"] <= k < op["hi"]]:
                del rows[k]
        elif kind == "upsert":
            for k in result["applied"]:
                self.rows[name][k] = op["v"]
        elif kind == "delete":
            for k in result["applied"]:
                del self.rows[name][k]

    def resolve(self, op: dict[str, Any], db: Database) -> None:
        """Apply the op the kill interrupted as far as the database shows it happened."""
        kind, name = op["op"], op["table"]
        if kind == "create":
            if db.has_table(name):
                self.apply(op, {})
            return
        if kind == "drop":
            if not db.has_table(name):
                self.apply(op, {})
            return
        t = db.table(name)
        if kind == "add_column":
            if t.schema.has_column(op["column"]):
                self.apply(op, {})
        elif kind in ("add_range", "drop_range"):
            have = any(b.lower == (op["lo"],) for b in t.partition_schema.range_bounds)
            if have == (kind == "add_range"):
                self.apply(op, {})
        elif kind in ("upsert", "delete"):
            # A write is one transaction across its tablets: all of its keys changed,
            # or none (a key whose old and new state agree tells nothing).
            rows = self.rows[name]
            new = None if kind == "delete" else op["v"]
            changed, kept = [], []
            bounds = t.partition_schema.range_bounds if t.partition_schema.range_columns else []
            for k in op["keys"]:
                if bounds and not any(b.lower[0] <= k < b.upper[0] for b in bounds):
                    continue  # no tablet covers it: a row error either way
                got = t.lookup([k], ["v"])
                actual = None if got is None else got["v"]
                assert actual in (rows.get(k), new), (k, actual, rows.get(k), new)
                if rows.get(k) != new:
                    (changed if actual == new else kept).append(k)
            assert not (changed and kept), f"half a write survived: {changed} but not {kept}"
            for k in changed:
                if new is None:
                    rows.pop(k, None)
                else:
                    rows[k] = new

    def check(self, db: Database) -> None:
        assert db.table_names() == sorted(self.rows)
        listed = {
            os.path.basename(catalog.tablet_path(db.path, e.id))
            for n in db.table_names()
            for e in db.table(n).meta.tablets
        }
        assert set(os.listdir(os.path.join(db.path, catalog.TABLETS_DIR))) == listed
        for name, rows in self.rows.items():
            t = db.table(name)
            assert t.schema.names == self.cols[name]
            assert all(x.schema == t.schema for x in t.tablets())
            got = t.scan(ordered=True).read_all().to_pylist()
            assert {r["k"]: r["v"] for r in got} == rows, name
            assert [r["k"] for r in got] == sorted(rows)
            extra = self.cols[name][2:]
            assert all(r[c] is None for r in got for c in extra)


def read_lines(
    proc: subprocess.Popen[str], model: Model, acks: int, pending: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Consume BEGIN/ACK lines until ``acks`` acknowledgements (-1: until EOF); returns
    the op in flight (begun, not acknowledged), if any.

    A last line without its newline was torn by the kill (a long line leaves the
    writer in more than one ``write``): it never arrived, so it acknowledges nothing."""
    assert proc.stdout is not None
    seen = 0
    while acks < 0 or seen < acks:
        line = proc.stdout.readline()
        if not line.endswith("\n"):
            break
        word, _, rest = line.partition(" ")
        if word == "BEGIN":
            pending = json.loads(rest)
        elif word == "ACK":
            assert pending is not None
            model.apply(pending, json.loads(rest))
            pending = None
            seen += 1
    return pending


def run_crashes(tmp_path: Path, kills: int, seed: int) -> None:
    path = str(tmp_path / "db")
    model = Model()
    rng = random.Random(seed)
    for round_ in range(kills):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.db_crash_writer",
                path,
                str(seed * 1000 + round_),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        try:
            try:
                pending = read_lines(proc, model, rng.randint(2, 25), None)
                time.sleep(rng.random() * 0.03)
            finally:
                proc.kill()
                proc.wait()
            assert proc.returncode == -9, proc.stderr.read() if proc.stderr else ""
            pending = read_lines(proc, model, -1, pending)  # printed before the kill
        finally:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        db = Database(path, cw.OPTIONS, maintenance=False)
        try:
            if pending is not None:
                model.resolve(pending, db)
            model.check(db)
        finally:
            db.close()


def test_sigkill_database_writer_6_times(tmp_path: Path) -> None:
    run_crashes(tmp_path, kills=6, seed=3)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_sigkill_database_writer_many_times(tmp_path: Path, seed: int) -> None:
    run_crashes(tmp_path, kills=50, seed=50 + seed)


def test_a_torn_last_line_acknowledges_nothing() -> None:
    """Pins a flaky failure: a kill between the writes of one long ``ACK`` line left
    ``ACK `` without its JSON; the op stays in flight instead of failing to parse."""
    op = {"op": "create", "table": "t"}
    script = f"import sys; sys.stdout.write('BEGIN {json.dumps(op)}\\nACK ')"
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    model = Model()
    try:
        assert read_lines(proc, model, -1, None) == op
    finally:
        assert proc.stdout is not None
        proc.stdout.close()
        proc.wait()
    assert model.rows == {}


# -- a SIGKILL at an exact point of a DDL statement ------------------------------------------
def _tablet_dirs(path: str) -> set[int]:
    return {int(n) for n in os.listdir(os.path.join(path, catalog.TABLETS_DIR))}


def _listed(db: Database) -> set[int]:
    return {e.id for n in db.table_names() for e in db.table(n).meta.tablets}


def _keys(db: Database, name: str) -> list[int]:
    rows = db.table(name).scan(ordered=True).read_all().to_pylist()
    assert all(r["v"] == r["k"] for r in rows)
    return [r["k"] for r in rows]


@pytest.mark.parametrize(
    ("op", "point", "contains", "skip", "left"),
    [
        ("create", "rename", catalog.CATALOG_FILE, 0, 2),  # tablets made, catalog not saved
        ("add_range", "rename", catalog.CATALOG_FILE, 0, 2),
        ("drop", "delete", catalog.TABLETS_DIR, 0, 3),  # catalog saved, nothing deleted
        ("drop", "delete", catalog.TABLETS_DIR, 1, 2),  # one of three tablets deleted
        ("drop", "rename", catalog.CATALOG_FILE, 1, 0),  # all deleted, the list not cleared
        ("drop_range", "delete", catalog.TABLETS_DIR, 0, 2),
    ],
)
def test_sigkill_inside_ddl(
    tmp_path: Path, op: str, point: str, contains: str, skip: int, left: int
) -> None:
    """Killed between a DDL statement's tablet work and its catalog save (CREATE, ADD
    RANGE) or between its catalog save and the deletion (DROP, DROP RANGE): a read-only
    open sees the catalog's state and deletes nothing; the writer's open deletes exactly
    the tablets the catalog proves garbage, and every other row is there."""
    from tests.support import ddl_kill

    path = str(tmp_path / "db")
    ddl_kill.make(path)
    before = catalog.load(path)
    listed_before = {e.id for m in before.tables.values() for e in m.tablets}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.ddl_kill", path, op, point, contains, str(skip)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr
    after = catalog.load(path)
    on_disk = _tablet_dirs(path)
    if op in ("create", "add_range"):
        assert after.to_dict() == before.to_dict()  # not committed
        garbage = on_disk - listed_before
        assert len(garbage) == left and min(garbage) >= after.next_tablet_id
    else:
        listed_after = {e.id for m in after.tables.values() for e in m.tablets}
        dropped = listed_before - listed_after
        assert set(after.pending_deletion) == dropped
        assert len(on_disk & dropped) == left
        garbage = on_disk - listed_after
    with Database(path, ddl_kill.OPTIONS, read_only=True) as ro:
        want_tables = ["t"] if op == "drop" else ["t", "u"]
        assert ro.table_names() == want_tables
        assert _tablet_dirs(path) == on_disk
    assert _tablet_dirs(path) == on_disk
    with Database(path, ddl_kill.OPTIONS, maintenance=False) as db:
        assert db.table_names() == want_tables
        assert _tablet_dirs(path) == _listed(db)
        assert not garbage & _tablet_dirs(path)
        t_keys = list(range(1000, 2000)) if op == "drop_range" else list(range(2000))
        assert _keys(db, "t") == t_keys
        if "u" in want_tables:
            assert _keys(db, "u") == list(range(2000))
    assert catalog.load(path).pending_deletion == []
