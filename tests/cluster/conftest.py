"""The ``mini_cluster`` fixture: a master and three tablet servers as real processes
(``tests/cluster/mini_cluster.py``), shared by a module's tests and torn down after
them even when one fails. A test that kills a server restarts it before it ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kudusql.cluster.launcher import MiniCluster
from tests.cluster.mini_cluster import mini_cluster_at


@pytest.fixture(scope="module")
def mini_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniCluster]:
    root = tmp_path_factory.mktemp("cluster")
    with mini_cluster_at(root) as cluster:
        yield cluster
    # Every refused call and every crash above was handled, not a bug with a traceback.
    for log in [root / "master" / "master.log", *root.glob("ts-*/tserver.log")]:
        assert "Traceback" not in log.read_text(), f"{log} has a traceback"
