"""Deep and huge statements (issue 31, P1): past ``limits.MAX_NESTING`` levels a
statement is refused with a clear ProgrammingError (never a raw RecursionError, from
any caller's stack depth, through the DB-API too); long flat lists (AND, OR, IN, CASE
branches) plan in time linear in their length and run; ``Session.interrupt`` stops the
parsing and planning of a huge statement."""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kudusql
from kudusql.common.errors import OperationalError, ProgrammingError
from kudusql.parser import parse
from kudusql.parser.limits import MAX_NESTING


@pytest.fixture
def conn() -> Iterator[kudusql.Connection]:
    c = kudusql.connect(":memory:", maintenance=False, sync=False)
    c.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING) PARTITION BY HASH (k) PARTITIONS 2")
    c.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    yield c
    c.close()


# Each shape nests n levels and answers `expected` for any n.
SHAPES: dict[str, tuple[Callable[[int], str], list[tuple[Any, ...]]]] = {
    "parentheses": (lambda n: "SELECT " + "(" * n + "k" + ")" * n + " FROM t WHERE k = 2", [(2,)]),
    "where": (lambda n: "SELECT k FROM t WHERE " + "(" * n + "k = 1" + ")" * n, [(1,)]),
    "from_subqueries": (
        lambda n: "SELECT count(*) FROM " + "(SELECT * FROM " * n + "t" + ") s" * n,
        [(3,)],
    ),
    "in_subqueries": (
        lambda n: "SELECT k FROM t WHERE " + "k IN (SELECT k FROM t WHERE " * n + "k = 3" + ")" * n,
        [(3,)],
    ),
    "case": (
        lambda n: "SELECT " + "CASE WHEN k=1 THEN " * n + "'x'" + " END" * n + " FROM t WHERE k=1",
        [("x",)],
    ),
    "functions": (lambda n: "SELECT " + "abs(" * n + "-k" + ")" * n + " FROM t WHERE k=3", [(3,)]),
    "update": (lambda n: "UPDATE t SET v = " + "(" * n + "'u'" + ")" * n + " WHERE k = 3", []),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_nesting_past_the_limit_is_a_clear_error(conn: kudusql.Connection, shape: str) -> None:
    sql = SHAPES[shape][0](MAX_NESTING + 20)
    with pytest.raises(ProgrammingError, match=f"nests more than {MAX_NESTING} levels"):
        conn.cursor().execute(sql)
    with pytest.raises(ProgrammingError, match=f"nests more than {MAX_NESTING} levels"):
        parse(sql)
    # far past it too: the check reads tokens, it never recurses
    with pytest.raises(ProgrammingError, match="nests more than"):
        conn.execute(SHAPES[shape][0](5000))


def _at_depth(frames: int, fn: Callable[[], Any]) -> Any:
    """``fn()`` called with ``frames`` more Python frames on the stack."""
    return fn() if frames <= 0 else _at_depth(frames - 1, fn)


@pytest.mark.parametrize("shape", SHAPES)
def test_nesting_up_to_the_limit_runs_from_a_deep_caller(
    conn: kudusql.Connection, shape: str
) -> None:
    make, expected = SHAPES[shape]
    limit = sys.getrecursionlimit()
    caller = limit - 250  # a host program already deep in its own stack

    def run() -> list[tuple[Any, ...]]:
        cur = conn.cursor().execute(make(MAX_NESTING))
        return cur.fetchall() if cur.description else []

    assert _at_depth(caller, run) == expected
    assert sys.getrecursionlimit() == limit  # the interpreter's limit is put back


def test_what_recurses_without_nesting_is_a_clear_error(conn: kudusql.Connection) -> None:
    """NOT NOT ... NOT x recurses in the parser once per NOT: no RecursionError either."""
    with pytest.raises(ProgrammingError, match="nested too deeply"):
        conn.cursor().execute("SELECT k FROM t WHERE " + "NOT " * 20_000 + "k = 1")
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(3,)]


def _and(n: int) -> str:
    return "SELECT k FROM t WHERE " + " AND ".join(f"k <> {i}" for i in range(10, n + 10))


def _or(n: int) -> str:
    return "SELECT k FROM t WHERE " + " OR ".join(f"k = {i}" for i in range(2, n + 2))


def _in(n: int) -> str:
    return "SELECT k FROM t WHERE k IN (" + ", ".join(str(i) for i in range(3, n + 3)) + ")"


def _case(n: int) -> str:
    whens = " ".join(f"WHEN k = {i} THEN 'w{i}'" for i in range(n))
    return f"SELECT k, CASE {whens} ELSE 'none' END FROM t"


LARGE: list[tuple[str, Callable[[int], str], int, list[tuple[Any, ...]]]] = [
    ("and", _and, 5_000, [(1,), (2,), (3,)]),
    ("or", _or, 5_000, [(2,), (3,)]),
    ("in", _in, 20_000, [(3,)]),
    ("case", _case, 3_000, [(1, "w1"), (2, "w2"), (3, "w3")]),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("kind", "make", "n", "expected"), LARGE, ids=[x[0] for x in LARGE])
def test_long_flat_statements_plan_and_run(
    conn: kudusql.Connection,
    kind: str,
    make: Callable[[int], str],
    n: int,
    expected: list[tuple[Any, ...]],
) -> None:
    got = conn.cursor().execute(make(n)).fetchall()
    assert sorted(got) == expected
    # the pushed predicates are still found (an IN list prunes tablets)
    if kind == "in":
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + make(n)).fetchall())
        assert "k IN" in plan


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    ("kind", "make", "n", "expected"),
    [
        ("and", _and, 20_000, [(1,), (2,), (3,)]),
        ("in", _in, 100_000, [(3,)]),
        ("case", _case, 10_000, [(1, "w1"), (2, "w2"), (3, "w3")]),
    ],
    ids=["and", "in", "case"],
)
def test_the_issue_sizes_plan_and_run(
    conn: kudusql.Connection,
    kind: str,
    make: Callable[[int], str],
    n: int,
    expected: list[tuple[Any, ...]],
) -> None:
    """The sizes issue 31 measured (an AND of 20,000 predicates ran over 200 s)."""
    assert sorted(conn.cursor().execute(make(n)).fetchall()) == expected


@pytest.mark.timeout(600)
def test_interrupt_stops_the_planning_of_a_huge_statement(conn: kudusql.Connection) -> None:
    """Ctrl-C in the shell calls Session.interrupt: the parse and the planning of a huge
    statement stop (they used to run to their end, and only DuckDB was interrupted)."""
    sql = _case(20_000)  # seconds of parsing and planning
    done = threading.Event()

    def ctrl_c() -> None:  # as a user pressing Ctrl-C until the prompt comes back
        while not done.wait(0.01):
            conn.session.interrupt()

    th = threading.Thread(target=ctrl_c)
    th.start()
    try:
        with pytest.raises(OperationalError, match="statement cancelled") as caught:
            conn.cursor().execute(sql)
    finally:
        done.set()
        th.join()
    frames = [f.filename for f in traceback.extract_tb(caught.value.__traceback__)]
    assert not any(f.endswith("executor/duck.py") for f in frames)  # before DuckDB ran
    # the session goes on, and the statement runs when not interrupted
    assert conn.execute("SELECT count(*) FROM t").fetchall() == [(3,)]
    assert len(conn.execute(_case(100)).fetchall()) == 3
