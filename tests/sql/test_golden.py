from __future__ import annotations

from pathlib import Path

import pytest

from tests.sql.slt import run_file
from tests.support.targets import Target

GOLDEN = sorted((Path(__file__).parent / "golden").glob("*.test"))


@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_golden(path: Path, target: Target) -> None:
    run_file(path, target)
