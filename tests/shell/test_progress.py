"""The shell's progress line (tqdm on the error stream): what it shows for each thing
known about a running statement, that it waits for its delay, and that it clears its
line."""

from __future__ import annotations

import io

from kudusql.shell.progress import ProgressLine


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _last_line(stream: io.StringIO) -> str:
    return stream.getvalue().split("\r")[-1].strip()


def test_rows_out_of_a_total_show_a_bar_the_count_and_the_hint() -> None:
    err = _Terminal()
    line = ProgressLine(err, enabled=True, delay=0)
    line.update("INSERT", rows=25_000, total=100_000)
    shown = _last_line(err)
    assert shown.startswith("INSERT")
    assert "25.0%" in shown
    assert "25.0k/100k rows" in shown
    assert "rows/s" in shown and "ETA" in shown
    assert shown.endswith("Ctrl-C cancels")


def test_a_fraction_alone_shows_a_bar_and_no_rows() -> None:
    err = _Terminal()
    line = ProgressLine(err, enabled=True, delay=0)
    line.update("SELECT", fraction=0.4)
    shown = _last_line(err)
    assert "40.0%" in shown and "rows" not in shown
    assert shown.endswith("Ctrl-C cancels")
    line.update("SELECT", fraction=2.0)  # DuckDB's estimate may overshoot
    assert "100.0%" in _last_line(err)


def test_nothing_known_shows_the_label_time_and_hint() -> None:
    err = _Terminal()
    line = ProgressLine(err, enabled=True, delay=0)
    line.update("COMPUTE STATS")
    assert _last_line(err).startswith("COMPUTE STATS")
    assert _last_line(err).endswith("Ctrl-C cancels")
    line.update("INSERT", rows=1_500)
    assert "1.50k rows" in _last_line(err)


def test_clear_erases_the_line() -> None:
    err = _Terminal()
    line = ProgressLine(err, enabled=True, delay=0)
    line.update("SELECT", fraction=0.5)
    line.clear()
    line.clear()
    assert err.getvalue().endswith("\r")
    assert _last_line(err) == ""


def test_nothing_before_the_delay_nor_when_disabled() -> None:
    err = _Terminal()
    line = ProgressLine(err, enabled=True, delay=3600)
    line.update("SELECT", fraction=0.5)
    line.clear()
    assert err.getvalue() == ""
    off = _Terminal()
    line = ProgressLine(off, enabled=False, delay=0)
    line.update("SELECT", rows=1, total=2)
    line.clear()
    assert off.getvalue() == ""
