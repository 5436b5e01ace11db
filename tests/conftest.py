"""Shared fixtures, Hypothesis profiles (dev by default, ci on CI, nightly for long runs),
markers, and a bound on every test of the default suite (``tests/support/timing.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.targets import Target, cluster_url, empty, sql_cluster
from tests.support.timing import TEST_BOUND

settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "nightly", deadline=None, max_examples=2000, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/spark is marked ``spark``; every ``spark`` test runs on one
    xdist worker (``--dist loadgroup``), so one JVM serves them all. A test of the
    default suite without a timeout of its own fails after ``TEST_BOUND`` (a hang, with
    its stack, rather than a suite that never ends)."""
    for item in items:
        if "tests/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group("spark"))
        if item.get_closest_marker("timeout") is None and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.timeout(TEST_BOUND))


@pytest.fixture(scope="session")
def sql_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of this test process's cluster for SQL tests (started on first use)."""
    with sql_cluster(tmp_path_factory.mktemp("sql-cluster")) as cluster:
        yield cluster_url(cluster)


@pytest.fixture(params=["embedded", "cluster"])
def target(request: pytest.FixtureRequest) -> Target:
    """Run the test against an embedded database and against a cluster (emptied)."""
    if request.param == "embedded":
        return Target("embedded")
    url = request.getfixturevalue("sql_cluster_url")
    empty(url)
    return Target("cluster", url)
