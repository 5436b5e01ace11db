"""Helpers to build small tablets for tests."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

from kudusql.common.options import TabletOptions
from kudusql.common.schema import ColumnSchema, Schema
from kudusql.common.types import DataType
from kudusql.storage.tablet.tablet import Tablet
from tests.support.timing import WAIT

SMALL = TabletOptions(rows_per_page=4, sync=False, history_max_age_s=3600)


def schema(*cols: tuple[str, str] | tuple[str, str, dict[str, Any]], key: list[str]) -> Schema:
    out = []
    for c in cols:
        name, typ = c[0], c[1]
        extra: dict[str, Any] = {"nullable": name not in key}
        if len(c) > 2:
            extra.update(c[2])  # type: ignore[misc]
        out.append(ColumnSchema(name, DataType.parse(typ), **extra))
    return Schema.build(out, key)


def table(**cols: list[Any]) -> pa.Table:
    return pa.table(cols)


def rows(t: Tablet, **kw: Any) -> list[dict[str, Any]]:
    return t.scan(ordered=True, **kw).read_all().to_pylist()


def new_tablet(tmp_path: Any, sch: Schema, options: TabletOptions = SMALL) -> Tablet:
    return Tablet.create(str(tmp_path / "tablet"), sch, options)


def reopen(t: Tablet) -> Tablet:
    path, options = t.path, t.options
    t.close()
    return Tablet.open(path, options)


def pause_at(monkeypatch: Any, module: Any, name: str) -> tuple[threading.Event, threading.Event]:
    """Make ``module.<name>`` wait until released, to hold a flush or compaction open:
    returns (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    orig = getattr(module, name)

    def slow(*a: Any, **kw: Any) -> Any:
        entered.set()
        assert release.wait(WAIT)
        return orig(*a, **kw)

    monkeypatch.setattr(module, name, slow)
    return entered, release
