"""Engines on real kudusql databases in ``tmp_path`` (skipped without SQLAlchemy)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

sa = pytest.importorskip("sqlalchemy")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"kudusql:///{tmp_path / 'db'}"


@pytest.fixture
def engine(url: str) -> Iterator[sa.Engine]:
    e = sa.create_engine(url)
    yield e
    e.dispose()


@pytest.fixture
def sql(engine: sa.Engine) -> object:
    """Run one statement of kudusql SQL on ``engine``; the rows of a query."""

    def run(text: str, params: object = None) -> list[tuple[object, ...]]:
        with engine.connect() as c:
            r = c.exec_driver_sql(text, params or ())
            return [tuple(row) for row in r] if r.returns_rows else []

    return run
