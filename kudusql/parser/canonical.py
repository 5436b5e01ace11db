"""A short, deterministic text form of a parsed statement (golden tests, debugging).

This module owns ``canonical(statement)``: dataclasses print as ``Name(field=value)``
without fields at their default (and without ``text``), types as their
kudusql names (``INT64``, ``DECIMAL(10,2)``), table names as ``db.t``, sqlglot trees as
their kudusql SQL between backquotes; anything longer than a line breaks one field or
item per line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from kudusql.common.types import DataType
from kudusql.parser.names import TableName

_WIDTH = 96
_HIDDEN = frozenset({"text"})


def canonical(value: Any) -> str:
    """The canonical text of a statement or any value inside one."""
    return _render(value, 0)


def _fields(value: Any) -> list[tuple[str, Any]]:
    out = []
    for f in dataclasses.fields(value):
        if f.name in _HIDDEN:
            continue
        v = getattr(value, f.name)
        if f.default is not dataclasses.MISSING and v == f.default:
            continue
        if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
            continue
        out.append((f.name, v))
    return out


def _flat(value: Any) -> str:
    if isinstance(value, TableName | DataType):
        return str(value)
    if isinstance(value, exp.Expr):
        return f"`{value.sql(dialect='kudusql')}`"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        inner = ", ".join(f"{k}={_flat(v)}" for k, v in _fields(value))
        return f"{type(value).__name__}({inner})"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_flat(k)}: {_flat(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _render(value: Any, depth: int, used: int = 0) -> str:
    flat = _flat(value)
    if used + len(flat) <= _WIDTH:
        return flat
    pad = "  " * (depth + 1)
    end = "  " * depth
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        lines = [
            f"{pad}{k}={_render(v, depth + 1, len(pad) + len(k) + 1)}" for k, v in _fields(value)
        ]
        return f"{type(value).__name__}(\n" + "\n".join(lines) + f"\n{end})"
    if isinstance(value, tuple | list) and value:
        lines = [f"{pad}{_render(v, depth + 1, len(pad))}" for v in value]
        return "[\n" + "\n".join(lines) + f"\n{end}]"
    return flat
