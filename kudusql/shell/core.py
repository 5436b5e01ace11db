"""Owns running input in the shell, interactive or not: cutting it into statements and
meta commands, running each (statements in a worker so Ctrl-C cancels them, with a
progress line while they take long), and showing results, row counts, elapsed time,
DML row-error warnings and errors.

``Shell.run_text`` is the one entry point for a line typed at the prompt, ``-c``, a
file and standard input. In scripts it stops at the first failing statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TextIO

from kudusql.dbapi import Connection
from kudusql.shell import errors, meta
from kudusql.shell.completion import Catalog
from kudusql.shell.formatting import Style, footer, format_seconds, render
from kudusql.shell.output import Output
from kudusql.shell.progress import ProgressLine
from kudusql.shell.runner import Job, Outcome, Runner
from kudusql.shell.splitter import Piece, split

NULL_ANSI = ("\x1b[2;3m", "\x1b[0m")
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)


@dataclass
class Settings:
    """What the meta commands change."""

    format: str = "table"
    expanded: str = "off"
    timing: bool = False
    maxrows: int = 0  # 0: every row
    null: str = "NULL"


class Shell:
    def __init__(
        self,
        conn: Connection,
        out: TextIO,
        err: TextIO,
        *,
        interactive: bool,
        settings: Settings | None = None,
        debug: bool = False,
        path: str = "",
    ) -> None:
        self.conn = conn
        self.output = Output(out, err, interactive=interactive)
        self.interactive = interactive
        self.settings = settings or Settings()
        self.debug = debug
        self.path = path
        self.runner = Runner(conn)
        self.catalog = Catalog(self.runner.try_query)
        self.failed = False

    # -- input --------------------------------------------------------------------------------
    def run_text(self, text: str, *, source: str | None = None, stop_on_error: bool = True) -> bool:
        """Run every statement and meta command of ``text``; False if one failed (then,
        with ``stop_on_error``, the rest are skipped)."""
        ok = True
        for piece in split(text):
            if not self.run_piece(piece, source=source):
                ok = False
                self.failed = True
                if stop_on_error:
                    break
        return ok

    def run_piece(self, piece: Piece, *, source: str | None = None) -> bool:
        if piece.meta:
            try:
                return meta.run(self, piece.text)
            except (errors.Quit, KeyboardInterrupt):
                raise
            except Exception as e:
                self.output.error(errors.describe(e, debug=self.debug))
                return False
        outcome = self.execute(piece.text)
        if outcome is None:
            return False
        return self.show(outcome, piece, source)

    # -- statements --------------------------------------------------------------------------
    def _wait_idle(self) -> None:
        if not self.runner.busy():
            return
        self.output.status("waiting for the cancelled statement to finish (Ctrl-C stops waiting)")
        job = self.runner.current
        while job is not None and not job.wait(0.1):
            pass

    def execute(self, sql: str) -> Outcome | None:
        """Run ``sql`` in the worker and wait; None if Ctrl-C cancelled it."""
        self._wait_idle()
        job = self.runner.submit(sql)
        return self.wait(job)

    def wait(self, job: Job) -> Outcome | None:
        prog = ProgressLine(self.output.err, enabled=self.interactive and self.output.is_tty())
        try:
            while not job.wait(0.1):
                rows = job.rows if job.rows is not None else job.scan_rows()
                if rows is not None:
                    done, total = rows
                    prog.update(job.label, done / total if total else None, done, total)
                else:
                    pct = job.progress()
                    prog.update(job.label, None if pct is None else pct / 100)
        except KeyboardInterrupt:
            prog.clear()
            stopped = job.cancel()
            self.catalog.invalidate()
            self.output.error(
                "Cancelled."
                if stopped
                else "Cancelled: the statement is finishing a storage step in the "
                "background; its result will be discarded."
            )
            return None
        finally:
            prog.clear()
        self.catalog.invalidate()
        return job.outcome

    def style(self) -> Style:
        cols, _ = self.output.size()
        colour = self.output.to_console and self.output.is_tty()
        return Style(
            format=self.settings.format,
            expanded=self.settings.expanded,
            width=cols if self.output.to_console else 0,
            null=self.settings.null,
            null_ansi=NULL_ANSI if colour else ("", ""),
        )

    def show(self, o: Outcome, piece: Piece | None = None, source: str | None = None) -> bool:
        elapsed = o.elapsed if self.settings.timing else None
        if o.error is not None:
            first = piece.line if piece is not None else 1
            msg = errors.describe(o.error, o.sql, first_line=first, debug=self.debug)
            if source and not self.interactive:
                msg = f"{source}:{first}: {msg}"
            self.output.error(msg)
            return False
        human = self.settings.format == "table" or self.interactive
        if o.table is not None:
            table = o.table
            total = table.num_rows
            limit = self.settings.maxrows
            if limit and total > limit and self.output.to_console:
                table = table.slice(0, limit)
            self.output.result(render(table, self.style()))
            if human and (self.settings.format in ("table", "line") or self.interactive):
                shown = table.num_rows if table.num_rows < total else None
                note = footer(total, elapsed, shown=shown)
                if shown is not None:
                    note += f"  (\\maxrows {limit}; \\maxrows 0 shows all)"
                self.output.status(note)
        elif human:
            words = _COMMENTS.sub(" ", o.sql).split(None, 1)
            verb = words[0].upper() if words else "OK"
            if o.rowcount >= 0:
                text = f"{verb} {o.rowcount:,} row" + ("" if o.rowcount == 1 else "s")
            else:
                text = "OK"
            if elapsed is not None:
                text += f" ({format_seconds(elapsed)})"
            self.output.status(text)
        if o.warnings:
            self.warn(o.warnings)
        return True

    def note(self, text: str) -> None:
        """A confirmation of a meta command: shown only in the interactive shell."""
        if self.interactive:
            self.output.status(text)

    def warn(self, warnings: list[str]) -> None:
        head, *samples = warnings
        lines = [f"Warning: {head}"] + [f"  {s}" for s in samples]
        self.output.error("\n".join(lines))

    def close(self) -> None:
        """Stop a running statement, close the \\o file and the connection."""
        job = self.runner.current
        if job is not None and not job.done.is_set():
            job.cancel(grace=5.0)
        self.output.close()
        self.conn.close()
