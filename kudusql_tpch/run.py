"""Running queries: timings (warm-up runs, then repetitions interleaved across the
systems, median per query) and answer checks against a reference, for every phase of
the runner (``run``, ``check``, ``compare``, ``micro``, ``mutate``).

Every system is timed the same way: the statement is executed and all rows fetched as
Python tuples (kudusql through a DB-API cursor, DuckDB through its connection).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from kudusql.dbapi import Connection
from kudusql_tpch.check import compare_results
from kudusql_tpch.progress import Progress, log
from kudusql_tpch.spec import SF1_ANSWER_ROWS, has_order_by

Rows = list[tuple[Any, ...]]
Runner = Callable[[str], Rows]

KUDUSQL = "kudusql"
DUCK_PARQUET = "duckdb_parquet"
DUCK_NATIVE = "duckdb_native"
SYSTEM_LABELS = {
    KUDUSQL: "kudusql",
    DUCK_PARQUET: "DuckDB/Parquet",
    DUCK_NATIVE: "DuckDB native",
}


def run_kudusql(conn: Connection, sql: str) -> Rows:
    cur = conn.cursor()
    try:
        cur.execute(sql)
        rows: Rows = cur.fetchall()
    finally:
        cur.close()
    return rows


def duck_rows(con: duckdb.DuckDBPyConnection, sql: str) -> Rows:
    return con.execute(sql).fetchall()


def kudusql_runner(conn: Connection) -> Runner:
    return lambda sql: run_kudusql(conn, sql)


def duck_runner(con: duckdb.DuckDBPyConnection) -> Runner:
    return lambda sql: duck_rows(con, sql)


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean (values floored at 1 µs so a 0 cannot sink it)."""
    return math.exp(sum(math.log(max(x, 1e-3)) for x in xs) / len(xs))


def _error_text(e: BaseException) -> str:
    first = (str(e).splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"


@dataclass
class Outcome:
    """One query in one phase: per system its timed runs (ms), answer rows, and what
    was wrong with its answer (a first difference or an error), if anything."""

    name: str
    times_ms: dict[str, list[float]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    wrong: dict[str, str] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)

    def median_ms(self, system: str) -> float | None:
        runs = self.times_ms.get(system)
        return median(runs) if runs else None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for s in self.times_ms.keys() | self.rows.keys() | self.wrong.keys():
            runs = self.times_ms.get(s, [])
            out[s] = {
                "median_ms": round(median(runs), 3) if runs else None,
                "runs_ms": [round(r, 3) for r in runs],
                "rows": self.rows.get(s),
                "correct": (s not in self.wrong) if s in self.checked else None,
                "error": self.wrong.get(s),
            }
        return out


@dataclass
class Suite:
    """The outcomes of one phase over a set of queries."""

    phase: str
    systems: list[str]
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    reference: str | None = None
    repetitions: int = 0
    warmup: int = 0

    def failures(self) -> list[str]:
        return [
            f"{o.name} ({SYSTEM_LABELS.get(s, s)}): {w}"
            for o in self.outcomes.values()
            for s, w in o.wrong.items()
        ]

    def medians(self, system: str) -> dict[str, float]:
        out = {}
        for name, o in self.outcomes.items():
            m = o.median_ms(system)
            if m is not None:
                out[name] = m
        return out

    def common(self, systems: Sequence[str]) -> list[str]:
        """Queries timed on every one of ``systems``."""
        meds = [self.medians(s) for s in systems]
        return [q for q in self.outcomes if all(q in m for m in meds)]

    def geomean(self, system: str, over: Sequence[str]) -> float | None:
        m = self.medians(system)
        return geomean([m[q] for q in over]) if over else None

    def correct_count(self, system: str) -> tuple[int, int]:
        """(correct, checked) answers of ``system``."""
        checked = [o for o in self.outcomes.values() if system in o.checked]
        return sum(system not in o.wrong for o in checked), len(checked)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "systems": self.systems,
            "reference": self.reference,
            "repetitions": self.repetitions,
            "warmup": self.warmup,
            "queries": {n: o.to_json() for n, o in self.outcomes.items()},
        }
        base = self.systems[0]
        common = self.common(self.systems)
        if common and self.repetitions:
            geo = {s: self.geomean(s, common) for s in self.systems}
            out["geomean_ms"] = {s: round(g, 3) for s, g in geo.items() if g is not None}
            out["geomean_over"] = common
            out["total_ms"] = {
                s: round(sum(self.medians(s)[q] for q in common), 3) for s in self.systems
            }
            b = geo[base]
            if b is not None:
                out["geomean_ratio"] = {
                    s: round(b / g, 4) for s, g in geo.items() if s != base and g
                }
        if self.reference is not None:
            correct = {}
            for s in self.systems:
                ok, n = self.correct_count(s)
                if n:
                    correct[s] = {"correct": ok, "checked": n}
            out["answers"] = correct
        out["failures"] = self.failures()
        return out


def run_suite(
    phase: str,
    systems: Mapping[str, Runner],
    queries: Mapping[str, str],
    *,
    repetitions: int,
    warmup: int,
    reference: tuple[str, Runner | None] | None = None,
    checked: Sequence[str] = (),
    sf1_rows: bool = False,
    progress: bool | None = None,
    fail_fast: bool = False,
) -> Suite:
    """Run every query on every system: ``warmup`` untimed runs each, then
    ``repetitions`` rounds in which each system runs it once (interleaved, so drift
    hits all alike). The first answer of each system in ``checked`` is compared with
    the reference's (``reference = (name, runner)``; runner None: the system of that
    name). ``sf1_rows`` also checks the answer row counts of the 22 queries at SF 1.
    A query that raises is recorded as wrong for that system, which is then not timed
    on it. ``fail_fast`` stops at the first wrong answer."""
    suite = Suite(phase, list(systems), reference=reference[0] if reference else None)
    suite.repetitions, suite.warmup = repetitions, warmup
    ref_runner = None
    if reference is not None:
        ref_runner = reference[1] if reference[1] is not None else systems[reference[0]]
    per_system = warmup + repetitions if warmup else max(repetitions, 1)
    steps = len(queries) * len(systems) * per_system
    with Progress(phase, steps, "runs", enabled=progress) as bar:
        for name, sql in queries.items():
            o = Outcome(name)
            suite.outcomes[name] = o
            answers: dict[str, Rows] = {}
            for s, fn in systems.items():
                bar.note(f"{name} {SYSTEM_LABELS.get(s, s)}")
                try:
                    for i in range(max(warmup, 1)):
                        t0 = time.perf_counter()
                        rows = fn(sql)
                        dt = (time.perf_counter() - t0) * 1000
                        if i == 0:
                            answers[s] = rows
                            o.rows[s] = len(rows)
                        if warmup == 0:  # the single untimed-by-default run counts
                            o.times_ms.setdefault(s, []).append(dt)
                        bar.update()
                except Exception as e:
                    o.wrong[s] = _error_text(e)
                    o.checked.append(s)
                    bar.update(per_system)
            if ref_runner is not None and reference is not None:
                for s in checked:
                    if s not in answers or s in o.wrong:
                        continue
                    o.checked.append(s)
                    if reference[1] is None and reference[0] in o.wrong:
                        o.wrong[s] = "no reference answer: " + o.wrong[reference[0]]
                        continue
                    want = answers.get(reference[0]) if reference[1] is None else None
                    if want is None:
                        want = ref_runner(sql)
                    diff = compare_results(answers[s], want, ordered=has_order_by(sql))
                    if diff is not None:
                        o.wrong[s] = diff
            if sf1_rows and name.startswith("q") and name[1:].isdigit():
                expect = SF1_ANSWER_ROWS[int(name[1:]) - 1]
                for s, n in o.rows.items():
                    if n != expect and s not in o.wrong:
                        o.wrong[s] = f"{n} rows, the SF 1 answer has {expect}"
                        if s not in o.checked:
                            o.checked.append(s)
            for s in o.wrong:
                log(f"WRONG {name} ({SYSTEM_LABELS.get(s, s)}): {o.wrong[s]}", always=True)
            if fail_fast and o.wrong:
                break
            live = [s for s in systems if s not in o.wrong]
            rounds = repetitions - (1 if warmup == 0 else 0)
            for _ in range(rounds):
                for s in live:
                    t0 = time.perf_counter()
                    systems[s](sql)
                    o.times_ms.setdefault(s, []).append((time.perf_counter() - t0) * 1000)
                    bar.update()
    return suite
