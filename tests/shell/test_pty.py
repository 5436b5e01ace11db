"""End to end under a real pseudo-terminal: ``kudusql <tmp>/db`` started with pexpect,
a table created and filled, a table name completed with Tab, a query, a long query
cancelled with Ctrl-C (it would run for hours), and Ctrl-D to exit."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.shell.conftest import KUDUSQL, shell_env
from tests.support.timing import scaled

PROMPT = "kudusql>"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _spawn(tmp_path: Path, **kw: Any) -> pexpect.spawn:
    """``kudusql <tmp>/db`` under a 40x120 xterm pseudo-terminal."""
    env = shell_env(tmp_path)
    env["TERM"] = "xterm"
    return pexpect.spawn(
        KUDUSQL,
        [str(tmp_path / "db")],
        env=env,
        dimensions=(40, 120),
        encoding="utf-8",
        timeout=scaled(20),
        **kw,
    )


def _cancel_a_long_query(child: pexpect.spawn) -> None:
    """Start a genuinely long query (10^13 rows of cross join in DuckDB: hours), press
    Ctrl-C once its progress line shows, and wait for the prompt."""
    child.send("SELECT count(*) FROM range(100000000) a, range(100000) b;\r")
    child.expect("Ctrl-C cancels")  # the progress line appears after 0.5 s
    child.sendcontrol("c")
    child.expect("Cancelled")
    child.expect(PROMPT)


def _complete(child: pexpect.spawn, rest: str) -> None:
    """Press Tab until ``rest`` (the completed end of a name) is drawn: completion runs
    asynchronously, and a Tab read before the prompt is ready does nothing."""
    time.sleep(0.4)  # as a person would pause before Tab
    deadline = time.monotonic() + scaled(20)
    while True:
        child.send("\t")
        try:
            child.expect(rest, timeout=3)
            return
        except pexpect.TIMEOUT:
            if time.monotonic() > deadline:
                raise


@pytest.mark.timeout(scaled(60))
def test_interactive_session(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    try:
        child.expect(r"\\\? for help")
        child.expect(PROMPT)
        child.send(
            "CREATE TABLE pets_table (id BIGINT PRIMARY KEY, name STRING)\r"
            "PARTITION BY HASH (id) PARTITIONS 2;\r"
        )
        child.expect("OK")
        child.expect(PROMPT)
        child.send("INSERT INTO pets_table VALUES (1, 'cat'), (2, 'dog'), (3, NULL);\r")
        child.expect("INSERT 3 rows")
        child.expect(PROMPT)

        # Tab completes the table name
        child.send("SELECT count(*) AS n FROM pets_t")
        _complete(child, "able")  # the completed rest of the name, drawn on the screen
        child.send(";\r")
        child.expect(r"│ 3 │")
        child.expect(r"\(1 row")
        child.expect(PROMPT)

        child.send("SELECT name FROM pets_table WHERE id >= 2 ORDER BY id;\r")
        child.expect("│ dog  │")
        child.expect(r"│ \x1b\[2;3mNULL\x1b\[0m +│")  # NULL set apart (dim italic)
        child.expect(r"\(2 rows")
        child.expect(PROMPT)

        _cancel_a_long_query(child)

        # the session is still usable, and Ctrl-C on typed input only clears it
        child.send("SELECT garbage")
        child.sendcontrol("c")
        child.send("SELECT 40 + 2 AS answer;\r")
        child.expect("│     42 │")
        child.expect(PROMPT)

        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    seen = ANSI.sub("", child.before or "")
    assert "Traceback" not in seen
    history = (tmp_path / "history").read_text()
    assert "SELECT count(*) AS n FROM pets_table;" in history


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.timeout(scaled(60))
def test_ctrl_c_cancels_in_a_shell_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A process started from a background job of a script (``cmd &`` without job
    control) inherits SIGINT ignored, and Python then leaves it so: Ctrl-C did nothing
    while a statement ran (found when the CI command was started that way)."""
    child = _spawn(tmp_path, preexec_fn=_ignore_sigint)
    try:
        child.expect(PROMPT)
        _cancel_a_long_query(child)
        child.sendcontrol("d")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
