"""Impala's built-in functions that DuckDB lacks or means otherwise, as DuckDB macros.

This module owns the definitions (``MACROS``) and ``install``, which defines on a DuckDB
connection the ones a statement calls, the first time one does (``DuckRunner``). Each macro has
Impala's name, arguments and result type, with one typed overload per argument type
Impala accepts (a DATE argument gives a DATE, a TIMESTAMP a TIMESTAMP, a STRING is read
as Impala casts a string to TIMESTAMP), so DuckDB's binder picks the overload as
Impala's does; a call DuckDB cannot match is an error naming the function and the
overloads. Where Impala returns NULL (a result outside 1400-01-01..9999-12-31, an
interval too large, an unknown time zone leaves the value as it is) so do these.
Timestamps are UTC, as everywhere in kudusql: ``now()`` is the statement's start in UTC.

Date/time patterns (``from_unixtime(n, 'yyyy-MM-dd')``) are compiled when the query is
printed for DuckDB (``parser.datetime_formats``); the macros receive DuckDB's pattern.
"""

from __future__ import annotations

import re

import duckdb

_TS_MIN = "TIMESTAMP '1400-01-01 00:00:00'"
_TS_END = "TIMESTAMP '10000-01-01 00:00:00'"
_DATE_MIN = "DATE '0001-01-01'"
_DATE_END = "DATE '10000-01-01'"
#: Seconds since the epoch of Impala's first and last timestamps.
_UNIX_MIN, _UNIX_MAX = -17987443200, 253402300799


def _ts(x: str) -> str:
    """``x`` (a TIMESTAMP), NULL outside Impala's range."""
    return f"CASE WHEN {x} >= {_TS_MIN} AND {x} < {_TS_END} THEN {x} END"


def _date(x: str) -> str:
    return f"CASE WHEN {x} >= {_DATE_MIN} AND {x} < {_DATE_END} THEN {x} END"


#: A string as Impala casts it to TIMESTAMP: NULL if it does not read as one.
STRING_TO_TIMESTAMP = _ts("TRY_CAST(s AS TIMESTAMP)")


def _floor_div(x: str, n: int) -> str:
    return f"(({x}) - ((({x}) % {n}) + {n}) % {n}) // {n}"


def _unix_seconds(t: str) -> str:
    return _floor_div(f"epoch_us({t})", 1_000_000)


def _from_unix(n: str) -> str:
    return (
        f"CASE WHEN {n} BETWEEN {_UNIX_MIN} AND {_UNIX_MAX} THEN make_timestamp({n} * 1000000) END"
    )


_NOW = "CAST(timezone('UTC', get_current_timestamp()) AS TIMESTAMP)"

# Impala's limits on the interval of each unit (TimestampFunctions::MAX_*_INTERVAL):
# a larger one gives NULL.
_YEARS = 9999 - 1400
_DAYS = _YEARS * 366
_UNITS: dict[str, tuple[str, int | None]] = {
    "years": ("to_years(CAST(n AS INTEGER))", _YEARS),
    "months": ("to_months(CAST(n AS INTEGER))", _YEARS * 12),
    "weeks": ("to_weeks(CAST(n AS INTEGER))", _YEARS * 53),
    "days": ("to_days(CAST(n AS INTEGER))", _DAYS),
    "hours": ("to_hours(n)", _DAYS * 24),
    "minutes": ("to_minutes(n)", _DAYS * 24 * 60),
    "seconds": ("to_seconds(n)", _DAYS * 24 * 3600),
    "milliseconds": ("to_milliseconds(n)", _DAYS * 24 * 3600 * 1000),
    "microseconds": ("to_microseconds(n)", _DAYS * 24 * 3600 * 1000000),
    # kudusql timestamps hold microseconds: the result rounds down to one (``_shift``).
    "nanoseconds": ("", None),
}


def _shift(t: str, unit: str, sign: str) -> str:
    """``t`` (a TIMESTAMP) moved by ``n`` units, as Impala's ``<unit>_add``."""
    interval, most = _UNITS[unit]
    moved = f"{t} {sign} {interval}"
    if unit == "nanoseconds":
        moved = f"{t} + to_microseconds({_floor_div(f'{sign}n', 1000)})"
    if unit == "months":
        # months_add keeps the last day of a month the last day of the result's month.
        moved = (
            f"CASE WHEN last_day({t}) = CAST({t} AS DATE) THEN CAST(last_day({moved}) AS "
            f"TIMESTAMP) + ({t} - date_trunc('day', {t})) ELSE {moved} END"
        )
    body = _ts(f"({moved})")
    return body if most is None else f"CASE WHEN abs(n) <= {most} THEN {body} END"


def _shift_date(d: str, unit: str, sign: str) -> str:
    interval, most = _UNITS[unit]
    moved = f"CAST({d} {sign} {interval} AS DATE)"
    if unit == "months":
        moved = f"CASE WHEN last_day({d}) = {d} THEN last_day({moved}) ELSE {moved} END"
    return f"CASE WHEN abs(n) <= {most} THEN {_date(f'({moved})')} END"


# An unknown time zone leaves the value as it is (Impala warns); names match exactly.
_KNOWN_ZONE = "tz IN (SELECT name FROM pg_timezone_names())"


def _from_utc(t: str) -> str:
    local = _ts(f"timezone(tz, timezone('UTC', {t}))")
    return f"CASE WHEN {_KNOWN_ZONE} THEN {local} ELSE {t} END"


def _to_utc(t: str) -> str:
    """``t`` read as local time in ``tz``, in UTC; NULL for a local time that a change
    of offset skips or repeats (it has no one UTC time), as in Impala."""
    utc = f"timezone(tz, {t})"
    unique = (
        f"timezone(tz, {utc}) = {t} AND timezone(tz, {utc} - INTERVAL 1 HOUR) <> {t} "
        f"AND timezone(tz, {utc} + INTERVAL 1 HOUR) <> {t}"
    )
    body = f"CASE WHEN {unique} THEN {_ts(f'timezone({_UTC}, {utc})')} END"
    return f"CASE WHEN {_KNOWN_ZONE} THEN {body} ELSE {t} END"


_UTC = "'UTC'"


def _macro(name: str, *bodies: tuple[str, str]) -> str:
    first, *rest = bodies
    text = f"CREATE OR REPLACE TEMP MACRO {name}({first[0]}) AS {first[1]}"
    return text + "".join(f", ({params}) AS {body}" for params, body in rest)


def _definitions() -> list[str]:
    out = [_macro(name, ("", _NOW)) for name in ("now", "current_timestamp", "utc_timestamp")]
    out.append(
        _macro(
            "unix_timestamp",
            ("", _unix_seconds("get_current_timestamp()")),
            ("t TIMESTAMP", _unix_seconds("t")),
            ("d DATE", _unix_seconds("CAST(d AS TIMESTAMP)")),
            ("s VARCHAR", _unix_seconds(STRING_TO_TIMESTAMP)),
        )
    )
    out.append(
        _macro(
            "from_unixtime",
            ("n BIGINT", f"strftime({_from_unix('n')}, '%Y-%m-%d %H:%M:%S')"),
            ("n BIGINT, fmt", f"strftime({_from_unix('n')}, fmt)"),
        )
    )
    out.append(_macro("to_timestamp", ("n BIGINT", _from_unix("n"))))
    out.append(
        _macro(
            "from_timestamp",
            ("t TIMESTAMP, fmt", "strftime(t, fmt)"),
            ("s VARCHAR, fmt", f"strftime({STRING_TO_TIMESTAMP}, fmt)"),
        )
    )
    for name, convert in (("from_utc_timestamp", _from_utc), ("to_utc_timestamp", _to_utc)):
        out.append(
            _macro(
                name,
                ("t TIMESTAMP, tz VARCHAR", convert("t")),
                ("d DATE, tz VARCHAR", convert("CAST(d AS TIMESTAMP)")),
                ("s VARCHAR, tz VARCHAR", convert(f"({STRING_TO_TIMESTAMP})")),
            )
        )
    for unit in _UNITS:
        for verb, sign in (("add", "+"), ("sub", "-")):
            bodies = [("t TIMESTAMP, n BIGINT", _shift("t", unit, sign))]
            if unit in ("years", "months", "weeks", "days"):
                bodies.append(("d DATE, n BIGINT", _shift_date("d", unit, sign)))
            bodies.append(("s VARCHAR, n BIGINT", _shift(f"({STRING_TO_TIMESTAMP})", unit, sign)))
            names = [f"{unit}_{verb}"]
            if unit == "days":
                names += ["date_add" if verb == "add" else "date_sub"]
                names += ["adddate" if verb == "add" else "subdate"]
                bodies += [
                    ("t TIMESTAMP, i INTERVAL", _ts(f"(t {sign} i)")),
                    ("d DATE, i INTERVAL", _date(f"CAST(d {sign} i AS DATE)")),
                ]
            if unit == "months" and verb == "add":
                names.append("add_months")
            out += [_macro(name, *bodies) for name in names]
    for kind, bits in (("tinyint", 8), ("smallint", 16), ("int", 32), ("bigint", 64)):
        duck = "INTEGER" if kind == "int" else kind.upper()
        out.append(_macro(f"max_{kind}", ("", f"CAST({2 ** (bits - 1) - 1} AS {duck})")))
        out.append(_macro(f"min_{kind}", ("", f"CAST({-(2 ** (bits - 1))} AS {duck})")))
    facts = [1]
    for i in range(1, 21):
        facts.append(facts[-1] * i)
    out.append(
        _macro(
            "factorial",
            (
                "n BIGINT",
                f"CASE WHEN n <= 1 THEN CAST(1 AS BIGINT) WHEN n <= 20 THEN "
                f"CAST({facts}[n + 1] AS BIGINT) ELSE "
                "error('factorial ' || n || '! too large for BIGINT') END",
            ),
        )
    )
    return out


def _by_name(statements: list[str]) -> dict[str, str]:
    return {st.split()[5].split("(")[0]: st for st in statements}


#: The statement that defines each macro, by name.
MACROS: dict[str, str] = _by_name(_definitions())
_CALLS = re.compile(r"\b(" + "|".join(sorted(MACROS, key=len, reverse=True)) + r")\s*\(", re.I)


def install(con: duckdb.DuckDBPyConnection, sql: str, installed: set[str]) -> None:
    """Define on ``con`` the macros ``sql`` may call and ``installed`` (those already
    defined on it) lacks. A macro is defined when a statement first names it: defining
    all of them costs a connection about 0.2 s. A name in a string or comment only
    defines a macro early."""
    wanted = {m.group(1).lower() for m in _CALLS.finditer(sql)} - installed
    if "unix_timestamp" in wanted or "to_timestamp" in wanted:
        wanted.add("now")  # two-letter years in patterns are read relative to now()
    wanted -= installed
    if wanted:
        con.execute(";\n".join(MACROS[name] for name in sorted(wanted)))
        installed |= wanted
