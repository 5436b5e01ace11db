"""DDL, settings and maintenance statements: the catalog side of the engine.

This module owns CREATE/DROP DATABASE, USE, SET, CREATE TABLE (plain, ``AS SELECT`` and
``LIKE``), DROP TABLE, ALTER TABLE and the maintenance statements (``ALTER TABLE t
EXECUTE FLUSH | COMPACT | GC | MAINTENANCE``). Table statements map SQL names to storage
names (``planner.names``) and call ``Database.create_table`` / ``drop_table`` /
``alter_table``; a table comment is stored as the table property ``comment``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kudusql.common.errors import Error, ProgrammingError
from kudusql.common.schema import Schema
from kudusql.engine.result import Result
from kudusql.parser import statements as st
from kudusql.parser.ddl_convert import promoted_key
from kudusql.parser.names import TableName, fold
from kudusql.planner.names import DEFAULT_DATABASE, find_table

if TYPE_CHECKING:
    from kudusql.engine.session import Session


def _new_table_name(session: Session, name: TableName) -> str:
    """The storage name of a table to create as ``name``: in its database's stored name
    (found ignoring case, as every SQL name), which must exist. An unqualified name
    registered on the session is refused (it would be shadowed by the registration)."""
    session.relations.refuse(name, session.database)
    db = name.database or session.database
    stored = session.registry.find(db)
    if stored is None:
        raise ProgrammingError(f"database {db!r} does not exist")
    return session.storage_name(TableName(name.name, stored))


def create_database(session: Session, s: st.CreateDatabase) -> Result:
    session.registry.create(s.name, if_not_exists=s.if_not_exists, comment=s.comment)
    return Result()


def drop_database(session: Session, s: st.DropDatabase) -> Result:
    session.registry.drop(s.name, if_exists=s.if_exists, cascade=s.cascade)
    if fold(session.database) == fold(s.name):
        session.database = DEFAULT_DATABASE
    return Result()


def use_database(session: Session, s: st.UseDatabase) -> Result:
    stored = session.registry.find(s.name)
    if stored is None:
        raise ProgrammingError(f"database {s.name!r} does not exist")
    session.database = stored
    return Result()


def set_option(session: Session, s: st.SetOption) -> Result:
    session.settings.set(s.name, s.value)
    return Result()


def _properties(s: st.CreateTable) -> dict[str, str]:
    """The table properties of a CREATE TABLE; Impala's ``comment`` property is the
    table's comment (``_comment``), not a property."""
    return {k: v for k, v in s.properties.items() if k != "comment"}


def _comment(s: st.CreateTable, inherited: str = "") -> str:
    return s.comment or s.properties.get("comment", "") or inherited


def _fresh(schema: Schema) -> Schema:
    cols = [dataclasses.replace(c, id=-1, read_default=None) for c in schema.columns]
    return Schema.build(cols, schema.key_names)


def _existing(session: Session, name: str) -> str | None:
    """The stored table a new table called ``name`` would collide with: one of the same
    name ignoring case (SQL names are case-insensitive)."""
    if session.db.has_table(name):
        return name
    return find_table(session.db.table_names(), name)


def create_table(session: Session, s: st.CreateTable) -> Result:
    name = _new_table_name(session, s.table)
    warnings = list(s.warnings)
    if _existing(session, name) is not None:
        if s.if_not_exists:
            return Result(warnings=[f"table {s.table} already exists"])
        raise ProgrammingError(f"table {s.table} already exists")
    if s.like is not None:
        src = session.table(s.like)
        schema = _fresh(src.schema)
        ps = s.partition_schema(schema) if s.partitioning else src.partition_schema
        props = {**src.meta.properties, **_properties(s)}
        session.db.create_table(
            name,
            schema,
            ps,
            properties=props,
            if_not_exists=s.if_not_exists,
            comment=_comment(s, src.meta.comment),
        )
        return Result(warnings=warnings)
    if s.as_select is not None:
        return _create_table_as(session, s, name, warnings)
    schema = s.schema()
    session.db.create_table(
        name,
        schema,
        s.partition_schema(schema),
        properties=_properties(s),
        if_not_exists=s.if_not_exists,
        comment=_comment(s),
    )
    return Result(warnings=warnings)


def _create_table_as(session: Session, s: st.CreateTable, name: str, warnings: list[str]) -> Result:
    from kudusql.common.row_operations import WriteOp

    assert s.as_select is not None
    snap = session.db.snapshot()
    plan = session.plan(s.as_select)
    data = session.runner.query(plan, snap)
    data = data.rename_columns([fold(n) for n in data.column_names])  # new names fold
    key = s.primary_key
    if not key:  # Impala's rule: the partition columns become a non-unique key
        key = promoted_key(data.column_names, s.partitioning, s.as_select)
        warnings = [
            *warnings,
            f"Partition columns ({', '.join(key)}) are promoted as non unique primary key.",
        ]
    schema, order = session.schema_from_arrow(
        data.schema, key, str(s.table), key_unique=s.key_unique
    )
    table = session.db.create_table(
        name, schema, s.partition_schema(schema), properties=_properties(s), comment=_comment(s)
    )
    try:
        res = session._write(table, data.select(order), order, WriteOp.INSERT)
    except Error:
        session.db.drop_table(name, if_exists=True)
        raise
    out = session._finish("CREATE TABLE AS SELECT", res, snap, plan)
    out.warnings = warnings + out.warnings
    return out


def drop_table(session: Session, s: st.DropTable) -> Result:
    session.relations.refuse(s.table, session.database)
    name = _existing(session, session.storage_name(s.table))
    if name is None:
        if s.if_exists:
            return Result()
        session.table(s.table)  # raises the right "does not exist" error
        raise AssertionError("unreachable")
    session.db.drop_table(name, if_exists=s.if_exists)
    return Result()


def alter_table(session: Session, s: st.AlterTable) -> Result:
    table = session.table(s.table)

    def rename(target: TableName) -> str:
        new = _new_table_name(session, target)
        clash = _existing(session, new)
        if clash is not None and clash != table.name:
            raise ProgrammingError(f"table {target} already exists")
        return new

    steps = s.storage_steps(table.schema, table.partition_schema, rename)
    session.db.alter_table(table.name, steps)
    return Result()


def maintain_table(session: Session, s: st.MaintainTable) -> Result:
    table = session.table(s.table)
    if s.action == "FLUSH":
        table.flush()
    elif s.action == "COMPACT":
        table.run_maintenance(flush=False, compact=True, gc=False)
    elif s.action == "GC":
        table.run_maintenance(flush=False, compact=False, gc=True)
    else:
        table.run_maintenance()
    return Result()


HANDLERS: dict[type[st.Statement], Callable[[Session, Any], Result]] = {
    st.CreateDatabase: create_database,
    st.DropDatabase: drop_database,
    st.UseDatabase: use_database,
    st.SetOption: set_option,
    st.CreateTable: create_table,
    st.DropTable: drop_table,
    st.AlterTable: alter_table,
    st.MaintainTable: maintain_table,
}
