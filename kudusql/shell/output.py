"""Owns where the shell's text goes: results to the console or to the file set with
``\\o``, status and errors to the console, and the pager.

Results taller than the screen go through a pager (``$KUDUSQL_PAGER``, ``$PAGER``,
else ``less -SRFX``) only when the shell is interactive and the console is a terminal;
``\\pager off`` turns it off. Status lines (row counts, timing) and warnings never go
to the ``\\o`` file.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
from typing import TextIO


class Output:
    def __init__(self, out: TextIO, err: TextIO, *, interactive: bool) -> None:
        self.out = out
        self.err = err
        self.interactive = interactive
        self.file: TextIO | None = None
        self.pager = True

    # -- terminal ---------------------------------------------------------------------------
    def is_tty(self) -> bool:
        try:
            return self.out.isatty()
        except (AttributeError, ValueError):
            return False

    def size(self) -> tuple[int, int]:
        """Columns and rows of the console (0, 0 when it is not a terminal)."""
        if not self.is_tty():
            return 0, 0
        s = shutil.get_terminal_size((100, 40))
        return s.columns, s.lines

    # -- \o ---------------------------------------------------------------------------------
    def set_file(self, name: str | None) -> None:
        """Send results to ``name`` (appending), or back to the console with None."""
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None
        if name:
            self.file = open(os.path.expanduser(name), "a", encoding="utf-8")  # noqa: SIM115

    @property
    def to_console(self) -> bool:
        return self.file is None

    # -- writing ----------------------------------------------------------------------------
    def result(self, text: str) -> None:
        """Result text: to the \\o file, else to the console (paged if too tall)."""
        if not text:
            return
        if self.file is not None:
            self.file.write(text)
            self.file.flush()
            return
        _cols, rows = self.size()
        tall = rows and text.count("\n") > rows - 2
        if self.interactive and self.pager and tall and self._page(text):
            return
        self.out.write(text)
        self.out.flush()

    def status(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def error(self, text: str) -> None:
        self.out.flush()
        self.err.write(text + "\n")
        self.err.flush()

    def _page(self, text: str) -> bool:
        cmd = os.environ.get("KUDUSQL_PAGER") or os.environ.get("PAGER") or "less -SRFX"
        try:
            argv = shlex.split(cmd)
        except ValueError:
            return False
        if not argv or shutil.which(argv[0]) is None:
            return False
        env = dict(os.environ)
        env.setdefault("LESS", "-SRFX")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(text.encode("utf-8", "replace"))
                proc.stdin.close()
            while True:
                try:
                    proc.wait()
                    break
                except KeyboardInterrupt:  # Ctrl-C belongs to the pager
                    continue
        except OSError:
            return False
        return True

    def close(self) -> None:
        self.set_file(None)
