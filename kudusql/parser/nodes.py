"""The syntax-tree nodes of kudusql's own statements (sqlglot ``Expression`` subclasses).

This module owns the shape of every statement the dialect adds to sqlglot: databases,
Kudu CREATE/ALTER/DROP TABLE with columns and partitioning, UPSERT, introspection
(SHOW/DESCRIBE/EXPLAIN), settings and maintenance, the ``table_changes`` table
function and ``TIMESTAMP '...'`` literals. Queries, INSERT, UPDATE and DELETE use
sqlglot's own nodes; time travel sits on ``exp.Table`` as sqlglot's ``exp.Version``
(``this='TIMESTAMP'``, ``kind='AS OF'``).

Each node's ``arg_types`` names its children; ``dialect.KuduSQL.Generator`` turns every
node back into canonical kudusql SQL, and ``statements.py`` turns them into typed values.
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot import exp


class KuduStatement(exp.Expression):
    """Base of every node here that is a whole statement."""


# -- databases ------------------------------------------------------------------------------
class CreateDatabase(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False, "comment": False}


class DropDatabase(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False, "cascade": False}


class UseDatabase(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


# -- CREATE TABLE -------------------------------------------------------------------------
class KuduColumnDef(exp.Expression):
    """``name type [PRIMARY KEY] [NULL | NOT NULL] [DEFAULT e] [ENCODING x]
    [COMPRESSION x] [BLOCK_SIZE n] [COMMENT 's']``; ``nullable`` is None when unsaid."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "kind": True,
        "primary_key": False,
        "non_unique": False,  # NON UNIQUE PRIMARY KEY (with primary_key)
        "nullable": False,
        "default": False,
        "encoding": False,
        "compression": False,
        "block_size": False,
        "comment": False,
    }


class HashPartitioning(exp.Expression):
    """One hash level: ``HASH [(cols)] PARTITIONS n [SEED s]`` (no columns: the key)."""

    arg_types: ClassVar[dict[str, bool]] = {"expressions": False, "buckets": True, "seed": False}


class RangeBound(exp.Expression):
    """One range partition: ``[lower <|<=] VALUES [<|<= upper]`` or ``VALUE = v``.

    ``lower``/``upper`` are scalar expressions or ``exp.Tuple``s; the flags say whether
    each end is inclusive; ``single`` marks the ``VALUE = v`` form; ``hash`` lists the
    range's own ``HashPartitioning`` levels (Kudu 1.17), if any."""

    arg_types: ClassVar[dict[str, bool]] = {
        "lower": False,
        "upper": False,
        "lower_inclusive": False,
        "upper_inclusive": False,
        "single": False,
        "hash": False,
    }


class RangePartitioning(exp.Expression):
    """``RANGE [(cols)] [(PARTITION bound, ...)] [SPLIT ROWS ((v, ..), ..)]`` (no
    columns: the primary key columns)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "expressions": False,
        "partitions": False,
        "split_rows": False,
    }


class Partitioning(exp.Expression):
    """``PARTITION BY`` (Impala) or ``DISTRIBUTE BY`` (the Kudu paper): hash levels then
    an optional range rule; ``style`` is ``PARTITION`` or ``DISTRIBUTE``."""

    arg_types: ClassVar[dict[str, bool]] = {"hash": False, "range": False, "style": False}


class TableProperty(exp.Expression):
    """``'key' = 'value'`` in TBLPROPERTIES (``expression`` absent in UNSET)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": False}


class KuduCreateTable(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "exists": False,
        "columns": False,
        "primary_key": False,
        "non_unique": False,  # NON UNIQUE PRIMARY KEY (cols)
        "partitioning": False,
        "comment": False,
        "stored_as": False,
        "properties": False,
        "like": False,
        "as_select": False,
    }


class KuduDropTable(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False, "purge": False}


# -- ALTER TABLE --------------------------------------------------------------------------
class KuduAlterTable(KuduStatement):
    """``ALTER TABLE t action[, action ...]``; the actions are the nodes below."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "actions": True}


class AddRangePartitionAction(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False}


class DropRangePartitionAction(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "exists": False}


class AddColumnsAction(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"expressions": True, "exists": False}


class DropColumnAction(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class ChangeColumnAction(exp.Expression):
    """``CHANGE [COLUMN] old new_def``: ``this`` the old name, ``expression`` the new
    ``KuduColumnDef`` (a rename; attributes given there are set too)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}


class RenameTableAction(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class AlterColumnAction(exp.Expression):
    """``ALTER [COLUMN] c SET option ...`` (any of ``default``, ``encoding``,
    ``compression``, ``block_size``, ``comment``, as in ``KuduColumnDef``) or
    ``ALTER [COLUMN] c DROP DEFAULT`` (``drop``)."""

    arg_types: ClassVar[dict[str, bool]] = {
        "this": True,
        "drop": False,
        "default": False,
        "encoding": False,
        "compression": False,
        "block_size": False,
        "comment": False,
    }


class SetTblPropertiesAction(exp.Expression):
    arg_types: ClassVar[dict[str, bool]] = {"expressions": True, "unset": False}


class SetOwnerAction(exp.Expression):
    """``SET OWNER USER name``: the table's owner (Kudu keeps it on the table)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


# -- maintenance ------------------------------------------------------------------------
class MaintainTable(KuduStatement):
    """``ALTER TABLE t EXECUTE FLUSH | COMPACT | GC | MAINTENANCE`` and the short forms
    ``FLUSH TABLE t`` and ``COMPACT TABLE t``; ``kind`` is the upper-case action."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "kind": True}


# -- DML ------------------------------------------------------------------------------------
class Upsert(KuduStatement):
    """``UPSERT INTO t [(cols)] VALUES ... | SELECT ...``; ``this`` is an ``exp.Insert``
    holding the target, columns and source."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


# -- introspection and settings -----------------------------------------------------------
class ShowDatabases(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"like": False}


class ShowTables(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": False, "like": False}


class ShowCreateTable(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class DescribeTable(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "style": False}


class ShowPartitions(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "range": False}


class ShowHashSchema(KuduStatement):
    """``SHOW HASH SCHEMA t`` (Impala 4.3): each range partition with its hash schema."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class ShowTableStats(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True, "columns": False}


class ComputeStats(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class ExplainStatement(KuduStatement):
    arg_types: ClassVar[dict[str, bool]] = {"this": True}


class SetOption(KuduStatement):
    """``SET name = value``; ``expression`` is a literal or a bare word."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expression": True}


class ShowTabletServers(KuduStatement):
    """``SHOW TABLET SERVERS``: the cluster's tablet servers as the master knows them."""

    arg_types: ClassVar[dict[str, bool]] = {}


class ShowSettings(KuduStatement):
    """``SHOW SETTINGS``, ``SHOW ALL``, ``SET`` and ``SET ALL``; or ``SHOW name`` when
    ``this`` is given."""

    arg_types: ClassVar[dict[str, bool]] = {"this": False}


# -- table functions -------------------------------------------------------------------------
class TableChanges(exp.Expression, exp.Func):
    """``table_changes('t', from, to)``: the rows changed in [from, to) (``to`` optional)."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "start": True, "end": False}
    _sql_names: ClassVar[list[str]] = ["TABLE_CHANGES"]


# -- literals -------------------------------------------------------------------------------
class TimestampLiteral(exp.Cast):
    """``TIMESTAMP '...'``: a timestamp written as a value (what a bound ``datetime``
    parameter becomes). Unlike ``CAST('...' AS TIMESTAMP)``, which is NULL outside
    Impala's range (as in Impala), it keeps its value: written to a column, a value out
    of range is a row error, not a NULL."""
