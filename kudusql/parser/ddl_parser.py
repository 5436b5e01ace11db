"""Parsing of kudusql's DDL: CREATE/DROP DATABASE, CREATE/DROP/ALTER TABLE, column
definitions and Kudu partitioning in both dialects (Impala's ``PARTITION BY`` and the
Kudu paper's ``DISTRIBUTE BY``).

This module owns the grammar of those statements as methods of ``DdlParser`` (a sqlglot
DuckDB parser subclass); ``dialect.KuduParser`` dispatches to them. Every method builds
the nodes of ``nodes.py`` and reports mistakes through ``raise_error`` so the message
carries the position of the offending token.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.parsers.duckdb import DuckDBParser
from sqlglot.tokenizer_core import TokenType

from kudusql.parser import nodes

_COLUMN_ATTRIBUTES = ("ENCODING", "COMPRESSION", "BLOCK_SIZE", "COMMENT", "DEFAULT")
MAINTENANCE_ACTIONS = ("FLUSH", "COMPACT", "GC", "MAINTENANCE")


class DdlParser(DuckDBParser):
    """The DDL half of the kudusql parser (see the module docstring)."""

    #: Whether the ``PRIMARY KEY (...)`` element ``_k_table_elements`` parsed last was
    #: ``NON UNIQUE``.
    _k_key_non_unique = False

    # -- small helpers ------------------------------------------------------------------------
    def _k_expect(self, *words: str) -> None:
        if not self._match_text_seq(*words):
            self.raise_error(f"Expected {' '.join(words)}")

    def _k_expect_token(self, token_type: TokenType, what: str) -> None:
        if not self._match(token_type):
            self.raise_error(f"Expected {what}")

    def _k_ident(self, what: str = "a name") -> exp.Identifier:
        node = self._parse_id_var(any_token=False)
        if not isinstance(node, exp.Identifier):
            self.raise_error(f"Expected {what}")
            raise AssertionError("unreachable")  # raise_error raises (ErrorLevel.IMMEDIATE)
        return node

    def _k_table(self) -> exp.Table:
        node = self._parse_table_parts(schema=True)
        if not isinstance(node, exp.Table) or not node.name:
            self.raise_error("Expected a table name")
            raise AssertionError("unreachable")
        return node

    def _k_int(self, what: str) -> exp.Literal:
        if self._match(TokenType.NUMBER) and self._prev.text.isdigit():
            return exp.Literal(this=self._prev.text, is_string=False)
        self.raise_error(f"Expected {what} (a whole number)")
        raise AssertionError("unreachable")

    def _k_string(self, what: str) -> exp.Literal:
        if self._match(TokenType.STRING):
            return exp.Literal.string(self._prev.text)
        self.raise_error(f"Expected {what} (a quoted string)")
        raise AssertionError("unreachable")

    def _k_word(self, what: str) -> str:
        if self._curr and self._curr.token_type not in (TokenType.STRING, TokenType.NUMBER):
            self._advance()
            return self._prev.text
        self.raise_error(f"Expected {what}")
        raise AssertionError("unreachable")

    def _k_names(self) -> list[exp.Identifier]:
        self._k_expect_token(TokenType.L_PAREN, "( and a list of column names")
        names = [self._k_ident("a column name")]
        while self._match(TokenType.COMMA):
            names.append(self._k_ident("a column name"))
        self._k_expect_token(TokenType.R_PAREN, ")")
        return names

    def _k_value(self) -> exp.Expr:
        value = self._parse_bitwise()
        if value is None:
            self.raise_error("Expected a value")
            raise AssertionError("unreachable")
        return value

    # -- databases ------------------------------------------------------------------------------
    def _k_create(self) -> exp.Expr:
        if self._match_texts(("DATABASE", "SCHEMA")):
            exists = self._match_text_seq("IF", "NOT", "EXISTS")
            name = self._k_ident("a database name")
            comment = self._match(TokenType.COMMENT) and self._k_string("a comment")
            return self.expression(
                nodes.CreateDatabase(this=name, exists=exists, comment=comment or None)
            )
        if self._match_texts(("EXTERNAL", "TEMPORARY", "VIEW", "FUNCTION", "INDEX")):
            self.raise_error(
                f"CREATE {self._prev.text.upper()} is not supported; kudusql creates "
                "tables and databases",
                self._prev,
            )
        self._k_expect_token(TokenType.TABLE, "TABLE or DATABASE after CREATE")
        return self._k_create_table()

    def _k_drop(self) -> exp.Expr:
        if self._match_texts(("DATABASE", "SCHEMA")):
            exists = self._match_text_seq("IF", "EXISTS")
            name = self._k_ident("a database name")
            cascade = self._match_text_seq("CASCADE")
            if not cascade:
                self._match_text_seq("RESTRICT")
            return self.expression(nodes.DropDatabase(this=name, exists=exists, cascade=cascade))
        self._k_expect_token(TokenType.TABLE, "TABLE or DATABASE after DROP")
        exists = self._match_text_seq("IF", "EXISTS")
        table = self._k_table()
        purge = self._match_text_seq("PURGE")
        return self.expression(nodes.KuduDropTable(this=table, exists=exists, purge=purge))

    # -- CREATE TABLE ---------------------------------------------------------------------------
    def _k_create_table(self) -> nodes.KuduCreateTable:
        args: dict[str, object] = {"exists": self._match_text_seq("IF", "NOT", "EXISTS")}
        args["this"] = self._k_table()
        if self._match_text_seq("LIKE"):
            args["like"] = self._k_table()
        elif self._match(TokenType.L_PAREN):
            self._k_key_non_unique = False
            columns, key = self._k_table_elements()
            args["columns"] = columns
            if key:
                args["primary_key"] = key
                args["non_unique"] = self._k_key_non_unique or None
        while self._curr:
            start = self._curr
            clause = self._k_create_clause(args)
            if clause is None:
                break
            name, value = clause
            if name in args:
                what = name.replace("_", " ").upper()
                self.raise_error(f"{what} is given twice", start)
            args[name] = value
            if name == "as_select":
                break
        return self.expression(nodes.KuduCreateTable(**args))

    def _k_create_clause(self, args: dict[str, object]) -> tuple[str, object] | None:
        """Parse one clause after the column list: its argument name and value, or None."""
        if self._match(TokenType.PRIMARY_KEY):
            return "primary_key", self._k_names()
        if self._k_non_unique_key():
            if "primary_key" in args:
                self.raise_error("PRIMARY KEY is given twice", self._prev)
            args["non_unique"] = True
            return "primary_key", self._k_names()
        if self._match_set((TokenType.PARTITION_BY, TokenType.DISTRIBUTE_BY)):
            style = "PARTITION" if self._prev.token_type == TokenType.PARTITION_BY else "DISTRIBUTE"
            return "partitioning", self._k_partitioning(style)
        if self._match(TokenType.COMMENT):
            return "comment", self._k_string("a table comment")
        if self._match_text_seq("STORED", "AS"):
            return "stored_as", exp.Var(this=self._k_word("a storage format").upper())
        if self._match_text_seq("TBLPROPERTIES"):
            return "properties", self._k_properties(with_values=True)
        if self._match(TokenType.ALIAS):
            if "columns" in args or "like" in args:
                self.raise_error(
                    "CREATE TABLE ... AS SELECT takes no column list (declare the key with "
                    "PRIMARY KEY (cols) after the table name)",
                    self._prev,
                )
            query = self._parse_ddl_select()
            if not isinstance(query, exp.Query):
                self.raise_error("Expected a query after AS")
            return "as_select", query
        return None

    def _k_table_elements(self) -> tuple[list[nodes.KuduColumnDef], list[exp.Identifier]]:
        columns: list[nodes.KuduColumnDef] = []
        key: list[exp.Identifier] = []
        while True:
            non_unique = self._k_non_unique_key()
            if non_unique or self._match(TokenType.PRIMARY_KEY):
                if key:
                    self.raise_error("PRIMARY KEY is given twice", self._prev)
                key = self._k_names()
                self._k_key_non_unique = non_unique
            else:
                columns.append(self._k_column_def())
            if not self._match(TokenType.COMMA):
                break
        self._k_expect_token(TokenType.R_PAREN, ", or ) after a column definition")
        return columns, key

    def _k_column_def(self) -> nodes.KuduColumnDef:
        name = self._k_ident("a column name")
        kind = self._parse_types(check_func=False, schema=True, allow_identifiers=False)
        if not isinstance(kind, exp.DataType):
            self.raise_error(f"Expected a type for column {name.name!r}")
        args: dict[str, object] = {"this": name, "kind": kind}
        self._k_column_options(name.name, args, key_options=True)
        return self.expression(nodes.KuduColumnDef(**args))

    def _k_column_options(self, column: str, args: dict[str, object], key_options: bool) -> None:
        """Column options in any order, each at most once, into ``args``: ``PRIMARY KEY``
        and ``[NOT] NULL`` only when ``key_options`` (a column definition, not ALTER
        COLUMN SET), then ENCODING, COMPRESSION, DEFAULT, BLOCK_SIZE and COMMENT."""
        while self._curr:
            start = self._curr
            value: bool | exp.Expr
            if key_options and self._k_non_unique_key():
                args["non_unique"] = True
                attr, value = "primary_key", True
            elif key_options and self._match(TokenType.PRIMARY_KEY):
                attr, value = "primary_key", True
            elif key_options and self._match_text_seq("NOT", "NULL"):
                attr, value = "nullable", False
            elif key_options and self._match(TokenType.NULL):
                attr, value = "nullable", True
            elif self._match_texts(_COLUMN_ATTRIBUTES):
                attr = self._prev.text.lower()
                value = self._k_column_attribute_value(attr)
            else:
                break
            if attr in args:
                self.raise_error(f"{attr.upper()} is given twice for column {column!r}", start)
            args[attr] = value

    def _k_column_attribute_value(self, attr: str) -> exp.Expr:
        if attr == "default":
            return self._k_value()
        if attr == "comment":
            return self._k_string("a comment")
        if attr == "block_size":
            return self._k_int("a block size")
        word = exp.Var(this=self._k_word(f"an {attr} name").upper())
        return word.update_positions(self._prev)  # an unknown name is reported here

    def _k_properties(self, with_values: bool) -> list[nodes.TableProperty]:
        self._k_expect_token(TokenType.L_PAREN, "( and a list of properties")
        props = []
        while True:
            key = self._k_string("a property name")
            value = None
            if with_values:
                self._k_expect_token(TokenType.EQ, "= after the property name")
                value = self._k_string("a property value")
            props.append(self.expression(nodes.TableProperty(this=key, expression=value)))
            if not self._match(TokenType.COMMA):
                break
        self._k_expect_token(TokenType.R_PAREN, ")")
        return props

    # -- partitioning -----------------------------------------------------------------------
    def _k_partitioning(self, style: str) -> nodes.Partitioning:
        """Hash levels and at most one range rule, in any order (Impala allows the range
        rule first), separated by optional commas."""
        hashes: list[nodes.HashPartitioning] = []
        rng: nodes.RangePartitioning | None = None
        while True:
            if self._match_text_seq("HASH"):
                hashes.append(self._k_hash_level())
            elif self._match(TokenType.RANGE):
                if rng is not None:
                    self.raise_error(f"{style} BY has more than one RANGE rule", self._prev)
                rng = self._k_range_rule()
            else:
                self.raise_error(f"Expected HASH or RANGE after {style} BY")
            comma = self._match(TokenType.COMMA)
            if not comma and not (
                self._curr
                and (self._curr.token_type == TokenType.RANGE or self._curr.text.upper() == "HASH")
            ):
                break
        return self.expression(nodes.Partitioning(hash=hashes or None, range=rng, style=style))

    def _k_hash_level(self) -> nodes.HashPartitioning:
        columns = self._k_names() if self._match(TokenType.L_PAREN, advance=False) else None
        if self._match_text_seq("PARTITIONS"):
            buckets = self._k_int("the number of partitions")
        elif self._match_text_seq("INTO"):
            buckets = self._k_int("the number of buckets")
            self._k_expect("BUCKETS")
        else:
            self.raise_error("Expected PARTITIONS n or INTO n BUCKETS after HASH")
            raise AssertionError("unreachable")
        seed = self._match_text_seq("SEED") and self._k_int("a seed")
        return self.expression(
            nodes.HashPartitioning(expressions=columns, buckets=buckets, seed=seed or None)
        )

    def _k_range_rule(self) -> nodes.RangePartitioning:
        """``RANGE [(cols)] [(PARTITION bound[,] ...)] [SPLIT ROWS (...)]``; without a
        column list the range columns are the primary key columns (Impala); ``()`` is no
        range partition."""
        columns = None
        starts_list = self._curr and self._curr.token_type == TokenType.L_PAREN
        if starts_list and not (self._next and self._next.token_type == TokenType.PARTITION):
            columns = self._k_names()
        partitions = None
        if self._match(TokenType.L_PAREN):
            partitions = []
            # ``()``: no range partition at all (what SHOW CREATE TABLE prints once every
            # range was dropped); a write finds no tablet until a range is added.
            while not self._match(TokenType.R_PAREN):
                self._k_expect_token(TokenType.PARTITION, "PARTITION")
                partitions.append(self._k_with_range_hash(self._k_range_bound()))
                if self._match(TokenType.R_PAREN):
                    break
                self._match(TokenType.COMMA)
                if not (self._curr and self._curr.token_type == TokenType.PARTITION):
                    self.raise_error("Expected , or ) after a range partition")
        elif columns is None:
            self.raise_error("Expected ( and the range columns or range partitions after RANGE")
        split_rows = None
        if self._match_text_seq("SPLIT", "ROWS"):
            self._k_expect_token(TokenType.L_PAREN, "( and a list of split rows")
            split_rows = [self._k_value()]
            while self._match(TokenType.COMMA):
                split_rows.append(self._k_value())
            self._k_expect_token(TokenType.R_PAREN, ")")
        return self.expression(
            nodes.RangePartitioning(
                expressions=columns, partitions=partitions, split_rows=split_rows
            )
        )

    def _k_range_bound(self) -> nodes.RangeBound:
        """``VALUE = v`` | ``VALUE = (v, ...)`` | ``[b1 op] VALUES [op b2]`` where op is
        ``<`` or ``<=`` (``b1`` the lower bound, ``b2`` the upper) or, reversed,
        ``>`` or ``>=`` (``b1 > VALUES`` an upper bound, ``VALUES >= b2`` a lower one)."""
        if self._match_text_seq("VALUE"):
            self._k_expect_token(TokenType.EQ, "= after VALUE")
            v = self._k_value()
            return self.expression(
                nodes.RangeBound(
                    lower=v,
                    upper=v.copy(),
                    lower_inclusive=True,
                    upper_inclusive=True,
                    single=True,
                )
            )
        ends: dict[str, tuple[exp.Expr, bool]] = {}
        ops = (TokenType.LT, TokenType.LTE, TokenType.GT, TokenType.GTE)
        if not self._match(TokenType.VALUES):
            value = self._k_value()
            if not self._match_set(ops):
                self.raise_error("Expected <, <=, > or >= after the bound")
            op = self._prev.token_type
            side = "lower" if op in (TokenType.LT, TokenType.LTE) else "upper"
            ends[side] = (value, op in (TokenType.LTE, TokenType.GTE))
            self._k_expect_token(TokenType.VALUES, "VALUES")
        if self._match_set(ops):
            op_token = self._prev
            op = op_token.token_type
            side = "upper" if op in (TokenType.LT, TokenType.LTE) else "lower"
            if side in ends:
                self.raise_error(f"the range partition has two {side} bounds", op_token)
            ends[side] = (self._k_value(), op in (TokenType.LTE, TokenType.GTE))
        lower, lower_inclusive = ends.get("lower", (None, True))
        upper, upper_inclusive = ends.get("upper", (None, False))
        return self.expression(
            nodes.RangeBound(
                lower=lower,
                upper=upper,
                lower_inclusive=lower_inclusive,
                upper_inclusive=upper_inclusive,
            )
        )

    # -- Kudu 1.17: per-range hash schemas and non-unique primary keys -----------------------
    def _k_with_range_hash(self, bound: nodes.RangeBound) -> nodes.RangeBound:
        """``bound`` with the range's own hash schema, if one follows it: one or more
        ``HASH [(cols)] PARTITIONS n [SEED s]``, separated by spaces or commas (Impala's
        ``PARTITION 10 <= VALUES < 20 HASH (a) PARTITIONS 2 HASH (b) PARTITIONS 3``)."""
        levels: list[nodes.HashPartitioning] = []
        while True:
            nxt = self._next if self._curr and self._curr.token_type == TokenType.COMMA else None
            if levels and nxt is not None and nxt.text.upper() == "HASH":
                self._advance()
            if not self._match_text_seq("HASH"):
                break
            levels.append(self._k_hash_level())
        if levels:
            bound.set("hash", levels)
        return bound

    def _k_non_unique_key(self) -> bool:
        """Match ``NON UNIQUE PRIMARY KEY`` (Impala 4.3), not consuming a lone NON."""
        if not (self._curr and self._curr.text.upper() == "NON"):
            return False
        nxt = self._next
        if not (nxt and nxt.text.upper() == "UNIQUE"):
            return False
        self._advance(2)
        self._k_expect_token(TokenType.PRIMARY_KEY, "PRIMARY KEY after NON UNIQUE")
        return True

    # -- ALTER TABLE ------------------------------------------------------------------------------
    def _k_alter(self) -> exp.Expr:
        self._k_expect_token(TokenType.TABLE, "TABLE after ALTER")
        table = self._k_table()
        if self._match_text_seq("EXECUTE"):
            if not self._match_texts(MAINTENANCE_ACTIONS):
                self.raise_error(f"Expected one of {', '.join(MAINTENANCE_ACTIONS)} after EXECUTE")
            return self.expression(
                nodes.MaintainTable(this=table, kind=exp.Var(this=self._prev.text.upper()))
            )
        actions = [self._k_alter_action()]
        while self._match(TokenType.COMMA):
            actions.append(self._k_alter_action())
        return self.expression(nodes.KuduAlterTable(this=table, actions=actions))

    def _k_alter_action(self) -> exp.Expr:
        if self._match_text_seq("ADD"):
            return self._k_alter_add()
        if self._match(TokenType.DROP):
            exists = self._match_text_seq("IF", "EXISTS")
            if self._match_text_seq("RANGE", "PARTITION"):
                bound = self._k_with_range_hash(self._k_range_bound())
                return self.expression(nodes.DropRangePartitionAction(this=bound, exists=exists))
            if exists:
                self.raise_error("Expected RANGE PARTITION after DROP IF EXISTS")
            self._match(TokenType.COLUMN)
            return self.expression(nodes.DropColumnAction(this=self._k_ident("a column name")))
        if self._match_text_seq("CHANGE"):
            self._match(TokenType.COLUMN)
            old = self._k_ident("a column name")
            return self.expression(
                nodes.ChangeColumnAction(this=old, expression=self._k_column_def())
            )
        if self._match_text_seq("RENAME", "TO"):
            return self.expression(nodes.RenameTableAction(this=self._k_table()))
        if self._match(TokenType.ALTER):
            return self._k_alter_column()
        if self._match(TokenType.SET):
            if self._match_text_seq("OWNER"):
                if self._match_text_seq("ROLE"):
                    self.raise_error("a Kudu table's owner is a user: SET OWNER USER name")
                if not self._match_text_seq("USER"):
                    self.raise_error("Expected USER after SET OWNER")
                return self.expression(nodes.SetOwnerAction(this=self._k_ident("a user name")))
            if not self._match_text_seq("TBLPROPERTIES"):
                self.raise_error("Expected TBLPROPERTIES or OWNER after SET")
            return self.expression(
                nodes.SetTblPropertiesAction(expressions=self._k_properties(with_values=True))
            )
        if self._match_text_seq("UNSET", "TBLPROPERTIES"):
            return self.expression(
                nodes.SetTblPropertiesAction(
                    expressions=self._k_properties(with_values=False), unset=True
                )
            )
        self.raise_error(
            "Expected an ALTER TABLE action: ADD, DROP, CHANGE, RENAME TO, ALTER COLUMN, "
            "SET TBLPROPERTIES, UNSET TBLPROPERTIES, SET OWNER or EXECUTE"
        )
        raise AssertionError("unreachable")

    def _k_alter_add(self) -> exp.Expr:
        exists = self._match_text_seq("IF", "NOT", "EXISTS")
        if self._match_text_seq("RANGE", "PARTITION"):
            bound = self._k_with_range_hash(self._k_range_bound())
            return self.expression(nodes.AddRangePartitionAction(this=bound, exists=exists))
        if self._match_text_seq("COLUMNS"):
            exists = exists or self._match_text_seq("IF", "NOT", "EXISTS")
            self._k_expect_token(TokenType.L_PAREN, "( and a list of column definitions")
            columns, key = self._k_table_elements()
            if key:
                self.raise_error("ALTER TABLE cannot change the primary key")
            return self.expression(nodes.AddColumnsAction(expressions=columns, exists=exists))
        if self._match(TokenType.COLUMN):
            exists = exists or self._match_text_seq("IF", "NOT", "EXISTS")
            column = self._k_column_def()
            return self.expression(nodes.AddColumnsAction(expressions=[column], exists=exists))
        self.raise_error("Expected RANGE PARTITION, COLUMNS or COLUMN after ADD")
        raise AssertionError("unreachable")

    def _k_alter_column(self) -> nodes.AlterColumnAction:
        """``ALTER [COLUMN] c SET option [option ...]`` (Impala's column options: ENCODING,
        COMPRESSION, DEFAULT, BLOCK_SIZE, COMMENT, in any order) or ``... DROP DEFAULT``."""
        self._match(TokenType.COLUMN)
        name = self._k_ident("a column name")
        if self._match(TokenType.DROP):
            self._k_expect("DEFAULT")
            return self.expression(nodes.AlterColumnAction(this=name, drop=True))
        self._k_expect_token(TokenType.SET, "SET or DROP DEFAULT after the column name")
        args: dict[str, object] = {"this": name}
        if self._match_text_seq("NOT", "NULL", advance=False) or self._match_set(
            (TokenType.NULL, TokenType.PRIMARY_KEY), advance=False
        ):
            self.raise_error(
                "ALTER COLUMN cannot change NULL / NOT NULL or PRIMARY KEY "
                "(Kudu keeps a column's nullability and the primary key)"
            )
        self._k_column_options(name.name, args, key_options=False)
        if len(args) == 1:
            self.raise_error(f"Expected one of {', '.join(_COLUMN_ATTRIBUTES)} after SET")
        return self.expression(nodes.AlterColumnAction(**args))
