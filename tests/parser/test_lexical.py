"""Impala's lexical rules (``parser.dialect.KuduTokenizer``): strings in single or double
quotes with backslash escapes, names in backticks; and every other reader of SQL text
(the shell's statement splitter, parameter binding, the generator) agrees with them."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import TokenType

from kudusql.common.errors import ProgrammingError
from kudusql.engine.params import bind, literal_sql
from kudusql.parser import DIALECT, parse
from kudusql.parser.dialect import KuduTokenizer
from kudusql.shell import splitter


def _strings(sql: str) -> list[str]:
    return [t.text for t in DIALECT.tokenize(sql) if t.token_type is TokenType.STRING]


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("'a\\\\b'", "a\\b"),
        ("'it\\'s'", "it's"),
        ("'it''s'", "it's"),
        ('"say \\"hi\\""', 'say "hi"'),
        ('"say ""hi"""', 'say "hi"'),
        ('"it\'s"', "it's"),
        ("'a\"b'", 'a"b'),
        ("'\\n\\t\\r\\b\\Z\\0'", "\n\t\r\b\x1a\x00"),
        ("'\\012\\101\\177'", "\nA\x7f"),  # three octal digits, the first 0 or 1
        ("'\\200'", "200"),  # not an octal escape: the backslash goes
        ("'\\0a\\08'", "\x00a\x008"),
        ("'\\u0041\\u00e9'", "Aé"),
        ("'\\uD83D\\uDE00'", "\U0001f600"),  # a surrogate pair
        ("'\\uD800x'", "?x"),  # a lone surrogate half, as Impala encodes it
        ("'\\u00zz'", "u00zz"),
        ("'\\%\\_'", "\\%\\_"),  # kept for LIKE
        ("'\\q\\a\\f\\v\\x41'", "qafvx41"),  # any other character loses its backslash
        ("'a\\\nb'", "a\nb"),
    ],
)
def test_string_escapes_are_impalas(sql: str, value: str) -> None:
    assert _strings(f"SELECT {sql}") == [value]


def test_backticks_quote_names_and_trim_spaces() -> None:
    tokens = DIALECT.tokenize("SELECT ` My Col `, `a``b` FROM `t`")
    names = [t.text for t in tokens if t.token_type is TokenType.IDENTIFIER]
    assert names == ["My Col", "a`b", "t"]
    with pytest.raises(ProgrammingError, match="a quoted name is empty"):
        parse("SELECT `  ` FROM t")


@given(st.text(st.sampled_from(["a", "'", '"', "`", "\\", "\n", "\x00", "%", "0", "1", "u"])))
@settings(max_examples=300)
def test_generated_literals_read_back_as_themselves(value: str) -> None:
    """The kudusql SQL of a string (what parameters bind as, and SHOW CREATE TABLE
    prints) reads back as the same string."""
    assert _strings(f"SELECT {literal_sql(value)}") == [value]
    assert _strings(bind("SELECT ?", [value])) == [value]


_TOKENIZER = KuduTokenizer(DIALECT)
_PIECES = ["a", " ", ";", "'", '"', "`", "\\", "-", "/", "*", "\n", "$", "?", "x"]


def _parser_ends(text: str) -> list[int] | None:
    """Where the tokenizer ends statements (its semicolons), None if the text ends
    inside a string, quoted name or comment."""
    try:  # without the check of empty quoted names, which is not about where they end
        tokens = super(KuduTokenizer, _TOKENIZER).tokenize(text)
    except TokenError:
        # A hex string with a non-hex character (``x' '``) is refused for its content,
        # not for where it ends: read it as the plain string of the same length.
        plain = re.sub(r"[xX](?=')", " ", text)
        if plain == text:
            return None
        return _parser_ends(plain)
    return [t.start for t in tokens if t.token_type is TokenType.SEMICOLON]


@given(st.lists(st.sampled_from(_PIECES), max_size=24).map("".join))
@example("x' ';")  # a hex string refused for its content, not for where it ends
@settings(max_examples=1500)
def test_the_shell_splits_statements_where_the_parser_does(text: str) -> None:
    spans, tail = splitter._scan(text)
    if any(meta for _, _, meta in spans) or splitter.is_meta(text):
        return  # a meta command line, which only the shell reads
    ends = _parser_ends(text)
    unterminated = bool(splitter._strip_comments(text[tail:]).strip())
    if ends is None:
        assert unterminated, text
        return
    assert [b - 1 for _, b, _ in spans] == ends, text


def test_identifiers_print_in_backticks() -> None:
    assert exp.column("My Col", quoted=True).sql(dialect=DIALECT) == "`My Col`"
    assert exp.to_identifier("a`b", quoted=True).sql(dialect=DIALECT) == "`a``b`"


def test_row_errors_show_strings_as_kudusql_sql_reads_them() -> None:
    from kudusql.common.types import display_value

    shown = display_value("a\\b'c")
    assert shown == "'a\\\\b''c'"
    assert _strings(f"SELECT {shown}") == ["a\\b'c"]
