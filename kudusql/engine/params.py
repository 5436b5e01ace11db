"""Binding statement parameters as SQL literals.

This module owns parameter substitution: ``?`` (qmark, by position), ``:name`` and
``$name`` (by name from a mapping) and ``$1`` (by number). Every value becomes a
literal printed by sqlglot (strings escaped, bytes as ``X'..'``, dates and timestamps
as typed literals) and replaces its placeholder *token*, so a value can never change the
statement's structure: ``"x'); DROP TABLE t; --"`` is one string literal.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from kudusql.common.errors import InterfaceError, ProgrammingError
from kudusql.parser import DIALECT

Params = Sequence[Any] | Mapping[str, Any] | None


def literal(value: Any) -> exp.Expr:
    """``value`` as a sqlglot literal expression."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return exp.cast(exp.Literal.string(repr(value)), "DOUBLE")
        text = repr(value)
        # A float binds as a DOUBLE literal (exponent form): ``1.5`` alone is a DECIMAL
        # literal in SQL, and the parameter must mean what it means unbound.
        return exp.Literal.number(text if "e" in text or "n" in text else text + "e0")
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise InterfaceError(f"cannot bind {value!r}: not a finite DECIMAL")
        return exp.Literal.number(format(value, "f"))
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return exp.HexString(this=bytes(value).hex())
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), "TIMESTAMP")
    if isinstance(value, datetime.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, datetime.time):
        return exp.cast(exp.Literal.string(value.isoformat()), "TIME")
    raise InterfaceError(
        f"cannot bind a parameter of type {type(value).__name__}: use None, bool, int, "
        "float, Decimal, str, bytes, date, time or datetime"
    )


def literal_sql(value: Any) -> str:
    return literal(value).sql(dialect=DIALECT)


def has_placeholders(sql: str) -> bool:
    return any(
        t.token_type in (TokenType.PLACEHOLDER, TokenType.PARAMETER, TokenType.COLON)
        for t in DIALECT.tokenize(sql)
    )


def bind(sql: str, params: Params) -> str:
    """``sql`` with every placeholder replaced by its parameter's literal."""
    if params is None:
        return sql
    if isinstance(params, str | bytes):
        raise InterfaceError("parameters must be a sequence or a mapping, not a string")
    try:
        tokens = DIALECT.tokenize(sql)
    except Exception as e:  # a tokenizer error: let the parser report it with a caret
        raise ProgrammingError(str(e)) from None
    out: list[str] = []
    pos = 0
    qmark = 0
    named = isinstance(params, Mapping)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        key: int | str | None = None
        end = tok.end
        if tok.token_type is TokenType.PLACEHOLDER and tok.text == "?":
            key = qmark
            qmark += 1
        elif (
            tok.token_type in (TokenType.COLON, TokenType.PARAMETER)
            and nxt is not None
            and nxt.start == tok.end + 1
            and nxt.token_type in (TokenType.VAR, TokenType.NUMBER)
        ):
            key = int(nxt.text) - 1 if nxt.token_type is TokenType.NUMBER else nxt.text
            end = nxt.end
            i += 1
        if key is not None:
            out.append(sql[pos : tok.start])
            out.append(literal_sql(_lookup(params, key, named)))
            pos = end + 1
        i += 1
    out.append(sql[pos:])
    if not named and isinstance(params, Sequence) and qmark and qmark != len(params):
        raise ProgrammingError(
            f"the statement has {qmark} parameter(s) but {len(params)} were given"
        )
    return "".join(out)


def _lookup(params: Sequence[Any] | Mapping[str, Any], key: int | str, named: bool) -> Any:
    if named:
        assert isinstance(params, Mapping)
        if key not in params:
            raise ProgrammingError(f"no value for parameter {key!r}")
        return params[key]  # type: ignore[index]
    assert isinstance(params, Sequence)
    if isinstance(key, str):
        raise ProgrammingError(f"parameter :{key} needs a mapping of parameters")
    if key < 0 or key >= len(params):
        raise ProgrammingError(
            f"the statement needs parameter {key + 1} but {len(params)} were given"
        )
    return params[key]
