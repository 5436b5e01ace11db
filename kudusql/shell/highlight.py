"""Owns SQL syntax highlighting in the input line: a lexer and the colour style.

With Pygments installed (it usually is, next to prompt_toolkit) the input is lexed by
its ``SqlLexer``; otherwise a small built-in lexer colours keywords, strings, numbers,
comments and meta commands.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.lexers import Lexer, PygmentsLexer
from prompt_toolkit.styles import Style

from kudusql.shell.keywords import KEYWORDS

STYLE = Style.from_dict(
    {
        "pygments.keyword": "bold ansiblue",
        "pygments.name.builtin": "ansicyan",
        "pygments.literal.string": "ansigreen",
        "pygments.literal.string.single": "ansigreen",
        "pygments.literal.string.symbol": "ansiyellow",
        "pygments.literal.number": "ansimagenta",
        "pygments.comment": "italic ansibrightblack",
        "pygments.operator": "ansibrightblack",
        "meta": "bold ansiyellow",
        "prompt": "bold",
        "completion-menu.completion": "bg:#303030 #dddddd",
        "completion-menu.completion.current": "bg:#5f87af #ffffff",
        "completion-menu.meta.completion": "bg:#262626 #999999",
        "completion-menu.meta.completion.current": "bg:#5f87af #eeeeee",
        "continuation": "ansibrightblack",
    }
)

_TOKEN = re.compile(
    r"(?P<comment>--[^\n]*|/\*.*?(\*/|$))"
    r"|(?P<string>'([^'\\]|\\.|'')*('|$)|\"([^\"\\]|\\.|\"\")*(\"|$))"
    r"|(?P<ident>`([^`]|``)*(`|$))"
    r"|(?P<number>\b\d+(\.\d*)?([eE][-+]?\d+)?\b)"
    r"|(?P<word>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<other>.)",
    re.S,
)
_KEYWORDS = {k.upper() for k in KEYWORDS}
_CLASSES = {
    "comment": "class:pygments.comment",
    "string": "class:pygments.literal.string",
    "ident": "class:pygments.literal.string.symbol",
    "number": "class:pygments.literal.number",
}


class SimpleSqlLexer(Lexer):
    """Keywords, strings, quoted names, numbers and comments; meta commands."""

    def lex_document(self, document: Document) -> Callable[[int], StyleAndTextTuples]:
        text = document.text
        lines: list[StyleAndTextTuples] = [[]]
        if text.lstrip().startswith(("\\", ".")):
            styled: list[tuple[str, str]] = [("class:meta", text)]
        else:
            styled = []
            for m in _TOKEN.finditer(text):
                kind = m.lastgroup or "other"
                tok = m.group(0)
                if kind == "word":
                    cls = "class:pygments.keyword" if tok.upper() in _KEYWORDS else ""
                else:
                    cls = _CLASSES.get(kind, "")
                styled.append((cls, tok))
        for cls, tok in styled:
            parts = tok.split("\n")
            for k, part in enumerate(parts):
                if k:
                    lines.append([])
                if part:
                    lines[-1].append((cls, part))

        def get_line(i: int) -> StyleAndTextTuples:
            return lines[i] if i < len(lines) else []

        return get_line


def make_lexer() -> Lexer:
    """Pygments' SQL lexer when available, else ``SimpleSqlLexer``."""
    try:
        sql = importlib.import_module("pygments.lexers.sql")
    except ImportError:
        return SimpleSqlLexer()
    return PygmentsLexer(sql.SqlLexer)
