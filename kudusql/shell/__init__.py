"""Owns the interactive SQL shell and the ``kudusql`` command line (issue 7).

Modules: ``cli`` (arguments, modes, exit codes), ``repl`` (the prompt_toolkit prompt),
``core`` (running input and showing results), ``runner`` (statements in a worker
thread, cancellation), ``engine_hooks`` (interrupt and progress beyond PEP 249),
``meta`` (backslash and dot commands), ``splitter`` (where statements end),
``completion``, ``highlight`` and ``keywords`` (editing), ``formatting`` (output
formats), ``output`` (console, ``\\o`` file, pager), ``progress`` (the progress line),
``errors`` (error text with caret, ``Quit``), ``tpch`` (``\\load tpch``).
"""

from kudusql.shell.cli import main

__all__ = ["main"]
