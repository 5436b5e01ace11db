"""The SQL front end's syntax layer: the kudusql dialect on sqlglot and the typed
statement model (issue 6). ``parse(sql)`` turns a script into ``Statement``s; see
``docs/SQL.md`` for the language.

Modules: ``dialect`` (tokenizer, statement parser, the ``KuduSQL`` dialect),
``ddl_parser`` (CREATE/ALTER/DROP grammar), ``nodes`` (syntax-tree nodes), ``generator``
(canonical SQL and DuckDB SQL), ``statements`` (typed statements), ``convert`` (``parse``)
and ``ddl_convert`` (trees to statements), ``literals`` (constants and types), ``names``
(identifier folding and matching, ``TableName``), ``limits`` (nesting limit, stack headroom,
cancellation), ``errors`` (messages with line, column and caret; DuckDB's errors in the
user's terms), ``locate`` (pointing an error at what it names in the statement).
"""

from kudusql.parser.convert import parse, parse_one
from kudusql.parser.dialect import DIALECT, KuduSQL
from kudusql.parser.generator import to_duckdb_sql
from kudusql.parser.statements import Statement

__all__ = ["DIALECT", "KuduSQL", "Statement", "parse", "parse_one", "to_duckdb_sql"]
