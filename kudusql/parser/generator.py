"""SQL generation for the kudusql dialect: canonical text for kudusql's own statements
and DuckDB SQL for everything else.

This module owns ``KuduGenerator``: a sqlglot DuckDB generator that also prints every
node of ``nodes.py`` (canonical kudusql SQL that parses back to the same tree) and prints
time travel as ``FOR SYSTEM_TIME AS OF <expr>``. ``to_duckdb_sql`` prints a query for
DuckDB itself: time-travel clauses are removed (the planner resolves them into a snapshot
of the scan) and left as a comment such as ``/* t FOR SYSTEM_TIME AS OF 5 */``, and
casts to ``VARCHAR(n)`` and ``CHAR(n)`` get Impala's truncation (and CHAR's padding).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.generators.duckdb import DuckDBGenerator

from kudusql.common.errors import ProgrammingError
from kudusql.common.types import MAX_VARCHAR_LENGTH, TypeKind
from kudusql.parser import nodes
from kudusql.parser.datetime_formats import parse_expression, strftime_pattern
from kudusql.parser.errors import Offender, with_offender
from kudusql.parser.literals import IMPALA_DECIMAL, StatementError, data_type

_IMPALA_NAMES = {
    TypeKind.BOOL: "BOOLEAN",
    TypeKind.INT8: "TINYINT",
    TypeKind.INT16: "SMALLINT",
    TypeKind.INT32: "INT",
    TypeKind.INT64: "BIGINT",
    TypeKind.STRING: "STRING",
}


def _type_name(node: exp.Expr) -> str | None:
    """A column type by its Impala name (``BIGINT``, ``STRING``, ``VARCHAR(20)``)."""
    if not isinstance(node, exp.DataType):
        return None
    try:
        dtype = data_type(node)
    except ProgrammingError:
        return None
    return _IMPALA_NAMES.get(dtype.kind) or str(dtype)


def _flag(expression: exp.Expr, arg: str, text: str) -> str:
    return f" {text}" if expression.args.get(arg) else ""


class KuduGenerator(DuckDBGenerator):
    """DuckDB SQL plus kudusql's statements (see the module docstring)."""

    # VARCHAR(n) and CHAR(n) keep their names (DuckDB prints both as TEXT, which drops
    # the difference between them), so that the canonical SQL parses back the same.
    TYPE_MAPPING: ClassVar[dict[exp.DType, str]] = {
        **DuckDBGenerator.TYPE_MAPPING,
        exp.DType.CHAR: "CHAR",
        exp.DType.NCHAR: "CHAR",
        exp.DType.VARCHAR: "VARCHAR",
        exp.DType.NVARCHAR: "VARCHAR",
    }

    # -- databases and settings ---------------------------------------------------------------
    def k_create_database(self, e: nodes.CreateDatabase) -> str:
        comment = self.sql(e, "comment")
        comment = f" COMMENT {comment}" if comment else ""
        return (
            f"CREATE DATABASE{_flag(e, 'exists', 'IF NOT EXISTS')} {self.sql(e, 'this')}{comment}"
        )

    def k_drop_database(self, e: nodes.DropDatabase) -> str:
        exists = _flag(e, "exists", "IF EXISTS")
        return f"DROP DATABASE{exists} {self.sql(e, 'this')}{_flag(e, 'cascade', 'CASCADE')}"

    def k_use(self, e: nodes.UseDatabase) -> str:
        return f"USE {self.sql(e, 'this')}"

    def k_set_option(self, e: nodes.SetOption) -> str:
        return f"SET {self.sql(e, 'this')} = {self.sql(e, 'expression')}"

    def k_show_settings(self, e: nodes.ShowSettings) -> str:
        return f"SHOW {self.sql(e, 'this')}" if e.args.get("this") else "SHOW SETTINGS"

    # -- introspection ----------------------------------------------------------------------
    def k_show_databases(self, e: nodes.ShowDatabases) -> str:
        like = self.sql(e, "like")
        return "SHOW DATABASES" + (f" LIKE {like}" if like else "")

    def k_show_tables(self, e: nodes.ShowTables) -> str:
        db = self.sql(e, "this")
        like = self.sql(e, "like")
        return "SHOW TABLES" + (f" IN {db}" if db else "") + (f" LIKE {like}" if like else "")

    def k_show_create_table(self, e: nodes.ShowCreateTable) -> str:
        return f"SHOW CREATE TABLE {self.sql(e, 'this')}"

    def k_describe(self, e: nodes.DescribeTable) -> str:
        style = self.sql(e, "style")
        return f"DESCRIBE {style + ' ' if style else ''}{self.sql(e, 'this')}"

    def k_show_partitions(self, e: nodes.ShowPartitions) -> str:
        return f"SHOW{_flag(e, 'range', 'RANGE')} PARTITIONS {self.sql(e, 'this')}"

    def k_show_tablet_servers(self, e: nodes.ShowTabletServers) -> str:
        return "SHOW TABLET SERVERS"

    def k_show_hash_schema(self, e: nodes.ShowHashSchema) -> str:
        return f"SHOW HASH SCHEMA {self.sql(e, 'this')}"

    def k_show_table_stats(self, e: nodes.ShowTableStats) -> str:
        kind = "COLUMN" if e.args.get("columns") else "TABLE"
        return f"SHOW {kind} STATS {self.sql(e, 'this')}"

    def k_compute_stats(self, e: nodes.ComputeStats) -> str:
        return f"COMPUTE STATS {self.sql(e, 'this')}"

    def k_explain(self, e: nodes.ExplainStatement) -> str:
        return f"EXPLAIN {self.sql(e, 'this')}"

    def k_maintain(self, e: nodes.MaintainTable) -> str:
        return f"ALTER TABLE {self.sql(e, 'this')} EXECUTE {self.sql(e, 'kind')}"

    # -- DML ------------------------------------------------------------------------------------
    def k_upsert(self, e: nodes.Upsert) -> str:
        text = self.sql(e, "this")
        assert text.startswith("INSERT ")
        return "UPSERT " + text[len("INSERT ") :]

    def insert_sql(self, expression: exp.Insert) -> str:
        text = super().insert_sql(expression)
        if expression.args.get("ignore") and text.startswith("INSERT INTO"):
            text = "INSERT IGNORE INTO" + text[len("INSERT INTO") :]
        return text

    def k_timestamp_literal(self, e: nodes.TimestampLiteral) -> str:
        return f"TIMESTAMP {self.sql(e, 'this')}"

    def hexstring_sql(
        self, expression: exp.HexString, binary_function_repr: str | None = None
    ) -> str:
        return f"X'{expression.name}'"

    # -- time travel and table functions ------------------------------------------------------
    def version_sql(self, expression: exp.Version) -> str:
        return f"FOR SYSTEM_TIME AS OF {self.sql(expression, 'expression')}"

    def k_table_changes(self, e: nodes.TableChanges) -> str:
        args = [self.sql(e, k) for k in ("this", "start", "end") if e.args.get(k) is not None]
        return f"table_changes({', '.join(args)})"

    # -- CREATE / DROP / ALTER TABLE -------------------------------------------------------
    def k_column_def(self, e: nodes.KuduColumnDef) -> str:
        parts = [self.sql(e, "this"), _type_name(e.args["kind"]) or self.sql(e, "kind")]
        if e.args.get("primary_key"):
            parts.append("NON UNIQUE PRIMARY KEY" if e.args.get("non_unique") else "PRIMARY KEY")
        nullable = e.args.get("nullable")
        if nullable is not None:
            parts.append("NULL" if nullable else "NOT NULL")
        parts.extend(
            f"{attr.upper()} {self.sql(e, attr)}"
            for attr in ("default", "encoding", "compression", "block_size", "comment")
            if e.args.get(attr) is not None
        )
        return " ".join(parts)

    def k_property(self, e: nodes.TableProperty) -> str:
        value = self.sql(e, "expression")
        return f"{self.sql(e, 'this')} = {value}" if value else self.sql(e, "this")

    def k_hash(self, e: nodes.HashPartitioning) -> str:
        cols = self.expressions(e, flat=True)
        seed = self.sql(e, "seed")
        return f"HASH{f' ({cols})' if cols else ''} PARTITIONS {self.sql(e, 'buckets')}" + (
            f" SEED {seed}" if seed else ""
        )

    def k_range_bound(self, e: nodes.RangeBound) -> str:
        if e.args.get("single"):
            return f"VALUE = {self.sql(e, 'lower')}"
        text = "VALUES"
        if e.args.get("lower") is not None:
            op = "<=" if e.args.get("lower_inclusive") else "<"
            text = f"{self.sql(e, 'lower')} {op} {text}"
        if e.args.get("upper") is not None:
            op = "<=" if e.args.get("upper_inclusive") else "<"
            text = f"{text} {op} {self.sql(e, 'upper')}"
        return text + "".join(f" {self.sql(h)}" for h in e.args.get("hash") or ())

    def k_range(self, e: nodes.RangePartitioning) -> str:
        cols = self.expressions(e, flat=True)
        text = f"RANGE ({cols})" if cols else "RANGE"
        parts = e.args.get("partitions")
        if parts is not None:
            text += " (" + ", ".join(f"PARTITION {self.sql(p)}" for p in parts) + ")"
        splits = e.args.get("split_rows")
        if splits:
            text += " SPLIT ROWS (" + ", ".join(self.sql(s) for s in splits) + ")"
        return text

    def k_partitioning(self, e: nodes.Partitioning) -> str:
        levels = [self.sql(h) for h in e.args.get("hash") or ()]
        if e.args.get("range"):
            levels.append(self.sql(e, "range"))
        return "PARTITION BY " + ", ".join(levels)

    def k_create_table(self, e: nodes.KuduCreateTable) -> str:
        text = f"CREATE TABLE{_flag(e, 'exists', 'IF NOT EXISTS')} {self.sql(e, 'this')}"
        if e.args.get("like"):
            text += f" LIKE {self.sql(e, 'like')}"
        elements = [self.sql(c) for c in e.args.get("columns") or ()]
        key = e.args.get("primary_key")
        non_unique = "NON UNIQUE " if e.args.get("non_unique") else ""
        key_sql = f"{non_unique}PRIMARY KEY ({', '.join(self.sql(k) for k in key)})" if key else ""
        if elements:
            text += " (" + ", ".join(elements + ([key_sql] if key_sql else [])) + ")"
        elif key_sql:
            text += f" {key_sql}"
        if e.args.get("partitioning"):
            text += f" {self.sql(e, 'partitioning')}"
        if e.args.get("comment"):
            text += f" COMMENT {self.sql(e, 'comment')}"
        if e.args.get("stored_as"):
            text += f" STORED AS {self.sql(e, 'stored_as')}"
        props = e.args.get("properties")
        if props:
            text += " TBLPROPERTIES (" + ", ".join(self.sql(p) for p in props) + ")"
        if e.args.get("as_select"):
            text += f" AS {self.sql(e, 'as_select')}"
        return text

    def k_drop_table(self, e: nodes.KuduDropTable) -> str:
        exists = _flag(e, "exists", "IF EXISTS")
        return f"DROP TABLE{exists} {self.sql(e, 'this')}{_flag(e, 'purge', 'PURGE')}"

    def k_alter_table(self, e: nodes.KuduAlterTable) -> str:
        actions = ", ".join(self.sql(a) for a in e.args["actions"])
        return f"ALTER TABLE {self.sql(e, 'this')} {actions}"

    def k_add_range(self, e: nodes.AddRangePartitionAction) -> str:
        return f"ADD{_flag(e, 'exists', 'IF NOT EXISTS')} RANGE PARTITION {self.sql(e, 'this')}"

    def k_drop_range(self, e: nodes.DropRangePartitionAction) -> str:
        return f"DROP{_flag(e, 'exists', 'IF EXISTS')} RANGE PARTITION {self.sql(e, 'this')}"

    def k_add_columns(self, e: nodes.AddColumnsAction) -> str:
        cols = ", ".join(self.sql(c) for c in e.expressions)
        return f"ADD{_flag(e, 'exists', 'IF NOT EXISTS')} COLUMNS ({cols})"

    def k_drop_column(self, e: nodes.DropColumnAction) -> str:
        return f"DROP COLUMN {self.sql(e, 'this')}"

    def k_change_column(self, e: nodes.ChangeColumnAction) -> str:
        return f"CHANGE COLUMN {self.sql(e, 'this')} {self.sql(e, 'expression')}"

    def k_rename_table(self, e: nodes.RenameTableAction) -> str:
        return f"RENAME TO {self.sql(e, 'this')}"

    def k_alter_column(self, e: nodes.AlterColumnAction) -> str:
        name = self.sql(e, "this")
        if e.args.get("drop"):
            return f"ALTER COLUMN {name} DROP DEFAULT"
        options = " ".join(
            f"{attr.upper()} {self.sql(e, attr)}"
            for attr in ("default", "encoding", "compression", "block_size", "comment")
            if e.args.get(attr) is not None
        )
        return f"ALTER COLUMN {name} SET {options}"

    def k_set_properties(self, e: nodes.SetTblPropertiesAction) -> str:
        props = ", ".join(self.sql(p) for p in e.expressions)
        return f"{'UNSET' if e.args.get('unset') else 'SET'} TBLPROPERTIES ({props})"

    def k_set_owner(self, e: nodes.SetOwnerAction) -> str:
        return f"SET OWNER USER {self.sql(e, 'this')}"

    TRANSFORMS: ClassVar[dict[type[exp.Expr], Callable[..., str]]] = {
        **DuckDBGenerator.TRANSFORMS,
        nodes.CreateDatabase: k_create_database,
        nodes.DropDatabase: k_drop_database,
        nodes.UseDatabase: k_use,
        nodes.SetOption: k_set_option,
        nodes.ShowSettings: k_show_settings,
        nodes.ShowDatabases: k_show_databases,
        nodes.ShowTables: k_show_tables,
        nodes.ShowCreateTable: k_show_create_table,
        nodes.DescribeTable: k_describe,
        nodes.ShowPartitions: k_show_partitions,
        nodes.ShowTabletServers: k_show_tablet_servers,
        nodes.ShowHashSchema: k_show_hash_schema,
        nodes.ShowTableStats: k_show_table_stats,
        nodes.ComputeStats: k_compute_stats,
        nodes.ExplainStatement: k_explain,
        nodes.MaintainTable: k_maintain,
        nodes.Upsert: k_upsert,
        nodes.TableChanges: k_table_changes,
        nodes.TimestampLiteral: k_timestamp_literal,
        nodes.KuduColumnDef: k_column_def,
        nodes.TableProperty: k_property,
        nodes.HashPartitioning: k_hash,
        nodes.RangeBound: k_range_bound,
        nodes.RangePartitioning: k_range,
        nodes.Partitioning: k_partitioning,
        nodes.KuduCreateTable: k_create_table,
        nodes.KuduDropTable: k_drop_table,
        nodes.KuduAlterTable: k_alter_table,
        nodes.AddRangePartitionAction: k_add_range,
        nodes.DropRangePartitionAction: k_drop_range,
        nodes.AddColumnsAction: k_add_columns,
        nodes.DropColumnAction: k_drop_column,
        nodes.ChangeColumnAction: k_change_column,
        nodes.RenameTableAction: k_rename_table,
        nodes.AlterColumnAction: k_alter_column,
        nodes.SetTblPropertiesAction: k_set_properties,
        nodes.SetOwnerAction: k_set_owner,
    }


#: Impala's longest CHAR; VARCHAR's bound is Kudu's (``common.types.MAX_VARCHAR_LENGTH``).
MAX_CHAR_LENGTH = 255
_VARCHARS = frozenset({exp.DType.VARCHAR, exp.DType.NVARCHAR})
_CHARS = frozenset({exp.DType.CHAR, exp.DType.NCHAR})


def _strip_time_travel(node: exp.Table) -> None:
    version = node.args["version"]
    note = f"{node.name} FOR SYSTEM_TIME AS OF {version.expression.sql('duckdb')}"
    node.set("version", None)
    node.add_comments([note.replace("*/", "* /")])


def _length(to: exp.DataType, kind: str, most: int) -> int:
    params = to.expressions
    text = params[0].name if len(params) == 1 else ""
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise ProgrammingError(
            f"{kind} length must be 1..{most}, got {to.sql(dialect='kudusql')}"
            if text.isdigit()
            else f"{kind} takes one length, as in {kind}(10): {to.sql(dialect='kudusql')}"
        )
    return int(text)


def _sized_string_cast(cast: exp.Cast) -> None:
    """``CAST(x AS VARCHAR(n))`` and ``CAST(x AS CHAR(n))`` with Impala's result, which
    DuckDB (whose strings have no length) does not give: VARCHAR(n) keeps the first n
    characters (code points, as Kudu's VARCHAR on write), CHAR(n) also pads with spaces
    to n. The cast becomes a cast to a plain string inside ``substring`` or ``rpad``."""
    to = cast.to
    if to.this in _VARCHARS:
        n = _length(to, "VARCHAR", MAX_VARCHAR_LENGTH)
        outer: exp.Expr = exp.Substring(start=exp.Literal.number(1), length=exp.Literal.number(n))
    elif to.this in _CHARS:
        n = _length(to, "CHAR", MAX_CHAR_LENGTH)
        outer = exp.Pad(
            expression=exp.Literal.number(n), fill_pattern=exp.Literal.string(" "), is_left=False
        )
    else:  # TEXT(n), STRING(n): no such type, and DuckDB would drop the length
        raise ProgrammingError(
            f"type {to.sql(dialect='kudusql')} takes no length; use VARCHAR(n) or CHAR(n)"
        )
    cast.replace(outer)
    cast.set("to", exp.DataType.build("TEXT"))
    outer.set("this", cast)


#: What a label of a query's column is made from: DuckDB's name for an expression
#: (given its DuckDB SQL), supplied by the executor; None keeps DuckDB's own labels.
Labeler = Callable[[str], str]

_TIMESTAMPS = frozenset({exp.DType.TIMESTAMP, exp.DType.TIMESTAMPNTZ})
#: Impala's functions taking a date/time pattern (``datetime_formats``).
_FORMATTERS = frozenset({"from_unixtime", "from_timestamp"})
_PARSERS = frozenset({"unix_timestamp", "to_timestamp"})


def to_duckdb_sql(expression: exp.Expr, label: Labeler | None = None, **opts: Any) -> str:
    """``expression`` as DuckDB SQL with Impala's meaning:

    - time travel stripped and noted in a comment;
    - casts to sized strings truncated (and CHAR padded);
    - a cast to TIMESTAMP is NULL outside 1400-01-01..9999-12-31 and for a string that
      does not read as a timestamp (``TIMESTAMP '...'`` literals keep their value);
    - bare DECIMAL is DECIMAL(9,0);
    - LIKE escapes with a backslash (Impala's LIKE does, DuckDB's has no escape);
    - date/time patterns of Impala's functions compiled (``datetime_formats``).

    A column whose expression changes is labelled as DuckDB would label what the user
    wrote, when ``label`` gives DuckDB's labels."""
    holder = exp.Paren(this=expression.copy())  # a parent, so that the root can change
    tables: list[exp.Table] = []
    casts: list[exp.Cast] = []
    stamps: list[exp.Cast] = []
    likes: list[exp.Expr] = []
    calls: list[exp.Anonymous] = []
    changed: list[exp.Expr] = []
    for node in list(holder.this.walk()):
        if isinstance(node, exp.Table) and node.args.get("version") is not None:
            tables.append(node)
        elif isinstance(node, nodes.TimestampLiteral):
            node.replace(exp.Cast(this=node.this, to=node.to))
        elif isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
            if node.to.expressions and node.to.this in _SIZED_STRINGS:
                casts.append(node)
            elif node.to.this in _TIMESTAMPS:
                stamps.append(node)
        elif isinstance(node, exp.DataType) and node.this is exp.DType.DECIMAL:
            if not node.expressions:  # bare DECIMAL is Impala's DECIMAL(9,0)
                changed.append(node)
        elif isinstance(node, exp.Like | exp.ILike) and not isinstance(node.parent, exp.Escape):
            likes.append(node)
        elif (
            isinstance(node, exp.Anonymous)
            and node.name.lower() in _FORMATTERS | _PARSERS
            and len(node.expressions) == 2
        ):
            calls.append(node)
    changed += [*casts, *stamps, *likes, *calls]
    labels = _original_labels(changed, label) if label is not None else []
    for t in tables:
        _strip_time_travel(t)
    for d in changed:
        if isinstance(d, exp.DataType):
            params = [exp.DataTypeParam(this=exp.Literal.number(n)) for n in IMPALA_DECIMAL]
            d.set("expressions", params)
    for like in likes:
        like.replace(exp.Escape(this=like.copy(), expression=exp.Literal.string("\\")))
    for call in reversed(calls):  # innermost first
        _impala_pattern_call(call)
    for c in reversed(stamps):
        _timestamp_cast(c)
    for c in reversed(casts):  # innermost first: an outer cast wraps the rewritten inner one
        _sized_string_cast(c)
    for select, index, text in labels:
        item = select.expressions[index]
        item.replace(exp.alias_(item.copy(), text, quoted=True))
    sql: str = holder.this.sql(dialect="duckdb", copy=False, **opts)  # this call's copy
    return sql


class _LabelGenerator(DuckDBGenerator):
    """DuckDB SQL of an expression for its label: ``VARCHAR(n)`` and ``CHAR(n)`` keep
    their names (DuckDB's generator prints TEXT), as DuckDB labels them."""

    TYPE_MAPPING: ClassVar[dict[exp.DType, str]] = {
        **DuckDBGenerator.TYPE_MAPPING,
        exp.DType.CHAR: "CHAR",
        exp.DType.VARCHAR: "VARCHAR",
    }


_LABELS = _LabelGenerator(dialect="duckdb")


def _original_labels(changed: list[exp.Expr], label: Labeler) -> list[tuple[exp.Select, int, str]]:
    """(SELECT, position, label) of every unaliased SELECT item that holds a node of
    ``changed``: the label DuckDB gives the item as written, before it changes."""
    out: dict[tuple[int, int], tuple[exp.Select, int, str]] = {}
    for node in changed:
        child, parent = node, node.parent
        while parent is not None:
            if isinstance(parent, exp.Select) and child.arg_key == "expressions":
                index = child.index
                if not isinstance(child, exp.Alias) and index is not None:
                    key = (id(parent), index)
                    if key not in out:
                        out[key] = (parent, index, label(_LABELS.generate(child)))
            child, parent = parent, parent.parent
    return list(out.values())


def _timestamp_cast(cast: exp.Cast) -> None:
    """``CAST(x AS TIMESTAMP)`` as Impala's: NULL if ``x`` does not read as a timestamp
    or is outside 1400-01-01..9999-12-31."""
    value = exp.TryCast(this=cast.this, to=cast.to.copy())
    low = exp.cast(exp.Literal.string("1400-01-01 00:00:00"), "TIMESTAMP")
    end = exp.cast(exp.Literal.string("10000-01-01 00:00:00"), "TIMESTAMP")
    inside = exp.and_(
        exp.GTE(this=value.copy(), expression=low), exp.LT(this=value.copy(), expression=end)
    )
    cast.replace(exp.Case(ifs=[exp.If(this=inside, true=value)]))


def _impala_pattern_call(call: exp.Anonymous) -> None:
    """A call of Impala's ``from_unixtime``/``from_timestamp`` (format) or
    ``unix_timestamp``/``to_timestamp`` (parse) with a date/time pattern, compiled."""
    name = call.name.lower()
    value, fmt = call.expressions
    if not (isinstance(fmt, exp.Literal) and fmt.is_string):
        error = ProgrammingError(f"{name}: the date/time format must be a constant string")
        raise with_offender(error, Offender("function", call.name))
    try:
        if name in _FORMATTERS:
            pattern = strftime_pattern(fmt.name, name, fmt)
            call.set("expressions", [value, exp.Literal.string(pattern)])
            return
        stamp = parse_expression(value, fmt.name, name, fmt)
    except StatementError as e:  # points at the pattern, where the user wrote it
        raise with_offender(ProgrammingError(e.message), Offender("string", fmt.name)) from None
    if name == "to_timestamp":
        call.replace(stamp)
    else:
        call.set("expressions", [stamp])


_SIZED_STRINGS = _VARCHARS | _CHARS | {exp.DType.TEXT}
