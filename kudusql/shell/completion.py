"""Owns context-aware completion of the input: what may come at the cursor.

- After ``FROM``, ``JOIN``, ``INTO``, ``UPDATE``, ``TABLE``, ``DESCRIBE`` (and a comma
  in a FROM list): table names of the current database, then database names.
- After ``db.``: that database's tables; after ``t.`` or ``alias.``: its columns.
- Elsewhere in a statement: the columns of the tables it names, functions, keywords.
- Meta commands: their names; table names after ``\\d`` and ``.schema``; file paths
  after ``\\i``, ``\\o``; formats after ``\\format``.

Names come from ``Catalog``, a cache of SHOW TABLES / DESCRIBE / DuckDB's function list
refreshed after statements run; lookups never wait for a busy session (see
``Runner.try_query``). Keywords are inserted in the case the user is typing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from kudusql.shell.keywords import FUNCTIONS, KEYWORDS, TYPES
from kudusql.shell.splitter import current_statement, is_meta

Query = Callable[[str], list[tuple[Any, ...]] | None]

TABLE_CONTEXT = {"FROM", "JOIN", "INTO", "UPDATE", "TABLE", "DESCRIBE", "DESC", "STATS"}
_WORD = re.compile(r"[\w.`]+$")
_TOKENS = re.compile(
    r"'(?:[^'\\]|\\.|'')*'?|\"(?:[^\"\\]|\\.|\"\")*\"?|`(?:[^`]|``)*`?|--[^\n]*|[\w.]+|[(),;]|\S",
    re.S,
)
_TABLE_REF = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|DESCRIBE|DESC)\s+([\w.]+)(?:\s+(?:AS\s+)?(\w+))?",
    re.I,
)
_REF_FOLLOWERS = {
    "WHERE", "ON", "USING", "JOIN", "LEFT", "RIGHT", "INNER", "FULL", "CROSS", "GROUP",
    "ORDER", "LIMIT", "SET", "VALUES", "SELECT", "FOR", "NATURAL", "UNION", "HAVING",
    "WINDOW", "QUALIFY", "OFFSET", "AS", "PARTITION", "TIMESTAMP", "EXCEPT", "INTERSECT",
}  # fmt: skip
META_COMMANDS = {
    "\\?": "help",
    "\\q": "quit",
    "\\dt": "list tables",
    "\\d": "describe a table",
    "\\l": "list databases",
    "\\timing": "toggle timing",
    "\\x": "expanded output",
    "\\o": "send results to a file",
    "\\i": "run a SQL file",
    "\\format": "output format",
    "\\null": "NULL marker",
    "\\maxrows": "rows shown",
    "\\pager": "pager on/off",
    "\\load": "load sample data",
    ".tables": "list tables",
    ".schema": "CREATE statements",
    ".databases": "list databases",
    ".mode": "output format",
    ".output": "send results to a file",
    ".read": "run a SQL file",
    ".timer": "toggle timing",
    ".help": "help",
    ".quit": "quit",
}


class Catalog:
    """Cached names: tables, databases, columns per table, functions."""

    def __init__(self, query: Query) -> None:
        self.query = query
        self._tables: list[str] | None = None
        self._databases: list[str] | None = None
        self._functions: list[str] | None = None
        self._columns: dict[str, list[str]] = {}
        self._db_tables: dict[str, list[str]] = {}

    def invalidate(self) -> None:
        """Forget tables, databases and columns (after any statement: DDL may have run)."""
        self._tables = self._databases = None
        self._columns.clear()
        self._db_tables.clear()

    def _first_column(self, sql: str) -> list[str] | None:
        rows = self.query(sql)
        return None if rows is None else [str(r[0]) for r in rows]

    def tables(self) -> list[str]:
        if self._tables is None:
            self._tables = self._first_column("SHOW TABLES")
        return self._tables or []

    def databases(self) -> list[str]:
        if self._databases is None:
            self._databases = self._first_column("SHOW DATABASES")
        return self._databases or []

    def tables_in(self, db: str) -> list[str]:
        if db not in self._db_tables:
            got = self._first_column(f"SHOW TABLES IN `{db}`")
            if got is None:
                return []
            self._db_tables[db] = got
        return self._db_tables[db]

    def columns(self, table: str) -> list[str]:
        key = table.lower()
        if key not in self._columns:
            name = ".".join(f"`{p}`" for p in table.split("."))
            got = self._first_column(f"DESCRIBE {name}")
            if got is None:
                return []
            self._columns[key] = got
        return self._columns[key]

    def functions(self) -> list[str]:
        if self._functions is None:
            got = self._first_column(
                "SELECT DISTINCT function_name FROM duckdb_functions() "
                "WHERE function_type IN ('scalar', 'aggregate', 'table')"
            )
            if got is None:
                return list(FUNCTIONS)
            plain = {f for f in got if re.fullmatch(r"[a-z][a-z0-9_]*", f)}
            self._functions = sorted(plain | set(FUNCTIONS))
        return self._functions


def _match(prefix: str, words: Iterable[str], *, fuzzy: bool = False) -> Iterator[str]:
    """Words starting with ``prefix`` (case-insensitive); then, with ``fuzzy``, words
    containing it."""
    p = prefix.lower().strip("`")
    seen: set[str] = set()
    later: list[str] = []
    for w in words:
        lw = w.lower()
        if lw in seen:
            continue
        if lw.startswith(p):
            seen.add(lw)
            yield w
        elif fuzzy and len(p) > 1 and p in lw:
            later.append(w)
    for w in later:
        if w.lower() not in seen:
            seen.add(w.lower())
            yield w


def _case_like(word: str, typed: str) -> str:
    return word.lower() if typed and typed[0].islower() else word.upper()


def _quote(name: str) -> str:
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else f"`{name}`"


def table_refs(sql: str) -> dict[str, str]:
    """Alias (or name) -> table for every table the statement names."""
    refs: dict[str, str] = {}
    for m in _TABLE_REF.finditer(sql):
        table, alias = m.group(1), m.group(2)
        if table.upper() in {"SELECT", "("} or table.upper() in _REF_FOLLOWERS:
            continue
        refs[table.split(".")[-1].lower()] = table
        refs[table.lower()] = table
        if alias and alias.upper() not in _REF_FOLLOWERS:
            refs[alias.lower()] = table
    # comma-separated FROM lists: FROM a, b x, c
    for m in re.finditer(r"\bFROM\s+([^;]*?)(?:\bWHERE\b|\bGROUP\b|\bORDER\b|$)", sql, re.I | re.S):
        for item in m.group(1).split(","):
            words = item.split()
            if words and re.fullmatch(r"[\w.]+", words[0]):
                refs.setdefault(words[0].lower(), words[0])
                if len(words) >= 2 and words[-1].upper() not in _REF_FOLLOWERS:
                    refs.setdefault(words[-1].lower(), words[0])
    return refs


class SqlCompleter(Completer):
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.paths = PathCompleter(expanduser=True)

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        before = document.text_before_cursor
        line = document.current_line_before_cursor
        if is_meta(line) and not current_statement(before[: len(before) - len(line)]).strip():
            yield from self._meta(line, complete_event)
            return
        stmt = current_statement(before)
        m = _WORD.search(stmt)
        word = m.group(0) if m else ""
        head = stmt[: len(stmt) - len(word)]
        tokens = [t for t in _TOKENS.findall(head) if not t.startswith("--")]
        prev = tokens[-1].upper() if tokens else ""
        whole = stmt + document.text_after_cursor.split(";", 1)[0]

        if "." in word:
            qual, _, part = word.rpartition(".")
            yield from self._qualified(qual, part, whole)
            return
        if prev in TABLE_CONTEXT or (prev == "," and self._in_from_list(tokens)):
            yield from self._tables(word)
            return
        if not tokens:
            for k in _match(word, KEYWORDS):
                yield Completion(_case_like(k, word), -len(word), display_meta="keyword")
            return
        yield from self._anywhere(word, whole, prev)

    def _in_from_list(self, tokens: list[str]) -> bool:
        depth = 0
        for t in reversed(tokens):
            u = t.upper()
            if t == ")":
                depth += 1
            elif t == "(":
                if depth == 0:
                    return False
                depth -= 1
            elif depth == 0 and u in {"FROM", "JOIN"}:
                return True
            elif depth == 0 and u in _REF_FOLLOWERS:
                return False
        return False

    def _tables(self, word: str) -> Iterator[Completion]:
        for t in _match(word, self.catalog.tables(), fuzzy=True):
            yield Completion(_quote(t), -len(word), display_meta="table")
        for d in _match(word, self.catalog.databases()):
            yield Completion(_quote(d) + ".", -len(word), display=d, display_meta="database")

    def _qualified(self, qual: str, part: str, whole: str) -> Iterator[Completion]:
        refs = table_refs(whole)
        table = refs.get(qual.lower().strip("`"))
        if table is None and qual.lower() in (t.lower() for t in self.catalog.tables()):
            table = qual
        if table is not None:
            for c in _match(part, self.catalog.columns(table), fuzzy=True):
                yield Completion(_quote(c), -len(part), display_meta=f"column of {table}")
            return
        if qual.strip("`") in self.catalog.databases():
            for t in _match(part, self.catalog.tables_in(qual.strip("`"))):
                yield Completion(_quote(t), -len(part), display_meta=f"table in {qual}")

    def _anywhere(self, word: str, whole: str, prev: str) -> Iterator[Completion]:
        seen: set[str] = set()
        tables = set(table_refs(whole).values())
        for table in sorted(tables):
            for c in _match(word, self.catalog.columns(table), fuzzy=True):
                if c.lower() not in seen:
                    seen.add(c.lower())
                    yield Completion(_quote(c), -len(word), display_meta=f"column of {table}")
        if not word:
            return
        if prev in {"AS", "::"} or prev.endswith("::"):
            for t in _match(word, TYPES):
                yield Completion(_case_like(t, word), -len(word), display_meta="type")
        for k in _match(word, KEYWORDS):
            if k.lower() not in seen:
                seen.add(k.lower())
                yield Completion(_case_like(k, word), -len(word), display_meta="keyword")
        for f in _match(word, self.catalog.functions()):
            if f.lower() not in seen:
                seen.add(f.lower())
                yield Completion(f + "(", -len(word), display=f + "()", display_meta="function")
        for t in _match(word, TYPES):
            if t.lower() not in seen:
                seen.add(t.lower())
                yield Completion(_case_like(t, word), -len(word), display_meta="type")

    def _meta(self, stmt: str, event: CompleteEvent) -> Iterator[Completion]:
        text = stmt.lstrip()
        if " " not in text:
            for name, help_ in META_COMMANDS.items():
                if name.startswith(text):
                    yield Completion(name, -len(text), display_meta=help_)
            return
        cmd, _, arg = text.partition(" ")
        arg = arg.lstrip()
        if cmd in {"\\d", ".schema", "\\dt", ".tables"}:
            yield from self._tables(arg)
        elif cmd in {"\\i", "\\o", ".read", ".output"}:
            sub = Document(arg, len(arg))
            yield from self.paths.get_completions(sub, event)
        elif cmd in {"\\format", ".mode"}:
            from kudusql.shell.formatting import FORMATS

            for f in _match(arg, FORMATS):
                yield Completion(f, -len(arg))
        elif cmd == "\\load":
            for f in _match(arg, ["tpch"]):
                yield Completion(f, -len(arg), display_meta="TPC-H sample data")
        elif cmd in {"\\x", "\\timing", "\\pager", ".timer"}:
            for f in _match(arg, ["on", "off", "auto"] if cmd == "\\x" else ["on", "off"]):
                yield Completion(f, -len(arg))
