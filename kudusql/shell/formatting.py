"""Owns turning a result (an Arrow table) into text in one of the output formats.

Formats: ``table`` (aligned box table: numbers right-aligned, NULL shown as a distinct
marker, multi-line cells, wide tables wrapped to the screen width), ``expanded`` (one
``column | value`` block per row, as psql's ``\\x``), ``csv``, ``tsv``, ``json`` (an
array of objects, decimals as exact numbers), ``markdown`` and ``line`` (SQLite's
``.mode line``). Pure functions of the table and ``Style``; no I/O.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from prompt_toolkit.utils import get_cwidth

from kudusql.shell.formats import FORMATS as FORMATS

EXPANDED_MODES = ("off", "on", "auto")
MIN_COL_WIDTH = 6


@dataclass
class Style:
    """How to render: format, expanded mode, screen width, the NULL marker and the ANSI
    codes that set NULL apart on a colour terminal (empty for files and pipes)."""

    format: str = "table"
    expanded: str = "off"
    width: int = 0  # 0: unlimited
    null: str = "NULL"
    null_ansi: tuple[str, str] = ("", "")


# -- cell values -------------------------------------------------------------------------


def is_numeric(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t))


def interval_text(months: int, days: int, nanoseconds: int) -> str:
    """An INTERVAL as DuckDB writes it: ``1 year 2 months``, ``3 days``,
    ``-1 day 00:00:01.5``; the time part is ``[-]HH:MM:SS[.fraction]`` (hours may pass
    24, the fraction keeps its significant digits); the zero interval is ``00:00:00``."""
    parts = []
    sign = -1 if months < 0 else 1
    years, months = divmod(abs(months), 12)
    for n, unit in ((sign * years, "year"), (sign * months, "month"), (days, "day")):
        if n:
            parts.append(f"{n} {unit}" + ("" if abs(n) == 1 else "s"))
    if nanoseconds or not parts:
        neg = "-" if nanoseconds < 0 else ""
        secs, frac = divmod(abs(nanoseconds), 1_000_000_000)
        mins, sec = divmod(secs, 60)
        hours, mins = divmod(mins, 60)
        time = f"{neg}{hours:02d}:{mins:02d}:{sec:02d}"
        if frac:
            time += "." + f"{frac:09d}".rstrip("0")
        parts.append(time)
    return " ".join(parts)


def cell_text(v: Any) -> str:
    """The text of a non-NULL cell value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return repr(v)
    if isinstance(v, bytes):
        return "\\x" + v.hex()
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, pa.MonthDayNano):
        return interval_text(v.months, v.days, v.nanoseconds)
    if isinstance(v, datetime.timedelta):  # an Arrow duration: days and time
        return interval_text(0, v.days, (v.seconds * 1_000_000 + v.microseconds) * 1000)
    if isinstance(v, datetime.date | datetime.time):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join("NULL" if x is None else cell_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_opt(x)}" for k, x in v.items()) + "}"
    return str(v)


def _opt(v: Any) -> str:
    return "NULL" if v is None else cell_text(v)


def columns_text(table: pa.Table) -> list[list[str | None]]:
    """Every column as text, None for NULL."""
    return [[None if v is None else cell_text(v) for v in col.to_pylist()] for col in table.columns]


#: Control characters other than newline (C0, DEL, C1): a terminal would move the cursor
#: or act on them, and their display width is not their length.
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_ESCAPES = {"\t": "\\t", "\r": "\\r"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    return _ESCAPES.get(c) or f"\\x{ord(c):02x}"


def visible(s: str) -> str:
    """``s`` for the screen: TAB as ``\\t``, CR as ``\\r``, every other control
    character but newline as ``\\xNN`` (newlines make multi-line cells); a backslash
    stays as it is."""
    return s if s.isprintable() else _CONTROL.sub(_escape, s)


def display_columns(table: pa.Table) -> list[list[str | None]]:
    """``columns_text`` with control characters made visible (the aligned formats)."""
    return [[None if v is None else visible(v) for v in col] for col in columns_text(table)]


def display_names(table: pa.Table) -> list[str]:
    return [visible(n) for n in table.column_names]


def width(s: str) -> int:
    return sum(get_cwidth(c) for c in s) if not s.isascii() else len(s)


# -- entry point --------------------------------------------------------------------------


def render(table: pa.Table, style: Style) -> str:
    """``table`` in ``style``, ending with a newline unless empty."""
    fmt = style.format
    if fmt == "csv":
        return _delimited(table, ",")
    if fmt == "tsv":
        return _delimited(table, "\t")
    if fmt == "json":
        return _json(table)
    if fmt == "markdown":
        return _markdown(table, style)
    if fmt == "line":
        return _line(table, style)
    if style.expanded == "on":
        return _expanded(table, style)
    text, fits = _table(table, style, wrap=style.expanded != "auto")
    if not fits and style.expanded == "auto":
        return _expanded(table, style)
    return text


# -- aligned table ------------------------------------------------------------------------


def _wrap(s: str, w: int) -> list[str]:
    """``s`` cut into lines of display width at most ``w``."""
    out: list[str] = []
    for part in s.split("\n"):
        if width(part) <= w:
            out.append(part)
            continue
        cur, cw = "", 0
        for ch in part:
            c = get_cwidth(ch)
            if cw + c > w and cur:
                out.append(cur)
                cur, cw = "", 0
            cur += ch
            cw += c
        out.append(cur)
    return out


def _pad(s: str, w: int, right: bool) -> str:
    gap = " " * max(0, w - width(s))
    return gap + s if right else s + gap


def _fit(widths: list[int], mins: list[int], avail: int) -> list[int]:
    """Column widths shrunk (widest first) until the table fits ``avail`` columns."""
    ws = list(widths)
    frame = 3 * len(ws) + 1
    while sum(ws) + frame > avail:
        i = max(range(len(ws)), key=lambda k: ws[k] - mins[k])
        if ws[i] <= mins[i]:
            break
        ws[i] -= 1
    return ws


def _table(table: pa.Table, style: Style, *, wrap: bool) -> tuple[str, bool]:
    """The box table and whether it fits the screen width (after wrapping if ``wrap``)."""
    names = display_names(table)
    if not names:
        return "", True
    right = [is_numeric(f.type) for f in table.schema]
    cols = display_columns(table)
    null = style.null
    widths = []
    for name, col in zip(names, cols, strict=True):
        w = max(
            [width(x) for x in name.split("\n")]
            + [max(width(p) for p in v.split("\n")) if v is not None else width(null) for v in col]
        )
        widths.append(w)
    total = sum(widths) + 3 * len(widths) + 1
    fits = style.width <= 0 or total <= style.width
    if not fits and not wrap:
        return "", False
    if not fits:
        mins = [
            min(w, max(MIN_COL_WIDTH, min(width(n), 12)))
            for w, n in zip(widths, names, strict=True)
        ]
        widths = _fit(widths, mins, style.width)
        fits = sum(widths) + 3 * len(widths) + 1 <= style.width
    lo, hi = style.null_ansi

    def border(left: str, mid: str, rgt: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + rgt

    def row(cells: Sequence[str | None], align: Sequence[bool]) -> Iterator[str]:
        parts = [_wrap(null if c is None else c, w) for c, w in zip(cells, widths, strict=True)]
        height = max(len(p) for p in parts)
        for k in range(height):
            out = []
            for j, p in enumerate(parts):
                seg = p[k] if k < len(p) else ""
                text = _pad(seg, widths[j], align[j])
                if cells[j] is None and k == 0 and hi + lo:
                    text = text.replace(null, lo + null + hi, 1)
                out.append(text)
            yield "│ " + " │ ".join(out) + " │"

    lines = [border("┌", "┬", "┐")]
    lines += row(names, [False] * len(names))
    lines.append(border("├", "┼", "┤"))
    for i in range(table.num_rows):
        lines += row([c[i] for c in cols], right)
    lines.append(border("└", "┴", "┘"))
    return "\n".join(lines) + "\n", fits


def _expanded(table: pa.Table, style: Style) -> str:
    names = display_names(table)
    if not names:
        return ""
    cols = display_columns(table)
    nw = max(width(n) for n in names)
    vw = max(10, style.width - nw - 3) if style.width > 0 else 1 << 30
    lo, hi = style.null_ansi
    out: list[str] = []
    for i in range(table.num_rows):
        head = f"-[ RECORD {i + 1} ]"
        out.append(head + "-" * max(0, min(style.width or 40, nw + 3 + 20) - len(head)))
        for n, c in zip(names, cols, strict=True):
            v = c[i]
            parts = [lo + style.null + hi] if v is None else _wrap(v, vw)
            out.append(f"{_pad(n, nw, False)} | {parts[0]}")
            out += [f"{' ' * nw} | {p}" for p in parts[1:]]
    return "\n".join(out) + "\n" if out else ""


def _line(table: pa.Table, style: Style) -> str:
    names = display_names(table)
    cols = display_columns(table)
    nw = max((width(n) for n in names), default=0)
    blocks = [
        "\n".join(
            f"{_pad(n, nw, True)} = {style.null if c[i] is None else c[i]}"
            for n, c in zip(names, cols, strict=True)
        )
        for i in range(table.num_rows)
    ]
    return "\n\n".join(blocks) + "\n" if blocks else ""


def _markdown(table: pa.Table, style: Style) -> str:
    names = display_names(table)
    if not names:
        return ""
    cols = display_columns(table)

    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", "<br>")

    right = [is_numeric(f.type) for f in table.schema]
    lines = ["| " + " | ".join(esc(n) for n in names) + " |"]
    lines.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
    lines += [
        "| " + " | ".join(style.null if c[i] is None else esc(str(c[i])) for c in cols) + " |"
        for i in range(table.num_rows)
    ]
    return "\n".join(lines) + "\n"


# -- machine formats ------------------------------------------------------------------------


def _delimited(table: pa.Table, sep: str) -> str:
    buf = io.StringIO()
    if sep == ",":
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(table.column_names)
        cols = columns_text(table)
        for i in range(table.num_rows):
            w.writerow(["" if c[i] is None else c[i] for c in cols])
        return buf.getvalue()

    def esc(s: str) -> str:
        return (
            s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
        )

    lines = ["\t".join(esc(n) for n in table.column_names)]
    cols = columns_text(table)
    lines += [
        "\t".join("" if c[i] is None else esc(c[i] or "") for c in cols)
        for i in range(table.num_rows)
    ]
    return "\n".join(lines) + "\n"


def json_value(v: Any) -> str:
    """One value as JSON text; decimals stay exact numbers, NaN and infinities are null."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "null" if math.isnan(v) or math.isinf(v) else repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v) if v.is_finite() else "null"
    if isinstance(v, list):
        return "[" + ", ".join(json_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {json_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    return json.dumps(cell_text(v), ensure_ascii=False)


def _json(table: pa.Table) -> str:
    names = [json.dumps(n, ensure_ascii=False) for n in table.column_names]
    cols = [c.to_pylist() for c in table.columns]
    rows = [
        "{" + ", ".join(f"{n}: {json_value(c[i])}" for n, c in zip(names, cols, strict=True)) + "}"
        for i in range(table.num_rows)
    ]
    if not rows:
        return "[]\n"
    return "[\n" + ",\n".join(rows) + "\n]\n"


def footer(rows: int, elapsed: float | None, *, shown: int | None = None) -> str:
    """``(3 rows)``, with the elapsed time and a note when only some rows were shown."""
    text = f"{rows:,} row" + ("" if rows == 1 else "s")
    if shown is not None and shown < rows:
        text += f", {shown:,} shown"
    if elapsed is not None:
        text += f", {format_seconds(elapsed)}"
    return f"({text})"


def format_seconds(s: float) -> str:
    if s < 1:
        return f"{s * 1000:.1f} ms"
    if s < 120:
        return f"{s:.2f} s"
    return f"{int(s // 60)} min {s % 60:.0f} s"
