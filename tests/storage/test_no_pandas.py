"""The engine runs without pandas: pandas is optional (``fetchdf``, ``to_pandas``), and no
write, flush or compaction path may import it, directly or through pyarrow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys

class NoPandas:  # as if pandas were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("No module named 'pandas'", name="pandas")
        return None

sys.meta_path.insert(0, NoPandas())
import kudusql
conn = kudusql.connect(sys.argv[1])
cur = conn.cursor()
cur.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, a TINYINT, b SMALLINT, c INT, "
            "d DOUBLE, s STRING, ts TIMESTAMP) PARTITION BY HASH (id) PARTITIONS 2")
cur.execute("INSERT INTO t SELECT i, i % 100, i % 1000, i, i / 3, 'v' || i, "
            "TIMESTAMP '2020-01-01' FROM range(0, 20000) r(i)")
cur.execute("FLUSH TABLE t")
cur.execute("CREATE TABLE u PRIMARY KEY (id) PARTITION BY HASH (id) PARTITIONS 2 "
            "AS SELECT * FROM t")
cur.execute("UPDATE t SET c = c + 1 WHERE id % 7 = 0")
cur.execute("COMPACT TABLE t")
cur.execute("SELECT count(*), sum(t.c) FROM t JOIN u USING (id)")
print(cur.fetchall())
"""


def test_writes_flushes_and_compactions_need_no_pandas(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "db")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    expected = sum(range(20000)) + len(range(0, 20000, 7))  # c = id, +1 where id % 7 = 0
    assert out.stdout.strip() == f"[(20000, {expected})]"
