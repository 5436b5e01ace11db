"""SF 0.01 TPC-H data shared by the runner's tests (and tests/sql/test_tpch.py): the
pytest cache's ``tpch`` directory, generated once."""

from __future__ import annotations

from pathlib import Path

import pytest

from kudusql_tpch.errors import TpchError
from kudusql_tpch.generate import generate_tpch, tpchgen_path

SF = 0.01


@pytest.fixture(scope="session")
def tpch_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory (files in ``<root>/sf0.01``), generated if needed (in a
    temporary directory when pytest's cache is off)."""
    try:
        tpchgen_path()
    except TpchError:
        pytest.skip("tpchgen-cli not installed (pip install tpchgen-cli, extra 'tpch')")
    cache = getattr(request.config, "cache", None)
    root = Path(cache.mkdir("tpch")) if cache is not None else tmp_path_factory.mktemp("tpch")
    generate_tpch(SF, root / "sf0.01", progress=False)
    return root
