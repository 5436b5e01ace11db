"""Session settings: what ``SET name = value`` changes and ``SHOW SETTINGS`` lists.

This module owns the session settings and their types. ``abort_on_error`` makes DML
all-or-nothing; ``dml_batch_rows`` bounds the rows one storage write batch carries. The
database options (``TabletOptions``: flush thresholds, history age, threads, ...) are
set when the database is opened (``kudusql.connect(path, name=value)``); SHOW lists
them, SET refuses them with that advice.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kudusql.common.errors import NotSupportedError, ProgrammingError
from kudusql.common.options import TabletOptions

_DEFAULTS: dict[str, Any] = {"abort_on_error": False, "dml_batch_rows": 1_000_000}
_HELP = {
    "abort_on_error": "DML applies all rows or none, raising on the first row error",
    "dml_batch_rows": "most rows per storage write batch of an INSERT ... SELECT",
}


def _convert(name: str, value: Any) -> Any:
    default = _DEFAULTS[name]
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "on", "yes"):
            return True
        if text in ("false", "0", "off", "no"):
            return False
        raise ProgrammingError(f"setting {name!r} is a boolean (true or false), not {value!r}")
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ProgrammingError(f"setting {name!r} is an integer, not {value!r}") from None
    if n <= 0:
        raise ProgrammingError(f"setting {name!r} must be positive")
    return n


class Settings:
    """The settings of one session."""

    def __init__(self, options: TabletOptions, **values: Any) -> None:
        self.options = options
        self.values = dict(_DEFAULTS)
        for k, v in values.items():
            self.set(k, v)

    @staticmethod
    def is_setting(name: str) -> bool:
        return name.lower() in _DEFAULTS

    def set(self, name: str, value: Any) -> None:
        key = name.lower()
        if key in _DEFAULTS:
            self.values[key] = _convert(key, value)
            return
        if key in {f.name for f in dataclasses.fields(TabletOptions)}:
            raise NotSupportedError(
                f"{key!r} is a database option: open the database with "
                f"kudusql.connect(path, {key}=...)"
            )
        known = sorted([*_DEFAULTS, *(f.name for f in dataclasses.fields(TabletOptions))])
        raise ProgrammingError(f"unknown setting {name!r}; known: {', '.join(known)}")

    def get(self, name: str) -> Any:
        key = name.lower()
        if key in self.values:
            return self.values[key]
        if key in {f.name for f in dataclasses.fields(TabletOptions)}:
            return getattr(self.options, key)
        raise ProgrammingError(f"unknown setting {name!r}")

    @property
    def abort_on_error(self) -> bool:
        return bool(self.values["abort_on_error"])

    @property
    def dml_batch_rows(self) -> int:
        return int(self.values["dml_batch_rows"])

    def rows(self) -> list[tuple[str, str, str, str]]:
        """(name, value, scope, description) of every setting and database option."""
        out = [(k, _text(v), "session", _HELP[k]) for k, v in sorted(self.values.items())]
        out += [
            (f.name, _text(getattr(self.options, f.name)), "database", "set in connect()")
            for f in dataclasses.fields(TabletOptions)
        ]
        return out


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)
