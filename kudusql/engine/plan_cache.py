"""Query plans cached by statement text, so a repeated query skips parsing, planning
(sqlglot's qualify and the pushdown walk) and DuckDB SQL generation.

This module owns ``PlanCache``. An entry is keyed by the statement text (parameters
already bound into it) and the session's current database, and remembers every table
name the planner resolved with the storage table and schema it resolved to. An entry is
used only while each of those names still resolves to the same table and an equal
schema; otherwise (a table dropped, renamed, altered, or a name now meaning another
table) it is dropped and the statement is planned again. Snapshots, AS OF expressions
and everything DuckDB evaluates stay per execution, so a cached plan returns exactly
what a fresh plan would.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kudusql.common.errors import Error
from kudusql.common.schema import Schema
from kudusql.parser.names import TableName
from kudusql.planner.plan import QueryPlan

#: Statement texts kept (least recently used dropped first).
PLAN_CACHE_SIZE = 256

Resolver = Callable[[TableName], tuple[str, Schema]]


@dataclass(frozen=True)
class CachedQuery:
    """A planned query: the plan, its DuckDB SQL, and the resolutions it depends on."""

    plan: QueryPlan
    sql: str
    depends: tuple[tuple[TableName, str, Schema], ...]


class RecordingResolver:
    """Wraps a resolver and records every resolution (the dependencies of a plan)."""

    def __init__(self, resolve: Resolver) -> None:
        self._resolve = resolve
        self.seen: list[tuple[TableName, str, Schema]] = []

    def __call__(self, name: TableName) -> tuple[str, Schema]:
        storage, schema = self._resolve(name)
        self.seen.append((name, storage, schema))
        return storage, schema


class PlanCache:
    """LRU of planned queries per (statement text, current database)."""

    def __init__(self, size: int = PLAN_CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], CachedQuery] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, text: str, database: str, resolve: Resolver) -> CachedQuery | None:
        """The cached plan of ``text``, if every table it read still resolves the same."""
        key = (text, database)
        entry = self._items.get(key)
        if entry is None:
            return None
        for name, storage, schema in entry.depends:
            try:
                now_storage, now_schema = resolve(name)
            except Error:
                now_storage, now_schema = "", None  # type: ignore[assignment]
            if now_storage != storage or now_schema != schema:
                del self._items[key]
                return None
        self._items.move_to_end(key)
        return entry

    def put(self, text: str, database: str, entry: CachedQuery) -> None:
        self._items[(text, database)] = entry
        self._items.move_to_end((text, database))
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()
