"""How values read in the shell: INTERVALs as DuckDB writes them, and control characters
in strings shown escaped so that they cannot break a table's alignment."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pexpect
import pyarrow as pa
import pytest

from kudusql.shell.formatting import Style, cell_text, render
from tests.shell.conftest import KUDUSQL, shell_env
from tests.support.timing import scaled


@pytest.mark.parametrize(
    ("months", "days", "nanos", "text"),
    [
        (0, 1, 0, "1 day"),
        (2, 3, 1_500_000_000, "2 months 3 days 00:00:01.5"),
        (14, 0, 0, "1 year 2 months"),
        (-14, 0, 0, "-1 year -2 months"),
        (0, 0, 0, "00:00:00"),
        (0, -1, -1_000_000_000, "-1 day -00:00:01"),
        (0, 0, 90_000 * 10**9, "25:00:00"),
        (1, 1, 1_000, "1 month 1 day 00:00:00.000001"),
        (0, 2, -3 * 3600 * 10**9, "2 days -03:00:00"),
    ],
)
def test_interval_text(months: int, days: int, nanos: int, text: str) -> None:
    assert cell_text(pa.MonthDayNano([months, days, nanos])) == text


def test_duration_text() -> None:
    assert cell_text(datetime.timedelta(days=1, seconds=1)) == "1 day 00:00:01"


def _box_widths(text: str) -> set[int]:
    return {len(line) for line in text.splitlines() if line}


def test_control_characters_keep_the_table_aligned() -> None:
    t = pa.table({"a\tb": ["x\ty", "p\rq", "two\nlines", "e\x1bf", "back\\slash"], "n": [1] * 5})
    text = render(t, Style())
    assert _box_widths(text) == {18}, text  # every line of the box has one width
    assert "│ a\\tb       │ n │" in text
    assert "│ x\\ty       │ 1 │" in text
    assert "│ p\\rq       │ 1 │" in text
    assert "│ two        │ 1 │\n│ lines      │   │" in text  # newline: a multi-line cell
    assert "│ e\\x1bf     │ 1 │" in text
    assert "│ back\\slash │ 1 │" in text
    expanded = render(t, Style(expanded="on"))
    assert "a\\tb | x\\ty" in expanded and "\t" not in expanded and "\r" not in expanded
    assert "\t" not in render(t, Style(format="line")) and "\x1b" not in render(
        t, Style(format="markdown")
    )
    # the machine formats keep their own rules
    assert render(t, Style(format="tsv")).splitlines()[1] == "x\\ty\t1"
    assert '"x\\ty"' in render(t, Style(format="json"))  # JSON's own escape


def test_intervals_and_tabs_through_the_cli(tmp_path: Path, run_cli: Any) -> None:
    r = run_cli(
        str(tmp_path / "db"),
        "-c",
        "SELECT INTERVAL 1 DAY AS i, 'a' || chr(9) || 'b' AS s, "
        "INTERVAL 2 MONTH + INTERVAL 3 DAY + INTERVAL 1500 MILLISECOND AS j",
    )
    assert r.returncode == 0, r.stderr
    assert "│ 1 day │ a\\tb │ 2 months 3 days 00:00:01.5 │" in r.stdout
    r = run_cli(str(tmp_path / "db"), "--format", "csv", "-c", "SELECT INTERVAL 36 HOUR AS i")
    assert r.stdout == "i\n36:00:00\n"


@pytest.mark.timeout(scaled(60))
def test_intervals_and_tabs_in_the_interactive_shell(tmp_path: Path) -> None:
    env = shell_env(tmp_path)
    env["TERM"] = "xterm"
    child = pexpect.spawn(
        KUDUSQL,
        [str(tmp_path / "db")],
        env=env,
        dimensions=(40, 120),
        encoding="utf-8",
        timeout=scaled(20),
    )
    try:
        child.expect("kudusql>")
        child.send("SELECT INTERVAL 1 DAY AS i, 'a' || chr(9) || 'b' AS s;\r")
        child.expect(r"│ 1 day │ a\\tb │")
        child.expect("kudusql>")
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
