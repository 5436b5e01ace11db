"""The answer comparison and the suite runner: wrong answers are found and named."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from kudusql_tpch.check import compare_results
from kudusql_tpch.run import DUCK_PARQUET, KUDUSQL, run_suite
from kudusql_tpch.spec import has_order_by, parse_query_list

D = decimal.Decimal


def test_equal_answers_within_tolerance() -> None:
    ours = [("A", D("1.005"), 3, datetime.date(1998, 9, 2)), ("B", 2.0, 4, None)]
    theirs = [("A", 1.0, 3, datetime.date(1998, 9, 2)), ("B", D("2.000000001"), 4, None)]
    assert compare_results(ours, theirs, ordered=True) is None


def test_wrong_value_is_named() -> None:
    diff = compare_results([("A", D("10.50"))], [("A", D("10.52"))], ordered=True)
    assert diff is not None
    assert "row 0, column 2" in diff and "10.50" in diff and "10.52" in diff


def test_large_numbers_use_the_relative_tolerance() -> None:
    assert compare_results([(1e12 + 0.5,)], [(1e12,)], ordered=True) is None
    assert compare_results([(1e12 + 1e4,)], [(1e12,)], ordered=True) is not None


def test_integers_are_exact() -> None:
    assert compare_results([(100,)], [(101,)], ordered=True) is not None


def test_row_count() -> None:
    assert compare_results([(1,)], [(1,), (2,)], ordered=False) == "1 rows, expected 2"


def test_order_matters_only_when_ordered() -> None:
    a = [("x", 1), ("y", 2)]
    b = [("y", 2), ("x", 1)]
    assert compare_results(a, b, ordered=False) is None
    assert compare_results(a, b, ordered=True) is not None


def test_null_is_not_zero() -> None:
    assert compare_results([(None,)], [(0,)], ordered=True) is not None


def test_has_order_by() -> None:
    assert has_order_by("select a from t\norder  by a")
    assert not has_order_by("select a from t group by a")


def test_parse_query_list() -> None:
    assert parse_query_list("1,3,5-7,q22") == [1, 3, 5, 6, 7, 22]


def test_suite_finds_a_wrong_answer_and_an_error() -> None:
    queries = {"q01": "SELECT 1 ORDER BY 1", "q02": "SELECT 2", "q03": "SELECT 3"}

    def ours(sql: str) -> list[tuple[Any, ...]]:
        if sql == "SELECT 2":
            return [(3,)]
        if sql == "SELECT 3":
            raise RuntimeError("boom\nmore")
        return [(1,)]

    def reference(sql: str) -> list[tuple[Any, ...]]:
        return [(int(sql.split()[1]),)]

    suite = run_suite(
        "check",
        {KUDUSQL: ours},
        queries,
        repetitions=2,
        warmup=1,
        reference=(DUCK_PARQUET, reference),
        checked=[KUDUSQL],
        progress=False,
    )
    fails = suite.failures()
    assert fails[0].startswith("q02 (kudusql): row 0, column 1: 3, expected 2")
    assert fails[1] == "q03 (kudusql): RuntimeError: boom"
    assert suite.correct_count(KUDUSQL) == (1, 3)
    assert len(suite.outcomes["q01"].times_ms[KUDUSQL]) == 2  # warm-up not timed
    assert KUDUSQL not in suite.outcomes["q02"].times_ms  # wrong answers are not timed
    doc = suite.to_json()
    assert doc["answers"][KUDUSQL] == {"correct": 1, "checked": 3}
    assert doc["queries"]["q02"][KUDUSQL]["correct"] is False
