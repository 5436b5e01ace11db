"""The kudusql SQL dialect: sqlglot's DuckDB dialect extended with Kudu's and Impala's
statements (``docs/SQL.md`` is the user's reference).

This module owns the ``KuduSQL`` dialect (registered with sqlglot as ``"kudusql"``) and
its tokenizer and statement parser. Queries parse exactly as in DuckDB (so the planner
can hand them to DuckDB), with three additions: time travel per table reference
(``FOR SYSTEM_TIME AS OF e`` / ``TIMESTAMP AS OF e``, kept as ``exp.Version`` on the
``exp.Table``), the ``table_changes`` table function and Kudu's type names (``INT8`` is
Kudu's one-byte integer, not DuckDB's BIGINT). Every other statement is dispatched by its
first word to a kudusql parser; anything else is a syntax error: nothing ever falls back
to sqlglot's generic ``exp.Command``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from kudusql.parser import nodes
from kudusql.parser.ddl_parser import DdlParser
from kudusql.parser.errors import KuduParseError
from kudusql.parser.generator import KuduGenerator
from kudusql.parser.limits import check_cancelled

_QUERY_STARTS = frozenset(
    {
        TokenType.SELECT,
        TokenType.WITH,
        TokenType.L_PAREN,
        TokenType.VALUES,
        TokenType.FROM,
        TokenType.SEMICOLON,
    }
)
#: What cannot start a SELECT list: ``SELECT straight_join FROM t`` selects a column.
_NOT_A_PROJECTION = frozenset(
    {TokenType.FROM, TokenType.COMMA, TokenType.SEMICOLON, TokenType.ALIAS, TokenType.DOT}
)
_DML_STARTS = frozenset({TokenType.INSERT, TokenType.UPDATE, TokenType.DELETE})
_SETTING_VALUE_TOKENS = frozenset(
    {
        TokenType.STRING,
        TokenType.NUMBER,
        TokenType.TRUE,
        TokenType.FALSE,
        TokenType.NULL,
        TokenType.DASH,
    }
)


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+.*?>")


_CLAUSES = frozenset({"WHERE", "HAVING", "QUALIFY", "JOIN", "GROUP", "ORDER", "LIMIT"})
_MISSING_ARG = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]*\.(\w+)'>")


def _readable(message: str, token: Token | None) -> str:
    """sqlglot's messages in words a SQL user reads (no token or class reprs)."""

    def one(m: re.Match[str]) -> str:
        return "the end of the statement" if m.group(1) == "SENTINEL" else repr(m.group(2))

    if message == "Invalid expression / Unexpected token" and token is not None:
        return f"Unexpected {token.text!r}: expected the end of the statement here"
    missing = _MISSING_ARG.fullmatch(message)
    if missing:
        name = missing.group(1).upper()
        what = f"{name} clause" if name in _CLAUSES else "expression"
        return f"Incomplete {what}: expected an expression"
    return _TOKEN_REPR.sub(one, message)


class KuduTokenizer(DuckDB.Tokenizer):
    """DuckDB's tokenizer with Impala's lexical rules (``docs/SQL.md``, "Literals and
    names"), without command fall-backs, with Kudu's type names, ``X'..'`` byte literals
    and the keywords kudusql needs.

    - A string literal is quoted with ``'`` or ``"``; inside it a backslash escapes as
      in Impala (``\\n``, ``\\t``, ``\\0``, ``\\'``, ``\\\\``, three octal digits
      ``\\ooo`` up to ``\\177``, ``\\uXXXX``; ``\\%`` and ``\\_`` keep their
      backslash for LIKE; any other character loses it) and a doubled quote is one quote.
    - A quoted name is in backticks (a doubled backtick is one); Impala trims the
      spaces around it, and an empty one is an error.
    """

    QUOTES: ClassVar[list[tuple[str, str] | str]] = ["'", '"']
    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ["`"]
    STRING_ESCAPES: ClassVar[list[str]] = ["'", '"', "\\"]
    IDENTIFIER_ESCAPES: ClassVar[list[str]] = []
    NESTED_COMMENTS = False  # Impala's /* */ comments do not nest
    # Impala's octal escapes take exactly three digits, the first 0 or 1 (at most \177);
    # ``\u`` takes exactly four hexadecimal digits (a lone surrogate half becomes ``?``,
    # as Impala's UTF-8 encoding of it does).
    NUMERIC_ESCAPES: ClassVar[dict[str, tuple[int, int, int, int]]] = {
        "0": (8, 3, 3, 0o177),
        "u": (16, 4, 4, 0xFFFF),
    }
    NUMERIC_ESCAPES_ARE_BYTES = False
    DROP_UNKNOWN_ESCAPES = True
    LONE_SURROGATE_REPLACEMENT = "?"
    HEX_STRINGS: ClassVar[list[str | tuple[str, str]]] = [("X'", "'"), ("x'", "'")]
    HEREDOC_STRINGS: ClassVar[list[str | tuple[str, str]]] = []  # no $$..$$ in Impala
    KEYWORDS: ClassVar[dict[str, TokenType]] = {
        # DuckDB's ``//`` operator would read ``a//*c*/`` as ``a // *c*/``; in Impala
        # (and here) it is ``a /`` then a comment.
        **{k: v for k, v in DuckDB.Tokenizer.KEYWORDS.items() if k != "//"},
        "INT8": TokenType.TINYINT,
        "INT16": TokenType.SMALLINT,
        "INT32": TokenType.INT,
        "INT64": TokenType.BIGINT,
        "VARCHAR": TokenType.VARCHAR,
        "CHAR": TokenType.CHAR,  # not DuckDB's alias of VARCHAR: CAST(x AS CHAR(n)) pads
        "IGNORE": TokenType.IGNORE,
        "EXPLAIN": TokenType.VAR,
        "RESET": TokenType.VAR,
        "CALL": TokenType.VAR,
        "OPTIMIZE": TokenType.VAR,
        "PREPARE": TokenType.VAR,
        "VACUUM": TokenType.VAR,
    }
    COMMANDS: ClassVar[set[TokenType]] = set()

    def tokenize(self, sql: str) -> list[Token]:
        tokens = super().tokenize(sql)
        for token in tokens:
            if token.token_type is TokenType.IDENTIFIER:
                name = token.text.strip()
                if not name:
                    raise TokenError(f"a quoted name is empty from {token.line}:{token.start}")
                token.text = name
        return tokens


def _impala_call(name: str) -> Callable[[list[exp.Expr]], exp.Expr]:
    """A call of Impala's function ``name`` kept as written: sqlglot would turn some of
    these into DuckDB functions of other meanings (``date_add(d, 1)`` into ``d +
    INTERVAL 1 DAY``, a TIMESTAMP for a DATE; ``now()`` into a TIMESTAMP WITH TIME
    ZONE). The executor's ``impala_functions`` defines them in DuckDB."""

    def build(args: list[exp.Expr]) -> exp.Expr:
        return exp.Anonymous(this=name, expressions=args)

    return build


#: Impala functions sqlglot would otherwise rewrite (see ``_impala_call``).
IMPALA_FUNCTIONS = (
    "now",
    "current_timestamp",
    "utc_timestamp",
    "unix_timestamp",
    "from_unixtime",
    "to_timestamp",
    "from_timestamp",
    "date_add",
    "date_sub",
    "adddate",
    "subdate",
    "add_months",
    "factorial",
)


class KuduParser(DdlParser):
    """The statement parser (see the module docstring)."""

    TYPE_CONVERTERS: ClassVar[dict[exp.DType, Callable[[exp.DataType], exp.DataType]]] = {}
    FUNCTIONS: ClassVar[dict[str, Callable[..., Any]]] = {
        **DdlParser.FUNCTIONS,
        "TABLE_CHANGES": nodes.TableChanges.from_arg_list,
        **{name.upper(): _impala_call(name) for name in IMPALA_FUNCTIONS},
    }
    NO_PAREN_FUNCTIONS: ClassVar[dict[TokenType, Callable[[], exp.Expr]]] = {
        **DdlParser.NO_PAREN_FUNCTIONS,
        TokenType.CURRENT_TIMESTAMP: lambda: exp.Anonymous(this="current_timestamp"),
    }
    TYPE_LITERAL_PARSERS: ClassVar[dict[exp.DType, Callable[..., exp.Expr]]] = {
        **DdlParser.TYPE_LITERAL_PARSERS,
        **{
            kind: lambda self, this, to: self.expression(nodes.TimestampLiteral(this=this, to=to))
            for kind in (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPNTZ)
        },
    }
    VERSION_PHRASES: ClassVar[dict[tuple[str, ...], str]] = {
        ("FOR", "SYSTEM_TIME"): "TIMESTAMP",
        ("FOR", "TIMESTAMP"): "TIMESTAMP",
        ("TIMESTAMP", "AS", "OF"): "TIMESTAMP",
    }

    #: Set by ``convert.parse``: the statement's cancellation (``Session.interrupt``).
    cancelled: threading.Event | None = None

    def _advance(self, times: int = 1) -> None:
        super()._advance(times)
        if self.cancelled is not None and self.cancelled.is_set():
            check_cancelled(self.cancelled)

    # -- dispatch -------------------------------------------------------------------------------
    def _parse_statement(self) -> exp.Expr | None:
        if not self._curr:
            return None
        token = self._curr
        word = token.text.upper() if token.token_type != TokenType.STRING else ""
        handler = _STATEMENTS.get(word)
        if handler is not None:
            self._advance()
            comments = self._prev_comments
            node = handler(self)
            if comments:
                node.add_comments(comments, prepend=True)
            return node
        if token.token_type in _QUERY_STARTS or token.token_type in _DML_STARTS:
            node2 = super()._parse_statement()
            if isinstance(node2, exp.Command):
                self.raise_error(f"Unsupported statement {word}", token)
            return node2
        self.raise_error(f"Unsupported statement {token.text!r}", token)
        return None

    def raise_error(self, message: str, token: Token | None = None) -> None:
        at = token or self._curr or self._prev
        offset = -1 if at is None else at.start
        if not self._curr and token is None and self._prev:
            offset = self._prev.end + 1
            message = f"{message} (the statement ended early)"
        raise KuduParseError(_readable(message, at), offset)

    def _parse_projections(self) -> tuple[list[exp.Expr], list[exp.Expr] | None]:
        # Impala's STRAIGHT_JOIN hint after SELECT [ALL | DISTINCT]: DuckDB plans joins
        # itself, so the hint is read and ignored.
        if (
            self._curr is not None
            and self._curr.token_type is TokenType.STRAIGHT_JOIN
            and self._next is not None
            and self._next.token_type not in _NOT_A_PROJECTION
        ):
            self._advance()
        return super()._parse_projections()

    def _parse_derived_table_values(self, allow_value_synonym: bool = False) -> exp.Values | None:
        # Impala's ``VALUES ((1, 'a'), (2, 'b'))``: one parenthesized list of rows is the
        # rows themselves. Impala has no row constructors, so a VALUES whose only row
        # holds nothing but parenthesized tuples means this; DuckDB would read one row
        # of structs.
        values = super()._parse_derived_table_values(allow_value_synonym)
        if values is not None and len(values.expressions) == 1:
            only = values.expressions[0]
            inner = only.expressions if isinstance(only, exp.Tuple) else []
            if inner and all(isinstance(r, exp.Tuple) for r in inner):
                values.set("expressions", list(inner))
        return values

    def _parse_version(self) -> exp.Version | None:
        start = self._curr
        version = super()._parse_version()
        if version is not None and version.text("kind") != "AS OF":
            self.raise_error(f"time travel supports AS OF only, not {version.text('kind')}", start)
        return version

    # -- statements -----------------------------------------------------------------------------
    def _k_use(self) -> exp.Expr:
        return self.expression(nodes.UseDatabase(this=self._k_ident("a database name")))

    def _k_like(self) -> exp.Expr | None:
        self._match_text_seq("LIKE")
        return self._k_string("a pattern") if self._match(TokenType.STRING, False) else None

    def _k_show(self) -> exp.Expr:
        if self._match_texts(("DATABASES", "SCHEMAS")):
            return self.expression(nodes.ShowDatabases(like=self._k_like()))
        if self._match_text_seq("TABLES"):
            db = self._match_set((TokenType.IN, TokenType.FROM)) and self._k_ident("a database")
            return self.expression(nodes.ShowTables(this=db or None, like=self._k_like()))
        if self._match_text_seq("CREATE", "TABLE"):
            return self.expression(nodes.ShowCreateTable(this=self._k_table()))
        if self._match_text_seq("RANGE", "PARTITIONS"):
            return self.expression(nodes.ShowPartitions(this=self._k_table(), range=True))
        if self._match_text_seq("HASH", "SCHEMA"):
            return self.expression(nodes.ShowHashSchema(this=self._k_table()))
        if self._match_text_seq("PARTITIONS"):
            return self.expression(nodes.ShowPartitions(this=self._k_table()))
        if self._match_text_seq("TABLET", "SERVERS"):
            return self.expression(nodes.ShowTabletServers())
        if self._match_text_seq("TABLE", "STATS"):
            return self.expression(nodes.ShowTableStats(this=self._k_table()))
        if self._match_text_seq("COLUMN", "STATS"):
            return self.expression(nodes.ShowTableStats(this=self._k_table(), columns=True))
        if self._match_text_seq("SETTINGS") or self._match(TokenType.ALL):
            self._match_text_seq("SETTINGS")
            return self.expression(nodes.ShowSettings())
        if self._curr and self._curr.token_type in (TokenType.VAR, TokenType.IDENTIFIER):
            return self.expression(nodes.ShowSettings(this=self._k_ident("a setting name")))
        self.raise_error(
            "Expected DATABASES, TABLES, CREATE TABLE, PARTITIONS, RANGE PARTITIONS, "
            "HASH SCHEMA, TABLE STATS, COLUMN STATS, TABLET SERVERS, SETTINGS, ALL or a setting "
            "name after SHOW"
        )
        raise AssertionError("unreachable")

    def _k_describe(self) -> exp.Expr:
        style = self._match_texts(("FORMATTED", "EXTENDED")) and exp.Var(
            this=self._prev.text.upper()
        )
        self._match(TokenType.TABLE)
        return self.expression(nodes.DescribeTable(this=self._k_table(), style=style or None))

    def _k_compute(self) -> exp.Expr:
        self._k_expect("STATS")
        return self.expression(nodes.ComputeStats(this=self._k_table()))

    def _k_explain(self) -> exp.Expr:
        if self._curr and self._curr.text.upper() == "EXPLAIN":
            self.raise_error("EXPLAIN cannot explain EXPLAIN")
        inner = self._parse_statement()
        if inner is None:
            self.raise_error("Expected a statement after EXPLAIN")
        return self.expression(nodes.ExplainStatement(this=inner))

    def _k_set(self) -> exp.Expr:
        if not self._curr or self._match(TokenType.ALL):
            return self.expression(nodes.ShowSettings())
        name = self._k_ident("a setting name")
        if not self._match(TokenType.EQ):
            self._k_expect("TO")
        value: exp.Expr
        if self._curr and self._curr.token_type in _SETTING_VALUE_TOKENS:
            value = self._k_value()
        else:
            value = exp.Var(this=self._k_word("a setting value"))
        return self.expression(nodes.SetOption(this=name, expression=value))

    def _k_upsert(self) -> exp.Expr:
        if self._match_set((TokenType.IGNORE, TokenType.OVERWRITE)):
            self.raise_error(f"UPSERT {self._prev.text.upper()} is not valid", self._prev)
        insert = self._parse_insert()
        if not isinstance(insert, exp.Insert):
            self.raise_error("Expected UPSERT INTO table ...")
        return self.expression(nodes.Upsert(this=insert))

    def _k_short_maintenance(self, kind: str) -> exp.Expr:
        self._k_expect_token(TokenType.TABLE, f"TABLE after {kind}")
        return self.expression(nodes.MaintainTable(this=self._k_table(), kind=exp.Var(this=kind)))


_STATEMENTS: dict[str, Callable[[KuduParser], exp.Expr]] = {
    "CREATE": KuduParser._k_create,
    "DROP": KuduParser._k_drop,
    "ALTER": KuduParser._k_alter,
    "USE": KuduParser._k_use,
    "SHOW": KuduParser._k_show,
    "DESCRIBE": KuduParser._k_describe,
    "DESC": KuduParser._k_describe,
    "COMPUTE": KuduParser._k_compute,
    "EXPLAIN": KuduParser._k_explain,
    "SET": KuduParser._k_set,
    "UPSERT": KuduParser._k_upsert,
    "FLUSH": lambda p: p._k_short_maintenance("FLUSH"),
    "COMPACT": lambda p: p._k_short_maintenance("COMPACT"),
}


class KuduSQL(DuckDB):
    """kudusql's dialect; ``sqlglot.parse_one(sql, read="kudusql")`` uses it too."""

    # Impala's escapes (Hive's ``unescapeSQLString``): these, the octal and ``\u``
    # escapes of the tokenizer, and any other character after a backslash is itself.
    UNESCAPED_SEQUENCES = {  # noqa: RUF012 (sqlglot declares it an instance variable)
        "\\0": "\0",
        "\\'": "'",
        '\\"': '"',
        "\\b": "\b",
        "\\n": "\n",
        "\\r": "\r",
        "\\t": "\t",
        "\\Z": "\x1a",
        "\\\\": "\\",
        "\\%": "\\%",  # kept for LIKE, which reads it as a literal %
        "\\_": "\\_",
        "\\a": "a",  # sqlglot's defaults that Impala does not have
        "\\f": "f",
        "\\v": "v",
    }

    Tokenizer = KuduTokenizer
    Parser = KuduParser
    Generator = KuduGenerator


# NUL prints as three octal digits: ``\0`` before a digit would read as an octal escape.
KuduSQL.ESCAPED_SEQUENCES = {**KuduSQL.ESCAPED_SEQUENCES, "\0": "\\000"}


DIALECT = KuduSQL()
