"""Constant expressions in DDL: DEFAULT values, range partition bounds and split rows.

This module owns the folding of a constant expression into a natural Python value
(the values of ``literals.constant``: int, Decimal, float, str, bool, None, bytes,
date, datetime, tuples). Impala accepts any constant expression where DDL takes a
value (``DEFAULT 1 + 1``, ``PARTITION VALUES < 10 * 10``, ``VALUE = factorial(6)``,
``DEFAULT CAST('2009-01-01' AS TIMESTAMP)``); the parser must fold them without running
a query, so this is a small evaluator of its own: arithmetic (``+ - * / DIV %``),
unary minus, ``CAST``, ``CASE``-free conditionals (``if``, ``coalesce``) and a fixed
set of deterministic functions. A column, a subquery or a function whose value is not
fixed (``now()``, ``rand()``, ``uuid()``, ...) is an error naming it.

Arithmetic follows Impala's result types where the column type cannot tell the
difference: integers stay exact, ``/`` of two numbers is a DOUBLE, any DECIMAL operand
makes the result exact decimal, any DOUBLE operand makes it a double. The caller then
converts the value to the column type with ``literals.coerce`` (an out-of-range or
inexact value is an error there).
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlglot import exp

from kudusql.common.types import DataType, TypeKind
from kudusql.parser.literals import StatementError, coerce, constant, data_type

__all__ = ["fold"]

#: Functions whose value changes from call to call or with the session: never constants.
NON_DETERMINISTIC = frozenset(
    {
        "now",
        "current_timestamp",
        "current_date",
        "current_time",
        "localtime",
        "localtimestamp",
        "utc_timestamp",
        "unix_timestamp",
        "sysdate",
        "rand",
        "random",
        "uuid",
        "gen_random_uuid",
        "nextval",
        "currval",
        "pid",
        "user",
        "current_user",
        "effective_user",
        "logged_in_user",
        "current_database",
        "current_session",
        "version",
        "coordinator",
    }
)

_NON_DETERMINISTIC_NODES: tuple[type[exp.Expr], ...] = (
    exp.Rand,
    exp.Uuid,
    exp.CurrentTimestamp,
    exp.CurrentDate,
    exp.CurrentTime,
    exp.UtcTimestamp,
    exp.CurrentUser,
)

_LEAVES = (exp.Literal, exp.Null, exp.Boolean, exp.HexString)
_DEC = decimal.Context(prec=38, rounding=decimal.ROUND_HALF_UP)


def fold(node: exp.Expr, what: str) -> Any:
    """The natural Python value of the constant expression ``node``; ``what`` names the
    value in errors (``DEFAULT of column 'd'``)."""
    return _Folder(what).value(node)


def _sql(node: exp.Expr) -> str:
    return node.sql("kudusql")


class _Folder:
    def __init__(self, what: str) -> None:
        self.what = what

    def error(self, message: str, node: exp.Expr) -> StatementError:
        return StatementError(f"{self.what}: {message}", node)

    def not_constant(self, node: exp.Expr, why: str) -> StatementError:
        text = f"{_function_name(node)}()" if isinstance(node, exp.Func) else _sql(node)
        return self.error(f"only constant values are allowed, not {text} ({why})", node)

    # -- the walk ----------------------------------------------------------------------------
    def value(self, node: exp.Expr) -> Any:
        if isinstance(node, _LEAVES):
            return constant(node, self.what)
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        if isinstance(node, exp.Tuple):
            return tuple(self.value(e) for e in node.expressions)
        if isinstance(node, exp.Neg):
            v = self.number(node.this)
            return None if v is None else -v
        if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
            return self.cast(self.value(node.this), data_type(node.to), node)
        if isinstance(node, exp.Binary) and type(node) in _ARITHMETIC:
            return self.arithmetic(node)
        if isinstance(node, _NON_DETERMINISTIC_NODES):
            raise self.not_constant(node, "its value is not fixed")
        if isinstance(node, exp.Func):
            return self.function(node)
        if isinstance(node, exp.Column | exp.Identifier | exp.Star):
            raise self.not_constant(node, "a column")
        if isinstance(node, exp.Query | exp.Subquery):
            raise self.not_constant(node, "a query")
        raise self.error(
            f"{_sql(node)} is not a constant kudusql can evaluate (use literals, "
            "arithmetic, CAST and deterministic functions)",
            node,
        )

    def number(self, node: exp.Expr) -> int | float | Decimal | None:
        v = self.value(node)
        if v is None or (isinstance(v, int | float | Decimal) and not isinstance(v, bool)):
            return v
        raise self.error(f"{_sql(node)} is not a number", node)

    def arithmetic(self, node: exp.Binary) -> Any:
        a, b = self.number(node.this), self.number(node.expression)
        if a is None or b is None:
            return None
        op = _ARITHMETIC[type(node)]
        if isinstance(node, exp.Div):
            if b == 0:
                return None  # Impala: division by zero is NULL
            return float(a) / float(b) if not _any(Decimal, a, b) else _DEC.divide(_d(a), _d(b))
        if isinstance(node, exp.IntDiv | exp.Mod) and b == 0:
            return None
        if isinstance(node, exp.IntDiv):
            if not isinstance(a, int) or not isinstance(b, int):
                raise self.error("DIV takes integers", node)
            q = abs(a) // abs(b)  # truncates toward zero, as Impala's DIV
            return q if (a >= 0) == (b >= 0) else -q
        if isinstance(node, exp.Mod):  # the sign of the dividend, as C's fmod
            if _any(float, a, b):
                return math.fmod(a, b)
            if _any(Decimal, a, b):
                return _d(a) % _d(b)
            r = abs(int(a)) % abs(int(b))
            return r if a >= 0 else -r
        if _any(float, a, b):
            return op(float(a), float(b))
        if _any(Decimal, a, b):
            return op(_d(a), _d(b))
        return op(a, b)

    # -- CAST ------------------------------------------------------------------------------
    def cast(self, v: Any, dtype: DataType, node: exp.Expr) -> Any:
        if v is None:
            return None
        kind = dtype.kind
        try:
            if kind in (TypeKind.STRING, TypeKind.VARCHAR):
                text = _text(v)
                return text[: dtype.length] if dtype.length else text
            if kind in _INTEGER_KINDS:
                if isinstance(v, bool):
                    return int(v)
                if isinstance(v, str):
                    return coerce(int(v.strip()), dtype, self.what, node)
                if isinstance(v, float):
                    v = int(v)  # Impala truncates a DOUBLE cast to an integer
                elif isinstance(v, Decimal):
                    v = int(v.to_integral_value(rounding=decimal.ROUND_HALF_UP))
            elif kind is TypeKind.BOOL:
                if isinstance(v, str) and v.strip().lower() in ("true", "false"):
                    return v.strip().lower() == "true"
                if isinstance(v, int | float | Decimal):
                    return v != 0
            elif kind in (TypeKind.FLOAT, TypeKind.DOUBLE):
                v = float(v.strip()) if isinstance(v, str) else float(v)
            elif kind is TypeKind.DECIMAL and isinstance(v, str):
                v = Decimal(v.strip())
            elif kind is TypeKind.DATE and isinstance(v, datetime.datetime):
                return v.date()
            elif kind is TypeKind.BINARY and isinstance(v, str):
                return v.encode()
        except (ValueError, ArithmeticError):
            raise self.error(f"cannot cast {v!r} to {dtype}", node) from None
        return coerce(v, dtype, self.what, node)

    # -- functions ---------------------------------------------------------------------------
    def function(self, node: exp.Func) -> Any:
        name = _function_name(node)
        if name in NON_DETERMINISTIC:
            raise self.not_constant(node, "its value is not fixed")
        if isinstance(node, exp.Coalesce):
            for arg in [node.this, *node.expressions]:
                v = self.value(arg)
                if v is not None:
                    return v
            return None
        if isinstance(node, exp.If):
            cond = self.value(node.this)
            branch = node.args.get("true") if cond is True else node.args.get("false")
            return None if branch is None else self.value(branch)
        impl = _FUNCTIONS.get(name)
        if impl is None:
            raise self.error(
                f"{_sql(node)}: function {name}() cannot be evaluated in DDL (constants "
                f"may use {', '.join(sorted(_FUNCTIONS))}, coalesce, if and CAST)",
                node,
            )
        args = [self.value(a) for a in _arguments(node)]
        if any(a is None for a in args):
            return None
        try:
            return impl(*args)
        except (TypeError, ValueError, ArithmeticError):
            raise self.error(f"cannot evaluate {_sql(node)}", node) from None


def _function_name(node: exp.Func) -> str:
    return (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()


def _arguments(node: exp.Func) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    out: list[exp.Expr] = []
    for key in node.arg_types:
        v = node.args.get(key)
        if isinstance(v, list):
            out.extend(v)
        elif isinstance(v, exp.Expr):
            out.append(v)
    return out


def _any(t: type, *values: Any) -> bool:
    return any(isinstance(v, t) and not isinstance(v, bool) for v in values)


def _d(v: Any) -> Decimal:
    return v if isinstance(v, Decimal) else Decimal(str(v))


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    return str(v)


def _factorial(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(n)
    return math.factorial(n)


def _round(x: Any, digits: Any = 0) -> Any:
    if isinstance(x, float):
        q = Decimal(str(x)).quantize(Decimal(1).scaleb(-digits), decimal.ROUND_HALF_UP)
        return float(q)
    if isinstance(x, Decimal):
        return x.quantize(Decimal(1).scaleb(-digits), decimal.ROUND_HALF_UP)
    return x


def _ceil_floor(f: Callable[[Any], int]) -> Callable[[Any], Any]:
    def impl(x: Any) -> Any:
        return f(x) if not isinstance(x, bool) else x

    return impl


def _numeric(x: Any) -> Any:
    if isinstance(x, bool) or not isinstance(x, int | float | Decimal):
        raise TypeError(x)
    return x


def _string(x: Any) -> str:
    if not isinstance(x, str):
        raise TypeError(x)
    return x


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": lambda x: abs(_numeric(x)),
    "factorial": _factorial,
    "ceil": _ceil_floor(math.ceil),
    "ceiling": _ceil_floor(math.ceil),
    "floor": _ceil_floor(math.floor),
    "round": _round,
    "pow": lambda a, b: float(_numeric(a)) ** float(_numeric(b)),
    "power": lambda a, b: float(_numeric(a)) ** float(_numeric(b)),
    "greatest": lambda *xs: max(xs),
    "least": lambda *xs: min(xs),
    "upper": lambda s: _string(s).upper(),
    "ucase": lambda s: _string(s).upper(),
    "lower": lambda s: _string(s).lower(),
    "lcase": lambda s: _string(s).lower(),
    "length": lambda s: len(_string(s)),
    "concat": lambda *xs: "".join(_string(x) for x in xs),
    "trim": lambda s: _string(s).strip(" "),
    "ltrim": lambda s: _string(s).lstrip(" "),
    "rtrim": lambda s: _string(s).rstrip(" "),
}

_ARITHMETIC: dict[type[exp.Expr], Callable[[Any, Any], Any]] = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
    exp.Div: lambda a, b: a / b,
    exp.IntDiv: lambda a, b: a // b,
    exp.Mod: lambda a, b: a % b,
}

_INTEGER_KINDS = (TypeKind.INT8, TypeKind.INT16, TypeKind.INT32, TypeKind.INT64)
