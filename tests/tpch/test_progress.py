"""The runner's progress bars and status lines (tqdm on standard error): the count stops
at the total, a note follows the figures, and ``--quiet`` silences all but what must
be said."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kudusql_tpch import progress
from kudusql_tpch.progress import Progress, log


@pytest.fixture(autouse=True)
def _loud() -> Iterator[None]:
    yield
    progress.quiet = False


def test_a_bar_counts_to_its_total_with_its_note(capsys: pytest.CaptureFixture[str]) -> None:
    with Progress("load", 1000, "rows", enabled=True) as bar:
        bar.note("lineitem")
        bar.update(600)
        bar.update(600)  # more rows than expected: the count stops at the total
        assert bar.n == 1000
    last = capsys.readouterr().err.rstrip("\n").split("\r")[-1]
    assert last.startswith("load")
    assert "100.0%" in last and "1.00k/1.00k rows" in last
    assert last.endswith(", lineitem")


def test_quiet_silences_bars_and_status_lines(capsys: pytest.CaptureFixture[str]) -> None:
    progress.quiet = True
    with Progress("run", 3, "runs") as bar:
        bar.update()
    log("loading")
    log("WRONG q1 (kudusql): 2 rows", always=True)
    assert capsys.readouterr().err == "WRONG q1 (kudusql): 2 rows\n"


def test_a_status_line_shows_when_not_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    log("loading")
    assert capsys.readouterr().err == "loading\n"
