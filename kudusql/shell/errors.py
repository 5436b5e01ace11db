"""Owns how the shell reports a failed statement: the message, the SQL line with a
caret under the position, line numbers relative to the whole input, and a Python
traceback only in ``--debug`` mode.

Parser errors already carry ``line N, column M`` and a caret (relative to the
statement); they are shifted to the statement's line in the input. Other errors that
name a table or column the SQL contains get the caret added here.

It also owns ``Quit``, what ``\\q`` raises to end the shell.
"""

from __future__ import annotations

import re
import traceback

from kudusql.common.errors import Error


class Quit(Exception):
    """Raised by ``\\q`` to end the shell; carries nothing."""


_AT_LINE = re.compile(r"\bat line (\d+)")
_QUOTED = re.compile(r"""['"]([A-Za-z_][\w.]*)['"]""")


def _caret(sql: str, message: str) -> str | None:
    """The SQL line with a caret under the first name quoted in ``message``."""
    for m in _QUOTED.finditer(message):
        name = m.group(1).split(".")[-1]
        hit = re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", sql, re.I)
        if hit is None:
            continue
        start = sql.rfind("\n", 0, hit.start()) + 1
        end = sql.find("\n", hit.start())
        line = sql[start : end if end >= 0 else len(sql)]
        lineno = sql.count("\n", 0, hit.start()) + 1
        col = hit.start() - start
        return f"LINE {lineno}: {line}\n" + " " * (len(f"LINE {lineno}: ") + col) + "^"
    return None


def describe(e: BaseException, sql: str = "", *, first_line: int = 1, debug: bool = False) -> str:
    """The text to show for ``e`` raised by ``sql`` (which starts at ``first_line``)."""
    if debug:
        tb = "".join(traceback.format_exception(e)).rstrip()
    if isinstance(e, Error):
        msg = str(e) or type(e).__name__
        if first_line > 1:
            msg = _AT_LINE.sub(lambda m: f"at line {int(m.group(1)) + first_line - 1}", msg)
        text = f"Error: {msg}"
        if "\n" not in msg and "^" not in msg and "LINE " not in msg and sql:
            caret = _caret(sql, msg)
            if caret:
                text += "\n" + caret
    elif isinstance(e, OSError):
        text = f"Error: {e.strerror or e}" + (f": {e.filename}" if e.filename else "")
    else:
        text = (
            f"Internal error: {type(e).__name__}: {e}\n"
            "(this is a bug in kudusql; run with --debug to see the traceback)"
        )
    if debug:
        return f"{tb}\n{text}"
    return text
