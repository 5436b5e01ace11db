"""Syntax errors that point at the SQL: line, column and a caret under the position.

This module owns the conversion of every failure to parse (sqlglot's ``TokenError``
and ``ParseError``, and ``KuduParseError`` which kudusql's parser raises with the exact
character offset) into ``kudusql.common.errors.ProgrammingError`` whose message reads::

    syntax error at line 2, column 8: Expected a table name
      DROP TABLE ;
                 ^
"""

from __future__ import annotations

import re

from sqlglot.errors import ParseError, TokenError

from kudusql.common.errors import ProgrammingError

_TOKEN_POS = re.compile(r"from (\d+):(\d+)")


class KuduParseError(ParseError):
    """A parse failure at character ``offset`` of the SQL text (-1 if unknown)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message, [{"description": message}])
        self.description = message
        self.offset = offset


def position(sql: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of character ``offset`` in ``sql``."""
    offset = max(0, min(offset, len(sql)))
    line = sql.count("\n", 0, offset) + 1
    column = offset - (sql.rfind("\n", 0, offset) + 1) + 1
    return line, column


def format_error(sql: str, offset: int, message: str, kind: str = "syntax error") -> str:
    """``message`` with the line and column of ``offset`` and the line with a caret."""
    line, column = position(sql, offset)
    text = sql.splitlines()[line - 1] if sql.splitlines()[line - 1 : line] else ""
    expanded = text.expandtabs(1)
    caret = " " * (column - 1) + "^"
    return f"{kind} at line {line}, column {column}: {message}\n  {expanded}\n  {caret}"


def programming_error(sql: str, error: Exception) -> ProgrammingError:
    """The ProgrammingError a user sees for ``error`` raised while parsing ``sql``."""
    if isinstance(error, KuduParseError):
        return ProgrammingError(format_error(sql, error.offset, _plain(error.description)))
    if isinstance(error, TokenError):
        cause = error.__cause__
        detail = str(cause) if cause is not None else str(error)
        m = _TOKEN_POS.search(detail)
        offset = int(m.group(2)) if m else min((error.start or 0) + 50, len(sql))
        what = detail.split(" from ")[0] if m else "cannot read the SQL text"
        if not m and offset >= len(sql):
            what = "the SQL text ends inside a comment, string or quoted name"
        if what.startswith("Missing "):
            what = f"unterminated literal or identifier ({what.lower()})"
        return ProgrammingError(format_error(sql, offset, what))
    if isinstance(error, ParseError):
        first = error.errors[0] if error.errors else {}
        description = first.get("description") or str(error).split(". Line")[0]
        return ProgrammingError(format_error(sql, _offset_of(sql, first), _plain(str(description))))
    return ProgrammingError(f"syntax error: {error}")


# sqlglot's "Required keyword: 'this' missing for <class 'sqlglot....EQ'>": an operator
# without one of its operands. Said in SQL terms, without sqlglot's internals.
_MISSING_OPERAND = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*\.(\w+)'>")


def _plain(description: str) -> str:
    m = _MISSING_OPERAND.search(description)
    if m is None:
        return description
    name = m.group(2)
    if name in _BINARY:
        side = "left" if m.group(1) == "this" else "right"
        what = f"the {side} operand of {_BINARY[name]} is missing"
    else:
        what = f"{name.upper()} is incomplete"
    return description[: m.start()] + what + description[m.end() :]


_BINARY = {
    "EQ": "=",
    "NEQ": "<>",
    "GT": ">",
    "GTE": ">=",
    "LT": "<",
    "LTE": "<=",
    "And": "AND",
    "Or": "OR",
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "Div": "/",
    "Mod": "%",
    "Like": "LIKE",
    "ILike": "ILIKE",
    "DPipe": "||",
}


def _offset_of(sql: str, err: dict[str, object]) -> int:
    line, col = err.get("line"), err.get("col")
    if not isinstance(line, int) or not isinstance(col, int):
        return 0
    starts = [0] + [i + 1 for i, ch in enumerate(sql) if ch == "\n"]
    base = starts[line - 1] if 0 < line <= len(starts) else 0
    highlight = err.get("highlight")
    width = len(highlight) if isinstance(highlight, str) else 1
    return base + max(col - width, 0)
