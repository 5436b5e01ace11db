"""A tiny sqllogictest-style runner for the parser's golden files (tests/parser/golden).

A file is a list of cases. Each case opens with a ``-- statement`` line (text after it
is a title), then SQL (one statement or a script), then either ``-- expect`` and the
canonical text of every parsed statement (``kudusql.parser.canonical``), or ``-- error``
and the exact message of the ProgrammingError. Expected cases also check the round
trip: the canonical kudusql SQL the generator prints parses to the same statements.
``KUDUSQL_GOLDEN_UPDATE=1`` rewrites the expectations from the current parser.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import sqlglot

from kudusql.common.errors import ProgrammingError
from kudusql.parser import parse
from kudusql.parser.canonical import canonical

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("KUDUSQL_GOLDEN_UPDATE") == "1"


@dataclass
class Case:
    file: Path
    line: int
    title: str
    sql: str
    kind: str  # "expect" or "error"
    expected: str

    @property
    def id(self) -> str:
        return f"{self.file.stem}:{self.line}"


def load(path: Path) -> list[Case]:
    cases: list[Case] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("-- statement"):
            i += 1
            continue
        start, title = i + 1, lines[i][len("-- statement") :].strip()
        i += 1
        sql: list[str] = []
        while i < len(lines) and lines[i] not in ("-- expect", "-- error"):
            sql.append(lines[i])
            i += 1
        if i >= len(lines):
            raise ValueError(f"{path}:{start}: case without -- expect or -- error")
        kind = lines[i][3:]
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("-- statement"):
            body.append(lines[i])
            i += 1
        cases.append(Case(path, start, title, "\n".join(sql).strip(), kind, _strip(body)))
    return cases


def _strip(lines: list[str]) -> str:
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines)


def actual(case: Case) -> tuple[str, str]:
    """(kind, text) the parser gives for the case's SQL."""
    try:
        stmts = parse(case.sql)
    except ProgrammingError as e:
        return "error", str(e)
    return "expect", "\n".join(canonical(s) for s in stmts)


def round_trip(sql: str) -> tuple[str, str]:
    """Canonical text of ``sql`` and of the kudusql SQL generated from it."""
    trees = sqlglot.parse(sql, read="kudusql")
    regenerated = ";\n".join(t.sql(dialect="kudusql") for t in trees if t is not None)
    before = "\n".join(canonical(s) for s in parse(sql))
    after = "\n".join(canonical(s) for s in parse(regenerated))
    return before, after


def rewrite(path: Path) -> None:
    """Rewrite ``path`` with every case's current result."""
    out: list[str] = []
    lines = path.read_text().splitlines()
    cases = {c.line: c for c in load(path)}
    i = 0
    while i < len(lines):
        out.append(lines[i])
        case = cases.get(i + 1) if lines[i].startswith("-- statement") else None
        i += 1
        if case is None:
            continue
        while lines[i] not in ("-- expect", "-- error"):
            out.append(lines[i])
            i += 1
        kind, text = actual(case)
        out += [f"-- {kind}", *text.splitlines(), ""]
        i += 1
        while i < len(lines) and not lines[i].startswith("-- statement"):
            i += 1
    path.write_text("\n".join(out).rstrip("\n") + "\n")
