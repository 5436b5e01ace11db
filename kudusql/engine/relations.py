"""Relations registered on a session: Python-side Arrow data that SQL reads by name.

This module owns ``RegisteredRelations``, the names a session's queries read as Arrow
tables that DuckDB holds (``Connection.register``), not as Kudu tables. The rules:

- A registered name is case-insensitive, as every SQL name, and unqualified: wherever
  ``df`` appears unqualified in a query it is the registered relation, before any table
  of that name (as a DuckDB view registered on a connection comes before its tables);
  ``db.df`` always names the table. A statement that reads a registered name while the
  current database also has a table of that name gets a warning saying which it read.
- A registered relation is read-only: a statement that would write, alter, drop,
  describe the storage of, or create a table under its unqualified name is refused.
- Its columns are known by their folded names (as a table scan's are); column names
  equal ignoring case are refused, as in a table.
- DuckDB reads the Arrow table in place for every query that names it: no copy, no
  Python rows. The name is registered until ``unregister`` or the session closes.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from kudusql.common.errors import ProgrammingError
from kudusql.executor.duck import DuckRunner
from kudusql.parser.names import TableName, fold
from kudusql.planner.plan import RELATION_PREFIX, QueryPlan, Relation


class RegisteredRelations:
    """The relations registered on one session, by folded name."""

    def __init__(self, runner: DuckRunner) -> None:
        self._runner = runner
        self._by_name: dict[str, Relation] = {}
        #: Each registration gets a DuckDB name never used before on the session.
        self._next = 0

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> list[str]:
        """The registered names as given, sorted."""
        return sorted(r.name for r in self._by_name.values())

    def get(self, name: TableName) -> Relation | None:
        """The relation an (unqualified) table name denotes, or None."""
        if name.database is not None or not self._by_name:
            return None
        return self._by_name.get(fold(name.name))

    def register(self, name: object, data: pa.Table) -> Relation:
        """Register ``data`` as ``name``, replacing a relation registered so before."""
        if not isinstance(name, str) or not name.strip():
            raise ProgrammingError(f"register needs a name (a non-empty string), not {name!r}")
        if "." in name:
            raise ProgrammingError(
                f"a registered name may not contain '.' ({name!r}): it is not in a database"
            )
        key = fold(name)
        if key.startswith("__kudusql_"):
            raise ProgrammingError(f"{name!r}: names starting with __kudusql_ are reserved")
        folded = [fold(c) for c in data.column_names]
        seen: dict[str, str] = {}
        for given, f in zip(data.column_names, folded, strict=True):
            if f in seen:
                raise ProgrammingError(
                    f"cannot register {name!r}: its columns {seen[f]!r} and {given!r} have "
                    "the same name ignoring case (SQL names are case-insensitive)"
                )
            seen[f] = given
        if folded != data.column_names:
            data = data.rename_columns(folded)
        ref = f"{RELATION_PREFIX}{self._next}"
        self._next += 1
        columns = self._runner.register_relation(ref, data)
        old = self._by_name.get(key)
        self._by_name[key] = Relation(ref, name, columns)
        if old is not None:
            self._runner.unregister_relation(old.ref)
        return self._by_name[key]

    def unregister(self, name: str) -> bool:
        """Forget ``name``; whether it was registered."""
        rel = self._by_name.pop(fold(name), None) if isinstance(name, str) else None
        if rel is None:
            return False
        self._runner.unregister_relation(rel.ref)
        return True

    def refuse(self, name: TableName, database: str) -> None:
        """Raise if ``name`` denotes a registered relation (a statement that needs a
        Kudu table there: a write, DDL, storage introspection); ``database``: the
        session's current one."""
        rel = self.get(name)
        if rel is not None:
            raise ProgrammingError(
                f"{rel.name!r} is an object registered on this connection, not a table: "
                "queries can read it, but it cannot be written, altered, dropped or "
                "replaced by a table (unregister it first, or write "
                f"{database}.{rel.name} for a table of that name)"
            )

    def shadow_warnings(
        self, plan: QueryPlan, is_table: Callable[[str], bool], database: str
    ) -> list[str]:
        """A warning per registered relation ``plan`` reads whose name is also a table's
        in ``database`` (``is_table`` of the name); empty for most plans."""
        names = dict.fromkeys(r.relation.name for r in plan.relations)
        return [
            f"{n!r} names both an object registered on this connection and a table; "
            f"the registered object was read (write {database}.{n} for the table)"
            for n in names
            if is_table(n)
        ]
