"""Where a test's SQL runs: an embedded database or a cluster (``kudusql://``).

The ``target`` fixture (``tests/conftest.py``) runs a test once against each: a fresh
``:memory:`` database, and the session's cluster (a master and three tablet servers as
processes, started once per test process) emptied of tables first. Tests open
connections with ``target.connect()`` and need not know which one they have; the few
statements whose answers differ by mode say so (``target.cluster``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kudusql
from kudusql.cluster.launcher import MiniCluster
from kudusql.dbapi.connection import Connection
from tests.cluster.mini_cluster import mini_cluster_at

#: The embedded database's options for tests (no background work, no fsync).
EMBEDDED_OPTIONS: dict[str, Any] = {"maintenance": False, "sync": False}


@dataclass(frozen=True)
class Target:
    """``kind`` is ``embedded`` or ``cluster``; ``url`` the cluster's connect URL."""

    kind: str
    url: str | None = None

    @property
    def cluster(self) -> bool:
        return self.kind == "cluster"

    def connect(self, **options: Any) -> Connection:
        if self.url is None:
            return kudusql.connect(":memory:", **{**EMBEDDED_OPTIONS, **options})
        return kudusql.connect(self.url, **options)


def cluster_url(cluster: MiniCluster) -> str:
    return cluster.url


@contextmanager
def sql_cluster(root: Path) -> Iterator[MiniCluster]:
    """A cluster for SQL tests under ``root``, stopped however the block ends."""
    with mini_cluster_at(root, replicas=1) as cluster:
        yield cluster


def empty(url: str) -> None:
    """Drop every table and SQL database of the cluster at ``url``."""
    with kudusql.connect(url) as conn:
        db = conn.session.db
        for name in db.table_names():
            db.drop_table(name, if_exists=True)
        conn.session.registry._save({})
