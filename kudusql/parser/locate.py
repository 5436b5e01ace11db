"""Pointing an error at what it is about in the user's statement.

This module owns ``located``: an error that remembers what it is about (an
``errors.Offender``: a name, a function, a literal, or a fragment of the SQL DuckDB ran)
gets the line, column and caret of that offender's first occurrence as a token of its
kind in the user's SQL, as a syntax error does. The statement is tokenized with the
kudusql dialect, so names and literals are found as the parser reads them.
"""

from __future__ import annotations

from sqlglot.tokenizer_core import TokenType

from kudusql.common.errors import Error
from kudusql.parser.dialect import DIALECT
from kudusql.parser.errors import Offender, format_error

#: The tokens a ``text`` offender is sought by: its names and literals.
_LOCATABLE = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING, TokenType.NUMBER})


def located(error: Error, sql: str) -> Error:
    """``error`` pointing at what it is about in the user's ``sql`` (line, column and
    a caret, as a syntax error does), when it names something found there."""
    offender = getattr(error, "offender", None)
    if not isinstance(offender, Offender) or not sql:
        return error
    at = locate(sql, offender)
    if at is None:
        return error
    out = type(error)(format_error(sql, at, str(error), "error"))
    out.offender = None  # type: ignore[attr-defined]
    return out


def locate(sql: str, offender: Offender) -> int | None:
    """The character offset in ``sql`` of what ``offender`` names (its first
    occurrence as a token of that kind), or None."""
    try:
        tokens = DIALECT.tokenize(sql)
    except Exception:  # the statement parsed before; a tokenizer error only loses the caret
        return None
    if offender.kind == "text":
        try:
            wanted = [t for t in DIALECT.tokenize(offender.text) if t.token_type in _LOCATABLE]
        except Exception:
            return None
        for want in wanted:
            kind = "string" if want.token_type is TokenType.STRING else "name"
            kind = "number" if want.token_type is TokenType.NUMBER else kind
            at = locate(sql, Offender(kind, want.text))
            if at is not None:
                return at
        return None
    folded = offender.text.lower()
    for i, t in enumerate(tokens):
        if offender.kind == "string":
            hit = t.token_type is TokenType.STRING and t.text == offender.text
        elif offender.kind == "number":
            hit = t.token_type is TokenType.NUMBER and t.text == offender.text
        else:
            hit = t.token_type not in (TokenType.STRING, TokenType.NUMBER) and (
                t.text.lower() == folded
            )
            if hit and offender.kind == "function":
                hit = i + 1 < len(tokens) and tokens[i + 1].token_type is TokenType.L_PAREN
        if hit:
            return int(t.start)
    return None
