"""Writes and reads while a flush or a delta flush is running (Kudu's mt-tablet-test)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kudusql.storage.tablet import compaction_worker as tablet_mod
from tests.support.tablets import SMALL, new_tablet, pause_at, reopen, rows, schema
from tests.support.timing import WAIT

KV = schema(("key", "BIGINT"), ("val", "INT"), key=["key"])


def kv(keys: list[int], vals: list[int] | None = None) -> pa.Table:
    cols: dict[str, Any] = {"key": pa.array(keys, pa.int64())}
    if vals is not None:
        cols["val"] = pa.array(vals, pa.int32())
    return pa.table(cols)


def test_writes_and_reads_continue_during_a_flush(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = new_tablet(tmp_path, KV)
    t.insert(kv(list(range(10)), list(range(10))))
    before = t.latest_timestamp()
    entered, release = pause_at(monkeypatch, tablet_mod, "write_rowsets")
    th = threading.Thread(target=t.flush)
    th.start()
    assert entered.wait(WAIT)
    # The MemRowSet is frozen and being written: keep writing and reading.
    t.update(kv([1, 2], [100, 200]))  # rows of the frozen MemRowSet
    t.delete(kv([3]))
    t.insert(kv([3, 20], [33, 20]))  # reinsert goes to the new MemRowSet
    res = t.insert(kv([5], [0]))
    assert res.errors[0].message == "key already present"
    mid = t.latest_timestamp()
    expect_mid = {0: 0, 1: 100, 2: 200, 3: 33, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 20: 20}
    assert {r["key"]: r["val"] for r in rows(t)} == expect_mid
    release.set()
    th.join(WAIT)
    assert not th.is_alive()
    assert {r["key"]: r["val"] for r in rows(t)} == expect_mid
    assert {r["key"]: r["val"] for r in rows(t, snapshot=before)} == {i: i for i in range(10)}
    assert {r["key"]: r["val"] for r in rows(t, snapshot=mid)} == expect_mid
    t = reopen(t)
    assert {r["key"]: r["val"] for r in rows(t)} == expect_mid
    assert {r["key"]: r["val"] for r in rows(t, snapshot=before)} == {i: i for i in range(10)}
    t.close()


def test_writes_continue_during_a_delta_flush(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = new_tablet(tmp_path, KV)
    t.insert(kv(list(range(10)), list(range(10))))
    t.flush()
    t.update(kv([1], [10]))
    entered, release = pause_at(monkeypatch, tablet_mod, "write_delta_file")
    th = threading.Thread(target=t.flush_deltas)
    th.start()
    assert entered.wait(WAIT)
    t.update(kv([1, 2], [11, 22]))
    t.delete(kv([4]))
    assert {r["key"]: r["val"] for r in rows(t)}[1] == 11
    release.set()
    th.join(WAIT)
    got = {r["key"]: r["val"] for r in rows(t)}
    assert got[1] == 11 and got[2] == 22 and 4 not in got
    t = reopen(t)
    assert {r["key"]: r["val"] for r in rows(t)} == got
    t.close()


def test_readers_keep_their_snapshot_while_writers_run(tmp_path: Any) -> None:
    """A writer thread updates every row repeatedly and flushes; readers at a fixed
    snapshot always see the same sum, and latest readers never see a half batch."""
    t = new_tablet(tmp_path, KV, SMALL.with_(rows_per_page=64))
    n = 500
    t.insert(kv(list(range(n)), [0] * n))
    t.flush()
    snap = t.latest_timestamp()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(1, 30):
                t.update(kv(list(range(n)), [i] * n))
                if i % 7 == 0:
                    t.flush_deltas()
                if i % 11 == 0:
                    t.insert(kv([n + i], [i]))
                    t.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            stop.set()

    th = threading.Thread(target=writer)
    th.start()
    while not stop.is_set():
        old = t.scan(["val"], snapshot=snap).read_all().column("val").to_numpy()
        assert len(old) == n and int(old.sum()) == 0
        cur = t.scan(["key", "val"]).read_all()
        vals = cur.filter(pa.compute.less(cur.column("key"), n)).column("val").to_numpy()
        assert len(np.unique(vals)) == 1, "a reader saw half of a write batch"
    th.join()
    assert not errors
    t.close()
