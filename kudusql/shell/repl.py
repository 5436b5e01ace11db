"""Owns the interactive prompt: the prompt_toolkit session (multi-line input that runs
when it ends with ``;``, persistent history, highlighting, completion) and the loop
that hands each input to ``Shell.run_text``.

Keys: Enter runs the input when it is complete (statements end with ``;``; meta
commands run at once) and otherwise starts a new line; Alt-Enter always inserts a
newline. Ctrl-C clears the input (or cancels the running statement); Ctrl-D on an
empty line quits.
"""

from __future__ import annotations

import os
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.enums import EditingMode
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output as PtOutput

from kudusql import __version__
from kudusql.shell.completion import SqlCompleter
from kudusql.shell.core import Shell
from kudusql.shell.errors import Quit
from kudusql.shell.highlight import STYLE, make_lexer
from kudusql.shell.splitter import is_complete

PROMPT = "kudusql"


def history_path() -> Path:
    """``$KUDUSQL_HISTORY``, else ``~/.kudusql_history``."""
    env = os.environ.get("KUDUSQL_HISTORY")
    return Path(env) if env else Path.home() / ".kudusql_history"


def welcome(shell: Shell) -> str:
    where = "read-only " if shell.conn.session.db.read_only else ""
    return (
        f"kudusql {__version__} — {where}database {shell.path}\n"
        "Enter SQL ending with ';'. \\? for help, \\q or Ctrl-D to quit, "
        "\\load tpch to load TPC-H sample data."
    )


def key_bindings() -> KeyBindings:
    kb = KeyBindings()

    @kb.add("enter", filter=Condition(lambda: True))
    def _enter(event: KeyPressEvent) -> None:
        buf = event.current_buffer
        if buf.complete_state is not None and buf.complete_state.current_completion:
            buf.apply_completion(buf.complete_state.current_completion)
            return
        at_end = not buf.document.text_after_cursor.strip()
        if at_end and is_complete(buf.text):
            buf.validate_and_handle()
        else:
            buf.insert_text("\n")

    @kb.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return kb


class Repl:
    def __init__(
        self,
        shell: Shell,
        *,
        input: Input | None = None,
        output: PtOutput | None = None,
        history: History | None = None,
        vi: bool = False,
    ) -> None:
        self.shell = shell
        if history is None:
            try:
                path = history_path()
                path.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(path))
            except OSError:
                history = InMemoryHistory()
        self.session: PromptSession[str] = PromptSession(
            message=self._prompt,
            multiline=True,
            prompt_continuation=self._continuation,
            history=history,
            lexer=make_lexer(),
            completer=SqlCompleter(shell.catalog),
            complete_while_typing=True,
            auto_suggest=AutoSuggestFromHistory(),
            key_bindings=key_bindings(),
            style=STYLE,
            include_default_pygments_style=False,
            enable_history_search=False,
            editing_mode=EditingMode.VI if vi else EditingMode.EMACS,
            input=input,
            output=output,
        )

    def _prompt(self) -> FormattedText:
        db = getattr(self.shell.conn.session, "database", "default")
        name = PROMPT if db == "default" else f"{PROMPT}:{db}"
        return FormattedText([("class:prompt", name + "> ")])

    def _continuation(self, width: int, line_number: int, wrap_count: int) -> FormattedText:
        return FormattedText([("class:continuation", " " * max(0, width - 5) + "...> ")])

    def loop(self) -> None:
        """Read and run input until Ctrl-D or ``\\q``."""
        while True:
            try:
                text = self.session.prompt()
            except KeyboardInterrupt:
                continue  # Ctrl-C clears the input
            except EOFError:
                return
            if not text.strip():
                continue
            if text.strip().lower() in {"quit", "exit"}:
                return
            try:
                self.shell.run_text(text, stop_on_error=False)
            except Quit:
                return
            except KeyboardInterrupt:
                self.shell.output.error("Cancelled.")
