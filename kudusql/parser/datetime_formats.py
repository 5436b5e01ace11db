"""Impala's date/time patterns (``'yyyy-MM-dd HH:mm:ss'``) as DuckDB expressions.

This module owns the patterns of ``from_unixtime(n, fmt)``, ``from_timestamp(ts, fmt)``,
``unix_timestamp(s, fmt)`` and ``to_timestamp(s, fmt)``, read as Impala's
``SimpleDateFormatTokenizer`` reads them: runs of one letter are fields (``y`` year,
``M`` month, ``MMM`` short month name, ``d`` day, ``H`` hour, ``m`` minute, ``s``
second, ``S`` fraction of a second), anything else is a separator written as is (a
trailing ``+hh:mm`` offset after a time field is dropped); a digit or another letter
makes the pattern invalid, as does a one-letter field right after another field.

- **Formatting** becomes a DuckDB ``strftime`` pattern. A field of two letters or one
  (no padding) has a ``strftime`` code, as do ``yyyy``, ``MMM``, ``SSS``, ``SSSSSS``
  and ``SSSSSSSSS``; other widths (``y``, ``yyy``, ``ddd``, ``SS``) are refused.
- **Parsing** becomes a regular expression whose groups are the fields, and the
  timestamp they make: a field of n letters takes exactly n digits, one of a single
  letter all the digits there are; separators must match; text after the pattern is
  ignored; a value out of its field's range, a day the month lacks or a year outside
  1400..9999 is NULL; two-letter years fall in the 100 years from 80 years ago. Month
  names are not parsed.

Only a constant pattern is compiled; errors are ``StatementError``s at the pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from kudusql.common.errors import ProgrammingError
from kudusql.parser.literals import StatementError

_FIELDS = "yMdHmsS"


@dataclass(frozen=True)
class _Token:
    kind: str  # a field letter, or "" for a separator (its text in ``text``)
    text: str


def _tokens(fmt: str, function: str, node: exp.Expr) -> list[_Token]:
    """Impala's tokens of ``fmt`` (``SimpleDateFormatTokenizer::Tokenize``)."""

    def bad() -> StatementError:
        return StatementError(f"{function}: bad date/time format {fmt!r}", node)

    if not fmt:
        raise bad()
    out: list[_Token] = []
    has_time = False
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c.isdigit():
            raise bad()
        if c in "TZ":
            out.append(_Token("", c))
            i += 1
            continue
        if not c.isalpha():
            if has_time and re.fullmatch(r"[+-](hh:mm|hhmm|hh)", fmt[i:]):
                break  # a time zone offset: formatting writes nothing for it
            out.append(_Token("", c))
            i += 1
            continue
        if out and out[-1].kind and len(out[-1].text) == 1:
            raise bad()  # a one-letter field must end at a separator
        if c not in _FIELDS:
            raise bad()
        j = i
        while j < len(fmt) and fmt[j] == c:
            j += 1
        if c == "M" and j - i > 3:
            raise bad()
        has_time |= c in "HmsS"
        out.append(_Token(c, fmt[i:j]))
        i = j
    if not any(t.kind for t in out):
        raise bad()
    return out


_STRFTIME = {
    "yyyy": "%Y",
    "yy": "%y",
    "M": "%-m",
    "MM": "%m",
    "MMM": "%b",
    "d": "%-d",
    "dd": "%d",
    "H": "%-H",
    "HH": "%H",
    "m": "%-M",
    "mm": "%M",
    "s": "%-S",
    "ss": "%S",
    "SSS": "%g",
    "SSSSSS": "%f",
    "SSSSSSSSS": "%n",
}


def strftime_pattern(fmt: str, function: str, node: exp.Expr) -> str:
    """The DuckDB ``strftime`` pattern that formats as Impala's ``fmt`` does."""
    out: list[str] = []
    for tok in _tokens(fmt, function, node):
        if not tok.kind:
            out.append(tok.text.replace("%", "%%"))
            continue
        code = _STRFTIME.get(tok.text)
        if code is None:
            raise StatementError(
                f"{function}: the format field {tok.text!r} is not supported (fields of "
                "one or two letters, yyyy, MMM, SSS, SSSSSS and SSSSSSSSS are)",
                node,
            )
        out.append(code)
    return "".join(out)


def parse_expression(value: exp.Expr, fmt: str, function: str, node: exp.Expr) -> exp.Expr:
    """A DuckDB expression: ``value`` (a string) read with Impala's ``fmt`` as a
    TIMESTAMP, NULL where Impala's parse fails."""
    tokens = _tokens(fmt, function, node)
    if not any(t.kind and t.kind in "yMd" for t in tokens):
        raise StatementError(f"{function}: bad date/time format {fmt!r} (it has no date)", node)
    pattern = ["^"]
    group: dict[str, tuple[int, int]] = {}  # field -> (group number, letters)
    for tok in tokens:
        if not tok.kind:
            pattern.append(re.escape(tok.text))
            continue
        if tok.kind in group or tok.text == "MMM":
            raise StatementError(
                f"{function}: the format field {tok.text!r} is not supported for reading "
                "(a field once, in digits)",
                node,
            )
        if (tok.kind == "S" and len(tok.text) > 9) or (tok.kind == "y" and len(tok.text) == 3):
            raise StatementError(f"{function}: bad date/time format {fmt!r}", node)
        pattern.append(r"(\d+)" if len(tok.text) == 1 else rf"(\d{{{len(tok.text)}}})")
        group[tok.kind] = (len(group) + 1, len(tok.text))
    regex = "".join(pattern)

    def field(kind: str, default: str = "0") -> str:
        if kind not in group:
            return default
        return f"CAST(regexp_extract(__v__, {_sql_string(regex)}, {group[kind][0]}) AS BIGINT)"

    year = field("y")
    if "y" in group and group["y"][1] <= 2:
        # Two-letter years fall in the 100 years from 80 years before now (Impala's
        # century break), compared as whole timestamps as Impala does.
        year = f"({year} + (year(now()) - 80) // 100 * 100)"
        moment = (
            f"try(make_timestamp({year}, {field('M', '1')}, {field('d', '1')}, {field('H')}, "
            f"{field('m')}, {field('s')}))"
        )
        year = f"(CASE WHEN {moment} < now() - INTERVAL 80 YEAR THEN {year} + 100 ELSE {year} END)"
    micros = "0"
    if "S" in group:
        digits = group["S"][1] if group["S"][1] > 1 else 9
        micros = (
            f"({field('S')} * {10 ** (6 - digits)})"
            if digits <= 6
            else f"({field('S')} // {10 ** (digits - 6)})"
        )
    checks = [f"regexp_matches(__v__, {_sql_string(regex)})"]
    checks += [
        f"{field(k)} <= {most}" for k, most in (("H", 23), ("m", 59), ("s", 59)) if k in group
    ]
    if "S" in group and group["S"][1] == 1:
        checks.append(f"length(regexp_extract(__v__, {_sql_string(regex)}, {group['S'][0]})) <= 9")
    stamp = (
        f"try(make_timestamp({year}, {field('M', '1')}, {field('d', '1')}, {field('H')}, "
        f"{field('m')}, {field('s')} + {micros} / 1000000))"
    )
    sql = (
        f"CASE WHEN {' AND '.join(checks)} THEN CASE WHEN {stamp} >= TIMESTAMP '1400-01-01' "
        f"AND {stamp} < TIMESTAMP '10000-01-01' THEN {stamp} END END"
    )
    return _substitute(sql, value)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _substitute(sql: str, value: exp.Expr) -> exp.Expr:
    """``sql`` (DuckDB) with each ``__v__`` column replaced by a copy of ``value``."""
    import sqlglot

    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.SqlglotError as e:  # pragma: no cover - the templates parse
        raise ProgrammingError(f"internal error compiling a date/time format: {e}") from None
    for col in list(tree.find_all(exp.Column)):
        if col.name == "__v__":
            col.replace(value.copy())
    return tree
