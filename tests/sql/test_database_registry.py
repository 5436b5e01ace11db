"""The SQL database registry persists (checksummed, atomic) and a damaged one is a clear
CorruptionError naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

import kudusql
from kudusql.common.errors import CorruptionError
from kudusql.engine.databases import FILE_NAME


def test_databases_persist_and_corruption_names_the_file(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    with kudusql.connect(path, maintenance=False) as c:
        c.execute("CREATE DATABASE sales COMMENT 'numbers'")
        c.execute("CREATE DATABASE empty")
    with kudusql.connect(path, maintenance=False) as c:
        names = [r[0] for r in c.execute("SHOW DATABASES").fetchall()]
        assert {"default", "sales", "empty"} <= set(names)
    f = tmp_path / "db" / FILE_NAME
    data = bytearray(f.read_bytes())
    data[-2] ^= 0x55
    f.write_bytes(bytes(data))
    with kudusql.connect(path, maintenance=False) as c, pytest.raises(CorruptionError) as e:
        c.execute("SHOW DATABASES")
    assert FILE_NAME in str(e.value)
