"""Binding statement parameters as SQL literals.

This module owns parameter substitution: ``?`` (qmark, by position), ``:name`` and
``$name`` (by name from a mapping) and ``$1`` (by number). Every value becomes a
literal printed by sqlglot (strings escaped, bytes as ``X'..'``, dates and timestamps
as typed literals) and replaces its placeholder *token*, so a value can never change the
statement's structure: ``"x'); DROP TABLE t; --"`` is one string literal.

A parameter binds only as a value: before binding, the statement is parsed with its
placeholders (``check_placement``, once per statement text), and a placeholder where a
table, column, alias or other name goes, or where an ORDER BY / GROUP BY item goes (a
number there names a column by position), is a ``ParameterPlacementError``; a string
literal in those places would otherwise pick the table or column.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import itertools
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from kudusql.common.errors import Error, InterfaceError, ProgrammingError
from kudusql.parser import DIALECT, Statement, nodes, parse
from kudusql.parser.errors import format_error
from kudusql.parser.literals import PARAMETER_AS_NAME, ParameterPlacementError, offset_of

Params = Sequence[Any] | Mapping[str, Any] | None


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds; anything else unchanged."""
    if not isinstance(value, np.generic):
        return value
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            return None
        held = value.astype("datetime64[us]").item()
        if not isinstance(held, datetime.datetime):
            raise InterfaceError(f"cannot bind {value!r}: outside the range of datetime")
        return held
    if isinstance(value, np.timedelta64 | np.void | np.object_):
        return value  # not a SQL value: ``literal`` refuses it by name
    return value.item()


def plain_params(params: Params) -> Params:
    """``params`` with numpy scalars (what numpy and pandas hand out: ``np.int64``,
    ``np.float32``, ``np.bool_``, ``np.datetime64``, ``np.str_``) as the Python values
    they hold, so that every path (the fast paths and the binder) sees the same value;
    NaT is NULL. ``params`` itself when it holds none (the common case costs one scan)."""
    if params is None or isinstance(params, str | bytes):
        return params
    if isinstance(params, Mapping):
        if any(isinstance(v, np.generic) for v in params.values()):
            return {k: _plain(v) for k, v in params.items()}
        return params
    if any(isinstance(v, np.generic) for v in params):
        return [_plain(v) for v in params]
    return params


def plain_param_sets(seq: Sequence[Params]) -> list[Params]:
    """``plain_params`` of each parameter set; the sets themselves when none holds a
    numpy scalar, found by one pass over the value types (executemany's hot path)."""
    sets = list(seq)
    if set(map(type, sets)) <= {tuple, list}:  # the usual shape: one C-level pass
        values: Iterator[Any] = itertools.chain.from_iterable(cast(list[Sequence[Any]], sets))
    else:
        values = itertools.chain.from_iterable(
            p.values() if isinstance(p, Mapping) else p
            for p in sets
            if p is not None and not isinstance(p, str | bytes)
        )
    if any(issubclass(k, np.generic) for k in set(map(type, values))):
        return [plain_params(p) for p in sets]
    return sets


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
        # A typed literal, not a CAST: out of Impala's range it stays a value (a row
        # error when written), where a CAST is NULL (``nodes.TimestampLiteral``).
        return nodes.TimestampLiteral(
            this=exp.Literal.string(value.isoformat(sep=" ")), to=exp.DataType.build("TIMESTAMP")
        )
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


def bind(sql: str, params: Params) -> str:
    """``sql`` with every placeholder replaced by its parameter's literal
    (ParameterPlacementError if one stands where a value cannot)."""
    if params is None:
        return sql
    if isinstance(params, str | bytes):
        raise InterfaceError("parameters must be a sequence or a mapping, not a string")
    check_placement(sql)
    try:
        tokens = DIALECT.tokenize(sql)
    except Exception as e:  # a tokenizer error: let the parser report it with a caret
        raise ProgrammingError(str(e)) from None
    out: list[str] = []
    pos = 0
    qmark = 0
    numbered = False  # $1-style placeholders: a value may be used more than once
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
            numbered = numbered or isinstance(key, int)
            end = nxt.end
            i += 1
        if key is not None:
            out.append(sql[pos : tok.start])
            out.append(literal_sql(_lookup(params, key, named)))
            pos = end + 1
        i += 1
    out.append(sql[pos:])
    if not named and isinstance(params, Sequence) and not numbered and qmark != len(params):
        # Too many values is an error, as too few is (sqlite3 and DuckDB refuse both): a
        # value that binds to nothing is a mistake in the statement or in the call.
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


# -- where parameters may stand -----------------------------------------------------------------
#: Statement texts whose placement verdict is kept (None: every placeholder is a value).
_PLACEMENT_SIZE = 256
_placements: OrderedDict[str, str | None] = OrderedDict()
_placements_lock = threading.Lock()

_ORDINAL = (
    "a parameter cannot be an ORDER BY or GROUP BY item: a number there would name a "
    "column by its position (bind it inside an expression, or name the column)"
)


def check_placement(sql: str) -> None:
    """Raise ParameterPlacementError if a placeholder of ``sql`` stands where a name or
    an ORDER BY / GROUP BY item goes."""
    with _placements_lock:
        known = sql in _placements
        verdict = _placements.get(sql)
        if known:
            _placements.move_to_end(sql)
    if not known:
        verdict = placement_error(sql)
        with _placements_lock:
            _placements[sql] = verdict
            if len(_placements) > _PLACEMENT_SIZE:
                _placements.popitem(last=False)
    if verdict is not None:
        raise ParameterPlacementError(verdict)


def placement_error(sql: str) -> str | None:
    """What is wrong with where the placeholders of ``sql`` stand, or None.

    A statement whose text does not parse with its placeholders in place (a placeholder
    where the grammar wants a literal constant, as a range partition bound) is left to
    the parse of the bound text; names are never among those places, since the parser
    refuses a placeholder in a name itself (``parser.names``)."""
    try:
        stmts = parse(sql)
    except ParameterPlacementError as e:
        return str(e)
    except Error:
        return None
    return statement_placement_error(stmts, sql)


def statement_placement_error(stmts: Sequence[Statement], sql: str) -> str | None:
    """``placement_error`` of statements already parsed from ``sql``."""
    for s in stmts:
        for e in _expressions(s):
            for ph in e.find_all(exp.Placeholder):
                what = _misplaced(ph)
                if what is not None:
                    at = offset_of(ph)
                    return format_error(sql, 0 if at is None else at, what, "error")
    return None


def _misplaced(ph: exp.Placeholder) -> str | None:
    parent, key = ph.parent, ph.arg_key
    if key == "alias" or isinstance(
        parent, exp.Table | exp.TableAlias | exp.Column | exp.Identifier | exp.ColumnDef | exp.Dot
    ):
        return PARAMETER_AS_NAME
    if (isinstance(parent, exp.Ordered) and key == "this") or isinstance(parent, exp.Group):
        return _ORDINAL
    return None


def _expressions(value: Any) -> Iterator[exp.Expr]:
    """Every syntax tree a parsed statement holds."""
    if isinstance(value, exp.Expr):
        yield value
    elif isinstance(value, Statement):
        for f in dataclasses.fields(value):
            yield from _expressions(getattr(value, f.name))
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _expressions(v)
