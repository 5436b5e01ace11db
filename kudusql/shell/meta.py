"""Owns the meta commands: psql-style backslash commands and SQLite-style dot commands.

Each command is a function of the shell and its argument text; ``run`` dispatches a
line and returns False when the command failed. ``HELP`` is the ``\\?`` text.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING

from kudusql.common.errors import ProgrammingError
from kudusql.shell import tpch
from kudusql.shell.errors import Quit
from kudusql.shell.formatting import EXPANDED_MODES, FORMATS, format_seconds
from kudusql.shell.runner import Job

if TYPE_CHECKING:
    from kudusql.shell.core import Shell

HELP = """\
SQL statements end with ';' and may span lines. Ctrl-C cancels the running statement or
clears the input; Ctrl-D (or \\q) quits. Tab completes keywords, tables and columns.

  \\?  \\h  .help           this help
  \\q  .quit  .exit        quit
  \\dt [pattern]  .tables  list tables (SHOW TABLES)
  \\d [table]              describe a table (no table: list tables)
  .schema [table]         CREATE statements (SHOW CREATE TABLE)
  \\l  .databases          list databases (USE db switches)
  \\x [on|off|auto]        expanded output (one column per line); auto when too wide
  \\timing [on|off]  .timer  show elapsed time
  \\format FMT  .mode FMT  output format: table csv tsv json markdown line
  \\o [file]  .output     send results to a file (append); no file: back to screen
  \\i file  .read file    run SQL from a file
  \\null TEXT              how NULL is shown (now: {null})
  \\maxrows N              rows shown on screen (0: all; now: {maxrows})
  \\pager [on|off]         page results taller than the screen
  \\load tpch [sf]         load TPC-H sample data (default sf {sf}) into this database
  \\refresh                read-only: take up the writer's changes now (statements do)

SQL: docs/SQL.md (DuckDB queries plus Impala/Kudu DDL, DML, SHOW, DESCRIBE, EXPLAIN,
time travel with FOR SYSTEM_TIME AS OF, table_changes(...))."""


def _on_off(arg: str, current: bool) -> bool:
    a = arg.strip().lower()
    if not a:
        return not current
    if a in {"on", "true", "1", "yes"}:
        return True
    if a in {"off", "false", "0", "no"}:
        return False
    raise ProgrammingError(f"expected on or off, not {arg!r}")


def _ident(name: str) -> str:
    return ".".join(p if p.startswith("`") else f"`{p}`" for p in name.split("."))


def _sql(shell: Shell, sql: str) -> bool:
    o = shell.execute(sql)
    return o is not None and shell.show(o)


def cmd_help(shell: Shell, arg: str) -> bool:
    s = shell.settings
    shell.output.status(HELP.format(null=s.null, maxrows=s.maxrows or "all", sf=tpch.DEFAULT_SF))
    return True


def cmd_quit(shell: Shell, arg: str) -> bool:
    raise Quit


def cmd_tables(shell: Shell, arg: str) -> bool:
    pattern = arg.strip().strip("'\"")
    return _sql(shell, f"SHOW TABLES LIKE '{pattern}'" if pattern else "SHOW TABLES")


def cmd_describe(shell: Shell, arg: str) -> bool:
    name = arg.strip().rstrip(";")
    if not name:
        return cmd_tables(shell, "")
    o = shell.execute(f"DESCRIBE {_ident(name)}")
    if o is None:
        return False
    if o.table is not None and o.error is None:
        t = o.table
        keep = [
            c
            for c in ("name", "type", "primary_key", "nullable", "default_value", "comment")
            if c in t.column_names
            and (c in ("name", "type") or any(v not in (None, "") for v in t[c].to_pylist()))
        ]
        o.table = o.table.select(keep)
    ok = shell.show(o)
    if ok:
        c = shell.execute(f"SHOW CREATE TABLE {_ident(name)}")
        if c is not None and c.table is not None and c.table.num_rows:
            for ln in table_clauses(str(c.table.column(0)[0].as_py())):
                shell.output.status(ln)
    return ok


def table_clauses(ddl: str) -> list[str]:
    """The lines of SHOW CREATE TABLE after the column list and before STORED AS: the
    whole PARTITION BY clause (every range partition) and the table COMMENT."""
    lines = ddl.splitlines()
    start = lines.index(")") + 1 if ")" in lines else len(lines)
    out = []
    for ln in lines[start:]:
        if ln.startswith(("STORED AS", "TBLPROPERTIES")):
            break
        out.append(ln)
    return out


def cmd_schema(shell: Shell, arg: str) -> bool:
    name = arg.strip().rstrip(";")
    names = [name] if name else shell.catalog.tables()
    if not name:
        o = shell.execute("SHOW TABLES")
        if o is None or o.table is None:
            return o is not None and shell.show(o)
        names = [str(v) for v in o.table.column(0).to_pylist()]
    for n in names:
        o = shell.execute(f"SHOW CREATE TABLE {_ident(n)}")
        if o is None:
            return False
        if o.error is not None:
            return shell.show(o)
        if o.table is not None and o.table.num_rows:
            shell.output.result(str(o.table.column(0)[0].as_py()) + ";\n")
    return True


def cmd_databases(shell: Shell, arg: str) -> bool:
    return _sql(shell, "SHOW DATABASES")


def cmd_timing(shell: Shell, arg: str) -> bool:
    shell.settings.timing = _on_off(arg, shell.settings.timing)
    shell.note(f"Timing is {'on' if shell.settings.timing else 'off'}.")
    return True


def cmd_expanded(shell: Shell, arg: str) -> bool:
    a = arg.strip().lower()
    if not a:
        a = "off" if shell.settings.expanded == "on" else "on"
    if a not in EXPANDED_MODES:
        raise ProgrammingError(f"\\x takes on, off or auto, not {arg!r}")
    shell.settings.expanded = a
    shell.note(f"Expanded display is {a}.")
    return True


def cmd_format(shell: Shell, arg: str) -> bool:
    a = arg.strip().lower()
    aliases = {"box": "table", "duckbox": "table", "aligned": "table", "md": "markdown",
               "tabs": "tsv", "lines": "line"}  # fmt: skip
    a = aliases.get(a, a)
    if not a:
        shell.output.status(f"Output format is {shell.settings.format}.")
        return True
    if a not in FORMATS:
        raise ProgrammingError(f"unknown format {arg.strip()!r}; formats: {', '.join(FORMATS)}")
    shell.settings.format = a
    shell.note(f"Output format is {a}.")
    return True


def cmd_output(shell: Shell, arg: str) -> bool:
    name = arg.strip()
    if name in {"stdout", "-"}:
        name = ""
    shell.output.set_file(name or None)
    shell.note(f"Results go to {name}." if name else "Results go to the screen.")
    return True


def cmd_include(shell: Shell, arg: str) -> bool:
    parts = shlex.split(arg)
    if len(parts) != 1:
        raise ProgrammingError("\\i takes one file name")
    path = os.path.expanduser(parts[0])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return shell.run_text(text, source=parts[0])


def cmd_null(shell: Shell, arg: str) -> bool:
    shell.settings.null = arg.strip() or "NULL"
    shell.note(f"NULL is shown as {shell.settings.null}.")
    return True


def cmd_maxrows(shell: Shell, arg: str) -> bool:
    a = arg.strip()
    if a:
        try:
            shell.settings.maxrows = max(0, int(a))
        except ValueError:
            raise ProgrammingError(f"\\maxrows takes a number, not {a!r}") from None
    shell.note(f"Showing {shell.settings.maxrows or 'all'} rows of each result.")
    return True


def cmd_pager(shell: Shell, arg: str) -> bool:
    shell.output.pager = _on_off(arg, shell.output.pager)
    shell.note(f"Pager is {'on' if shell.output.pager else 'off'}.")
    return True


def cmd_load(shell: Shell, arg: str) -> bool:
    parts = arg.split()
    if not parts or parts[0].lower() != "tpch" or len(parts) > 2:
        raise ProgrammingError("usage: \\load tpch [scale factor], e.g. \\load tpch 0.1")
    try:
        sf = float(parts[1]) if len(parts) == 2 else tpch.DEFAULT_SF
    except ValueError:
        raise ProgrammingError(f"not a scale factor: {parts[1]!r}") from None

    def work(job: Job) -> None:
        job.label = f"TPC-H sf {tpch.sf_label(sf)}: generating"

        def progress(table: str, done: int, total: int) -> None:
            job.label = f"loading {table}"
            job.rows = (done, total)

        report = tpch.load(shell.conn, sf, progress, lambda: job.cancelled)
        job.outcome.rowcount = sum(report.tables.values())
        job.result = report

    shell._wait_idle()
    job = shell.runner.submit(f"\\load tpch {sf:g}", work)
    o = shell.wait(job)
    if o is None:
        shell.output.error("The tables loaded so far stay; DROP them or load into a new database.")
        return False
    if o.error is not None:
        return shell.show(o)
    report: tpch.LoadReport = job.result
    summary = ", ".join(f"{t} {n:,}" for t, n in report.tables.items())
    shell.output.status(
        f"Loaded TPC-H sf {tpch.sf_label(sf)} in {format_seconds(o.elapsed)}: {summary} rows."
    )
    if report.failed_rows:
        shell.output.error(f"Warning: {report.failed_rows:,} rows failed to load")
    shell.output.status("Try: SELECT l_returnflag, count(*) FROM lineitem GROUP BY 1;")
    return True


def cmd_refresh(shell: Shell, arg: str) -> bool:
    """A read-only shell takes up what the writer process published (each statement
    does so first anyway); a writer's shell always reads its latest state."""
    if not shell.conn.read_only:
        shell.note("The database is open for writing here: every statement reads its latest state.")
    elif shell.conn.refresh():
        shell.note("Refreshed: now reading what the writer process has committed.")
    else:
        shell.note("Up to date: the writer process has changed nothing since the last look.")
    return True


COMMANDS: dict[str, Callable[[Shell, str], bool]] = {
    "\\?": cmd_help, "\\h": cmd_help, "\\help": cmd_help, ".help": cmd_help,
    "\\q": cmd_quit, "\\quit": cmd_quit, ".quit": cmd_quit, ".exit": cmd_quit,
    "\\dt": cmd_tables, ".tables": cmd_tables, "\\d": cmd_describe,
    ".schema": cmd_schema, "\\l": cmd_databases, ".databases": cmd_databases,
    "\\timing": cmd_timing, ".timer": cmd_timing, "\\x": cmd_expanded,
    "\\format": cmd_format, "\\f": cmd_format, ".mode": cmd_format,
    "\\o": cmd_output, ".output": cmd_output, "\\i": cmd_include, ".read": cmd_include,
    "\\null": cmd_null, ".nullvalue": cmd_null, "\\maxrows": cmd_maxrows,
    ".maxrows": cmd_maxrows, "\\pager": cmd_pager, "\\load": cmd_load,
    "\\refresh": cmd_refresh,
}  # fmt: skip


def run(shell: Shell, line: str) -> bool:
    """Run one meta command line; False if it failed."""
    text = line.strip()
    if text.endswith(";"):
        text = text[:-1].rstrip()
    name, _, arg = text.partition(" ")
    if name.startswith("\\") and name not in COMMANDS:
        # psql allows \dt+, \x on, \d+ t
        base = name.rstrip("+")
        if base in COMMANDS:
            name = base
    fn = COMMANDS.get(name)
    if fn is None:
        raise ProgrammingError(f"unknown command {name}; \\? lists the commands")
    return fn(shell, arg)
