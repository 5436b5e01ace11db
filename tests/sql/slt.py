"""A small sqllogictest-style runner for kudusql golden files (``tests/sql/golden``).

Records are separated by blank lines; ``#`` lines are comments::

    statement ok
    CREATE TABLE t (id BIGINT PRIMARY KEY, v STRING) PARTITION BY HASH (id) PARTITIONS 2

    statement count 2
    INSERT INTO t VALUES (1, 'a'), (2, NULL)

    statement error does not exist
    SELECT * FROM nope

    statement warning single tablet
    CREATE TABLE one (id INT PRIMARY KEY)

    query rowsort
    SELECT id, v FROM t
    ----
    1	a
    2	NULL

``statement error <text>`` expects a kudusql error whose message contains the text;
``statement error exact`` followed by the SQL, ``----`` and lines expects exactly that
message (line breaks included, so a caret line is checked to the column);
``statement count N`` checks ``cursor.rowcount``; ``statement warning <text>`` checks
that some warning contains the text. ``query`` compares rows in order, ``query rowsort``
after sorting; cells are tab-separated, NULL for None, booleans as true/false.

As in sqllogictest, ``query`` may name the column types first, one letter a column:
``query TIB`` (or ``query TIB rowsort``) checks that every row has three cells, a text,
an integer and a boolean (NULL fits any letter). The letters: ``I`` integer (not a
boolean), ``R`` real or decimal, ``T`` text, ``B`` boolean, ``D`` date or timestamp,
``X`` binary. ``query ... label a|b`` checks the result's column labels too (separated by ``|``).

Each file runs against an embedded database and against a cluster (``kudusql://``). A
record whose answer differs by mode is preceded, as in sqllogictest, by ``onlyif MODE``
or ``skipif MODE`` (``embedded`` or ``cluster``) on its first line.
"""

from __future__ import annotations

import datetime
import decimal
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kudusql.common.errors import Error
from tests.support.targets import Target


@dataclass
class Record:
    line: int
    kind: str  # statement | query
    arg: str
    sql: str
    expected: list[str]
    #: The modes the record runs in (``onlyif`` / ``skipif``).
    modes: frozenset[str] = frozenset({"embedded", "cluster"})


MODES = frozenset({"embedded", "cluster"})


def parse_file(path: Path) -> list[Record]:
    records: list[Record] = []
    blocks: list[tuple[int, list[str]]] = []
    cur: list[str] = []
    start = 0
    for i, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.rstrip("\n")
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur:
                blocks.append((start, cur))
                cur = []
            continue
        if not cur:
            start = i
        cur.append(line)
    if cur:
        blocks.append((start, cur))
    for start, lines in blocks:
        modes = MODES
        while lines and lines[0].split(None, 1)[0] in ("onlyif", "skipif"):
            word, _, mode = lines[0].partition(" ")
            if mode.strip() not in MODES:
                raise ValueError(f"{path}:{start}: unknown mode in {lines[0]!r}")
            modes = modes & {mode.strip()} if word == "onlyif" else modes - {mode.strip()}
            lines = lines[1:]
        head = lines[0].split(None, 1)
        kind, arg = head[0], head[1] if len(head) > 1 else ""
        body = lines[1:]
        if kind in ("query", "statement"):
            sep = body.index("----") if "----" in body else len(body)
            records.append(
                Record(start, kind, arg, "\n".join(body[:sep]), body[sep + 1 :], frozenset(modes))
            )
        else:
            raise ValueError(f"{path}:{start}: unknown record {lines[0]!r}")
    return records


def cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, bytes):
        return "x'" + v.hex() + "'"
    return str(v)


_TYPE_LETTERS = re.compile(r"[ITRBDX]+")
_TYPES: dict[str, tuple[type, ...]] = {
    "I": (int,),
    "R": (float, decimal.Decimal),
    "T": (str,),
    "B": (bool,),
    "D": (datetime.date,),
    "X": (bytes,),
}


def query_options(arg: str) -> tuple[str | None, bool, list[str] | None]:
    """(type letters or None, rowsort, labels or None) of a ``query`` record's header."""
    words = arg.split()
    types = words.pop(0) if words and _TYPE_LETTERS.fullmatch(words[0]) else None
    rowsort = "rowsort" in words
    labels = None
    if "label" in words:
        i = words.index("label")
        labels = " ".join(words[i + 1 :]).split("|")
        words = words[:i]
    unknown = [w for w in words if w != "rowsort"]
    if unknown:
        raise ValueError(f"unknown query option {unknown[0]!r}")
    return types, rowsort, labels


def check_types(where: str, types: str, rows: list[tuple[Any, ...]]) -> None:
    """Every row has ``len(types)`` cells, each None or of its letter's Python types."""
    for row in rows:
        assert len(row) == len(types), f"{where}: {len(row)} columns, types say {len(types)}"
        for i, (letter, v) in enumerate(zip(types, row, strict=True)):
            ok = v is None or (
                isinstance(v, _TYPES[letter]) and not (letter != "B" and isinstance(v, bool))
            )
            assert ok, f"{where}: column {i + 1} is {type(v).__name__} {v!r}, not {letter}"


def run_file(path: Path, target: Target | None = None) -> None:
    target = target or Target("embedded")
    with target.connect() as conn:
        cur = conn.cursor()
        for r in parse_file(path):
            if target.kind not in r.modes:
                continue
            where = f"{path.name}:{r.line} ({target.kind})"
            if r.kind == "statement":
                words = r.arg.split(None, 1)
                mode = words[0] if words else "ok"
                rest = words[1] if len(words) > 1 else ""
                if mode == "error":
                    try:
                        cur.execute(r.sql)
                    except Error as e:
                        if rest == "exact":
                            assert str(e) == "\n".join(r.expected), (
                                f"{where}: got\n{e}\nexpected\n" + "\n".join(r.expected)
                            )
                            continue
                        assert rest.lower() in str(e).lower(), (
                            f"{where}: error {str(e)!r} lacks {rest!r}"
                        )
                    else:
                        raise AssertionError(f"{where}: expected an error containing {rest!r}")
                    continue
                try:
                    cur.execute(r.sql)
                except Error as e:
                    raise AssertionError(f"{where}: {type(e).__name__}: {e}") from e
                if mode == "count":
                    assert cur.rowcount == int(rest), f"{where}: rowcount {cur.rowcount} != {rest}"
                elif mode == "warning":
                    assert any(rest.lower() in w.lower() for w in cur.warnings), (
                        f"{where}: no warning containing {rest!r} in {cur.warnings}"
                    )
                elif mode != "ok":
                    raise ValueError(f"{where}: unknown statement mode {mode!r}")
            else:
                types, rowsort, labels = query_options(r.arg)
                try:
                    cur.execute(r.sql)
                    result = cur.fetchall()
                except Error as e:
                    raise AssertionError(f"{where}: {type(e).__name__}: {e}") from e
                if types is not None:
                    check_types(where, types, result)
                if labels is not None:
                    got = [d[0] for d in cur.description or ()]
                    assert got == labels, f"{where}: labels {got} != {labels}"
                lines = ["\t".join(cell(v) for v in row) for row in result]
                rows = "\n".join(lines).split("\n") if lines else []
                expected = list(r.expected)
                if rowsort:
                    rows.sort()
                    expected.sort()
                assert rows == expected, (
                    f"{where}: got\n" + "\n".join(rows) + "\nexpected\n" + "\n".join(expected)
                )
