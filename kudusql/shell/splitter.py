"""Owns the shell's lexical view of input text: where statements end.

The shell must know, while the user types, whether the buffer holds complete
statements (each ended by ``;`` outside strings, quoted names and comments) and must
cut a script into statements and meta commands (a line starting with ``\\`` or ``.``
where a statement would start). This is a small scanner, not the SQL parser, but it
reads quotes and comments exactly as the parser's tokenizer does
(``parser.dialect.KuduTokenizer``): strings in ``'..'`` or ``".."`` (a backslash
escapes the next character, a doubled quote is one quote), names in backticks (a
doubled backtick is one) and comments (``--`` to the end of the line, ``/* */`` not
nested).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    """One unit of input: a SQL statement (without its ``;``) or a meta command line.

    ``line`` is the 1-based line of the input where the piece starts."""

    text: str
    line: int
    meta: bool = False


def is_meta(line: str) -> bool:
    s = line.lstrip()
    return s.startswith("\\") or (s.startswith(".") and s[1:2].isalpha())


def _scan(text: str) -> tuple[list[tuple[int, int, bool]], int]:
    """Statement spans ``(start, end_of_semicolon)`` and where the unterminated tail
    starts. Meta command lines at statement starts are spans too (ending at the newline)."""
    spans: list[tuple[int, int, bool]] = []
    i, n = 0, len(text)
    start = 0
    at_start = True  # only whitespace since ``start``
    while i < n:
        c = text[i]
        if at_start:
            if c in " \t\r\n":
                i += 1
                continue
            line_start = text.rfind("\n", 0, i) + 1
            if text[line_start:i].strip() == "" and is_meta(text[i:]):
                end = text.find("\n", i)
                end = n if end < 0 else end
                spans.append((i, end, True))
                i = start = end
                continue
            at_start = False
            start = i
        if c == "'" or c == '"' or c == "`":
            j = _quoted_end(text, i, c)
            if j < 0:
                return spans, start
            i = j
        elif c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return spans, start
            i = j + 2
        elif c == ";":
            spans.append((start, i + 1, False))
            i += 1
            start = i
            at_start = True
        else:
            i += 1
    return spans, (n if at_start else start)


# A string or quoted name from its opening quote to just past its closing one. Strings
# take a backslash before any character; a doubled quote is one quote. Possessive
# repetition: an unterminated one fails in linear time.
_QUOTED = {
    "'": re.compile(r"'(?:[^'\\]|\\.|'')*+'", re.S),
    '"': re.compile(r'"(?:[^"\\]|\\.|"")*+"', re.S),
    "`": re.compile(r"`(?:[^`]|``)*+`"),
}


def _quoted_end(text: str, i: int, quote: str) -> int:
    """Where the string or quoted name opened by ``quote`` at ``i`` ends (just past its
    closing quote), or -1 if it does not."""
    m = _QUOTED[quote].match(text, i)
    return -1 if m is None else m.end()


def is_complete(text: str) -> bool:
    """True when ``text`` should run on Enter: empty, a meta command, or every
    statement ended by ``;`` (nothing but whitespace and comments after the last)."""
    if not text.strip():
        return True
    if is_meta(text) and "\n" not in text.strip():
        return True
    _spans, tail = _scan(text)
    rest = text[tail:]
    return not _strip_comments(rest).strip()


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"--[^\n]*", " ", text)


def split(text: str) -> list[Piece]:
    """Statements and meta commands of ``text`` in order; an unterminated last
    statement is included (scripts need not end with ``;``)."""
    spans, tail = _scan(text)
    if _strip_comments(text[tail:]).strip():
        spans.append((tail, len(text), False))
    out: list[Piece] = []
    for a, b, meta in spans:
        chunk = text[a:b]
        line = text.count("\n", 0, a) + 1
        if meta:
            out.append(Piece(chunk.strip(), line, meta=True))
            continue
        body = chunk[:-1] if chunk.endswith(";") else chunk
        if not _strip_comments(body).strip():
            continue
        out.append(Piece(body.strip(), line + _leading_lines(body)))
    return out


def _leading_lines(body: str) -> int:
    stripped = body.lstrip()
    return body[: len(body) - len(stripped)].count("\n")


def current_statement(text: str) -> str:
    """The statement the cursor is in when ``text`` is everything before the cursor:
    the text after the last complete statement."""
    _, tail = _scan(text)
    return text[tail:]
