"""Errors that point at the SQL: line, column and a caret under the position.

This module owns the conversion of every failure to parse (sqlglot's ``TokenError``
and ``ParseError``, and ``KuduParseError`` which kudusql's parser raises with the exact
character offset) into ``kudusql.common.errors.ProgrammingError`` whose message reads::

    syntax error at line 2, column 8: Expected a table name
      DROP TABLE ;
                 ^

It also owns what a user sees of DuckDB's errors (``duckdb_message``): DuckDB runs SQL
that kudusql rewrote, so its text and positions are not the user's; the error keeps what
it is about (an ``Offender``: a name, a function, a literal), and ``locate.located``
finds that in the user's statement and points there the same way (``error at line 1,
...``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot.errors import ParseError, TokenError

from kudusql.common.errors import Error, ProgrammingError

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


# -- errors of DuckDB, which runs queries on SQL kudusql rewrote -----------------------------
@dataclass(frozen=True)
class Offender:
    """What an error is about, to find in the user's SQL: a ``name`` (column, table or
    alias), a ``function`` (a name before ``(``), a ``string`` or ``number`` literal, or
    ``text``, a fragment of the SQL DuckDB ran whose first name or literal is sought."""

    kind: str
    text: str


_LINE_SNIPPET = re.compile(r"\n*LINE \d+: ?(?P<line>[^\n]*)\n(?P<caret> *\^+)[^\n]*", re.S)
_INTERNAL = re.compile(r"__kudusql\w*")
_OFFENDERS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r'Referenced column "([^"]+)" (?:not found|was not found)'), "name"),
    (re.compile(r'does not have a column named "([^"]+)"'), "name"),
    (re.compile(r'Ambiguous reference to column name "([^"]+)"'), "name"),
    (re.compile(r'column "([^"]+)" must appear in the GROUP BY'), "name"),
    (re.compile(r'Referenced table "([^"]+)" not found'), "name"),
    (re.compile(r"Function with name (\w+) does not exist"), "function"),
    (re.compile(r"Macro (\w+)\(\) does not support"), "function"),
    (re.compile(r'function call "(\w+)\('), "function"),
    (re.compile(r"argument types '(\w+)\("), "function"),
    (re.compile(r"when casting from source column (\w+)"), "name"),
    (re.compile(r"Could not convert string '((?:[^']|'')*)' to"), "string"),
    (re.compile(r"Could not cast value (-?[\d.]+) to"), "number"),
]
#: Lines of DuckDB's hints about its own settings (kudusql refuses DuckDB's SET).
#: DuckDB's class of error ("Binder Error: ..."): the PEP 249 class says it.
_DUCKDB_KIND = re.compile(
    r"^(?:Binder|Catalog|Conversion|Parser|Invalid Input|Out of Range|Not implemented"
    r"|Type Mismatch|Constraint|Dependency|Invalid type|Permission) Error: "
)
#: DuckDB's internal names of integer and string types in a conversion's message.
_DUCKDB_TYPES = {
    "INT8": "TINYINT",
    "INT16": "SMALLINT",
    "INT32": "INT",
    "INT64": "BIGINT",
    "VARCHAR": "STRING",
}
_CONVERSION_TARGET = re.compile(
    r"(Could not (?:convert|cast) [^\n]* to )(" + "|".join(_DUCKDB_TYPES) + r")\b"
)
#: DuckDB's names of a value's type ("of type VARCHAR and type INTEGER_LITERAL").
_DUCKDB_TYPE_NAMES = {
    "VARCHAR": "STRING",
    "STRING_LITERAL": "STRING",
    "INTEGER_LITERAL": "INT",
    "INTEGER": "INT",
    "BLOB": "BINARY",
}
_TYPE_PHRASE = re.compile(r"\b(type )(" + "|".join(_DUCKDB_TYPE_NAMES) + r")\b")
_SETTING_HINT = re.compile(r"[^\n.]*\b(?:SET|set|setting|PRAGMA)\b[^\n]*(?:=|setting|TO )[^\n]*")
_LIST_LINES = 10


def duckdb_message(message: str) -> tuple[str, Offender | None]:
    """DuckDB's message in the user's terms, and what it is about.

    The SQL DuckDB ran (``LINE 1: ...`` and its caret) is dropped: it is kudusql's
    rewriting of the statement, not what the user wrote; the fragment it marked is kept
    to locate. Internal names leave the candidate lists ("Candidate bindings") and
    "Did you mean" hints; the name DuckDB gives a registered table ("Values list") is a
    table's; hints about DuckDB's own settings go; long lists of candidates are cut; DuckDB's class
    of error ("Binder Error: ") goes (the error's class says it) and its internal type
    names (INT32, VARCHAR, INTEGER_LITERAL) become SQL's (INT, STRING)."""
    offender: Offender | None = None
    snippet = _LINE_SNIPPET.search(message)
    if snippet is not None:
        line, caret = snippet.group("line"), snippet.group("caret")
        start = len(caret) - len(caret.lstrip(" "))
        fragment = line[start : start + len(caret.strip())]
        offender = Offender("text", fragment) if fragment.strip() else None
        message = message[: snippet.start()] + message[snippet.end() :]
    for pattern, kind in _OFFENDERS:
        m = pattern.search(message)
        if m is not None:
            text = m.group(1).replace("''", "'") if kind == "string" else m.group(1)
            offender = Offender(kind, text)
            break
    message = message.replace("Values list ", "Table ")
    message = _without_internal_candidates(message)
    message = re.sub(r'\n?Did you mean "[^"]*__kudusql[^"]*"\?', "", message)
    message = re.sub(r"\n*Did you mean: [^\n]*", "", message)  # DuckDB's settings
    message = _SETTING_HINT.sub("", message)
    message = "\n".join(_cut_lists(message.rstrip().splitlines()))
    message = _DUCKDB_KIND.sub("", message.lstrip())
    message = _CONVERSION_TARGET.sub(lambda m: m.group(1) + _DUCKDB_TYPES[m.group(2)], message)
    message = _TYPE_PHRASE.sub(lambda m: m.group(1) + _DUCKDB_TYPE_NAMES[m.group(2)], message)
    return message.rstrip(), offender


def _without_internal_candidates(message: str) -> str:
    def keep(m: re.Match[str]) -> str:
        names = [n for n in re.findall(r'"[^"]*"', m.group(3)) if not _INTERNAL.search(n)]
        return f"{m.group(1)}{m.group(2)} {', '.join(names)}" if names else ""

    return re.sub(r"(\n?)(Candidate bindings:)([^\n]*)", keep, message)


def _cut_lists(lines: list[str]) -> list[str]:
    """At most ``_LIST_LINES`` lines of each indented list (DuckDB's candidates)."""
    out: list[str] = []
    run = 0
    for line in lines:
        if line.startswith("\t") and "(" in line:
            run += 1
            if run == _LIST_LINES + 1:
                out.append("\t...")
            if run > _LIST_LINES:
                continue
        else:
            run = 0
        out.append(line)
    return out


def with_offender(error: Error, offender: Offender | None) -> Error:
    """``error``, remembering what it is about (``locate.located`` points at it)."""
    error.offender = offender  # type: ignore[attr-defined]
    return error
