"""The interactive shell driven in process through prompt_toolkit's pipe input: multi-line
editing, Enter/Ctrl-C/Ctrl-D, Tab completion, history, highlighting, rendering, and
the completer, runner and formatter it relies on."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.data_structures import Size
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from prompt_toolkit.output.vt100 import Vt100_Output

import kudusql
from kudusql.shell.completion import Catalog, SqlCompleter
from kudusql.shell.core import Settings, Shell
from kudusql.shell.formatting import Style, render
from kudusql.shell.highlight import SimpleSqlLexer, make_lexer
from kudusql.shell.repl import Repl
from kudusql.shell.splitter import is_complete, split
from tests.support.timing import scaled

pytestmark = pytest.mark.timeout(scaled(120))


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    conn = kudusql.connect(str(tmp_path / "db"), maintenance=False)
    cur = conn.cursor()
    cur.execute(
        "CREATE TABLE orders_2024 (o_id BIGINT PRIMARY KEY, o_total DECIMAL(10,2), "
        "o_note STRING) PARTITION BY HASH (o_id) PARTITIONS 2"
    )
    cur.execute("INSERT INTO orders_2024 VALUES (1, 9.50, 'first'), (2, 120.00, NULL)")
    cur.execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2"
    )
    sh = Shell(
        conn,
        io.StringIO(),
        io.StringIO(),
        interactive=True,
        settings=Settings(expanded="auto"),
        path=str(tmp_path / "db"),
    )
    yield sh
    sh.close()


def drive(shell: Shell, keys: str, history: Path, *, output: object = None) -> tuple[str, str]:
    """Type ``keys`` into a real Repl; returns (stdout, stderr) of the shell."""
    with create_pipe_input() as inp:
        inp.send_text(keys)
        repl = Repl(
            shell,
            input=inp,
            output=output or DummyOutput(),  # type: ignore[arg-type]
            history=FileHistory(str(history)),
        )
        repl.loop()
    out, err = shell.output.out, shell.output.err
    assert isinstance(out, io.StringIO) and isinstance(err, io.StringIO)
    return out.getvalue(), err.getvalue()


def test_multi_line_statement_runs_on_semicolon(shell: Shell, tmp_path: Path) -> None:
    hist = tmp_path / "hist"
    out, err = drive(shell, "SELECT o_id, o_note\rFROM orders_2024\rORDER BY o_id;\r\x04", hist)
    assert err == ""
    assert "│    1 │ first  │" in out
    assert "│    2 │ NULL   │" in out
    assert "(2 rows" in out
    # the whole statement is one history entry, persisted in the file
    assert "+SELECT o_id, o_note\n+FROM orders_2024\n+ORDER BY o_id;" in hist.read_text()


def test_ctrl_c_clears_input_and_ctrl_d_exits(shell: Shell, tmp_path: Path) -> None:
    out, err = drive(shell, "SELECT nonsense FROM\x03SELECT 7 AS seven;\r\x04", tmp_path / "h")
    assert "│     7 │" in out
    assert err == ""


def test_tab_completes_table_name(shell: Shell, tmp_path: Path) -> None:
    shell.catalog.tables()  # the catalog a completion reads, loaded before typing

    def typist(inp: PipeInput, repl: Repl) -> None:
        # completion runs asynchronously: wait for it as a person would, however loaded
        # the machine is, before ending the statement
        inp.send_text("SELECT count(*) AS n FROM orders_2")
        time.sleep(0.2)
        deadline = time.monotonic() + scaled(60)
        inp.send_text("\t")
        next_tab = time.monotonic() + 3
        while "orders_2024" not in repl.session.default_buffer.text:
            if time.monotonic() > deadline:
                break
            if time.monotonic() > next_tab:  # a Tab read before the prompt was ready
                inp.send_text("\t")
                next_tab = time.monotonic() + 3
            time.sleep(0.05)
        inp.send_text(";\r\x04")

    with create_pipe_input() as inp:
        repl = Repl(
            shell, input=inp, output=DummyOutput(), history=FileHistory(str(tmp_path / "h"))
        )
        th = threading.Thread(target=typist, args=(inp, repl))
        th.start()
        repl.loop()
        th.join()
    out, err = shell.output.out.getvalue(), shell.output.err.getvalue()  # type: ignore[attr-defined]
    assert "│ 2 │" in out, out + err
    assert "SELECT count(*) AS n FROM orders_2024;" in (tmp_path / "h").read_text()


def test_errors_and_meta_commands_in_the_repl(shell: Shell, tmp_path: Path) -> None:
    keys = "SELECT * FROM nope;\r\\dt\r\\x on\rSELECT * FROM t;\r\\q\r"
    out, err = drive(shell, keys, tmp_path / "h")
    assert "Error: table 'nope' does not exist" in err
    assert "LINE 1: SELECT * FROM nope" in err
    assert "│ orders_2024 │" in out
    assert "Expanded display is on." in out
    assert "(0 rows" in out


def test_rendering_highlights_sql(shell: Shell, tmp_path: Path) -> None:
    screen = io.StringIO()
    vt = Vt100_Output(screen, lambda: Size(rows=24, columns=80), term="xterm")
    drive(shell, "SELECT 'x' AS s;\r\x04", tmp_path / "h", output=vt)
    text = screen.getvalue()
    assert "kudusql>" in text
    assert "\x1b[0;34;1mSELECT\x1b[0m" in text  # keyword: bold blue
    assert "\x1b[0;32m'x'\x1b[0m" in text  # string: green


def test_lexers() -> None:
    for lexer in (make_lexer(), SimpleSqlLexer()):
        line = lexer.lex_document(Document("SELECT 'a', 1 FROM t -- c"))(0)
        styles = {text.strip(): style for style, text in line if text.strip()}
        assert "keyword" in styles["SELECT"].lower()
        assert "string" in styles["'a'"].lower() or "string" in styles.get("'", "").lower()


def test_completer_contexts(shell: Shell) -> None:
    c = SqlCompleter(Catalog(shell.runner.try_query))

    def complete(text: str) -> list[str]:
        doc = Document(text)
        return [x.text for x in c.get_completions(doc, CompleteEvent(completion_requested=True))]

    assert complete("SELECT * FROM ord") == ["orders_2024"]
    assert complete("select * from t, ")[:2] == ["orders_2024", "t"]
    assert complete("INSERT INTO ")[:2] == ["orders_2024", "t"]
    assert complete("UPDATE o")[0] == "orders_2024"
    assert set(complete("SELECT * FROM orders_2024 WHERE o_")) == {"o_id", "o_total", "o_note"}
    assert complete("SELECT * FROM orders_2024 x WHERE x.o_t") == ["o_total"]
    assert complete("SELECT * FROM default.") == ["orders_2024", "t"]
    assert complete("sel") == ["select"]
    assert complete("SEL") == ["SELECT"]
    assert "count(" in complete("SELECT cou")
    assert complete("\\d ord") == ["orders_2024"]
    assert complete("\\tim") == ["\\timing"]
    assert complete("\\format j") == ["json"]


def test_completer_columns_before_from(shell: Shell) -> None:
    c = SqlCompleter(Catalog(shell.runner.try_query))
    doc = Document("SELECT o_ FROM orders_2024", cursor_position=len("SELECT o_"))
    got = [x.text for x in c.get_completions(doc, CompleteEvent())]
    assert set(got[:3]) == {"o_id", "o_total", "o_note"}


def test_runner_cancels_a_long_query(shell: Shell) -> None:
    job = shell.runner.submit("SELECT count(*) FROM range(100000000) a, range(100000) b")
    assert not job.wait(0.5)  # the query runs for hours unless cancelled
    assert job.cancel(grace=scaled(5))
    assert job.outcome.cancelled
    o = shell.runner.run("SELECT 1 AS one")
    assert o.error is None and o.table is not None and o.table.to_pylist() == [{"one": 1}]


def test_splitter() -> None:
    assert not is_complete("SELECT 1")
    assert is_complete("SELECT 1;  -- done")
    assert not is_complete("SELECT ';")
    assert not is_complete("SELECT 1; /* open")
    assert is_complete("\\dt")
    assert is_complete(".tables")
    pieces = split("SELECT ';';\n\\d t\n-- c\nSELECT\n2")
    assert [(p.text, p.line, p.meta) for p in pieces] == [
        ("SELECT ';'", 1, False),
        ("\\d t", 2, True),
        ("-- c\nSELECT\n2", 3, False),
    ]


def test_wide_results_expand_or_wrap() -> None:
    table = pa.table({"id": [1, 2], "text": ["x" * 60, None], "n": [1.5, None]})
    wide = render(table, Style(width=40, expanded="auto"))
    assert wide.startswith("-[ RECORD 1 ]")
    assert "text | " + "x" * 33 in wide
    wrapped = render(table, Style(width=40, expanded="off"))
    assert all(len(line) <= 40 for line in wrapped.splitlines())
    assert "NULL" in wrapped
    assert render(table, Style(expanded="on")).count("-[ RECORD") == 2
