"""Runs every case of the golden files in tests/parser/golden (see golden_runner)."""

from __future__ import annotations

import pytest

from tests.parser.golden_runner import GOLDEN_DIR, UPDATE, Case, actual, load, rewrite, round_trip

FILES = sorted(GOLDEN_DIR.glob("*.sql"))
if UPDATE:
    for f in FILES:
        rewrite(f)
CASES = [c for f in FILES for c in load(f)]


def test_golden_files_exist() -> None:
    assert len(FILES) >= 5
    assert len(CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_golden(case: Case) -> None:
    kind, text = actual(case)
    assert (kind, text) == (case.kind, case.expected), f"{case.id} {case.title}"
    if kind == "expect":
        before, after = round_trip(case.sql)
        assert after == before, f"{case.id}: the generated SQL parses differently"
