"""Log GC across sessions: WAL segments wholly below what every store has flushed are
deleted, whoever wrote them (an earlier session, this one), once they have been obsolete
for ``file_grace_s``; a writer that closes flushes first when the next open would replay
more than ``wal_replay_max_segments`` segments. So open/write/close cycles keep the
number of segment files bounded, and no row is lost."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

import pyarrow as pa

import kudusql.dbapi as dbapi
from kudusql.common.options import TabletOptions
from kudusql.storage.tablet import metadata
from kudusql.storage.tablet.tablet import Tablet
from tests.support.tablets import schema

SCH = schema(("k", "BIGINT"), ("v", "STRING"), key=["k"])
OPTS = TabletOptions(sync=False, history_max_age_s=3600, file_grace_s=0)


def segments(path: str) -> list[str]:
    return sorted(glob.glob(os.path.join(path, "**", "wal", "wal-*.log"), recursive=True))


def insert(t: Tablet, keys: list[int]) -> None:
    t.insert(pa.table({"k": pa.array(keys, pa.int64()), "v": [f"v{k}" for k in keys]}))


def keys(t: Tablet) -> list[int]:
    return sorted(t.scan(["k"]).read_all().column("k").to_pylist())


def test_segments_of_earlier_sessions_are_deleted_once_flushed(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Tablet.create(path, SCH, OPTS).close()
    for i in range(5):  # five sessions, each leaving a segment of unflushed rows
        t = Tablet.open(path, OPTS)
        insert(t, [i])
        t.close()
    assert len(segments(path)) >= 5
    t = Tablet.open(path, OPTS)
    t.flush()  # every row durable: the earlier sessions' segments are garbage
    t.close()
    assert len(segments(path)) <= 2
    t = Tablet.open(path, OPTS, read_only=True)
    assert keys(t) == [0, 1, 2, 3, 4]
    t.close()


def test_the_grace_period_holds_across_sessions(tmp_path: Path) -> None:
    """A read-only process may still replay a segment for ``file_grace_s`` after the
    superblock that made it obsolete was saved, even when the writer restarts; once
    that is longer ago (the superblock's age), the next writer's open deletes it."""
    opts = OPTS.with_(file_grace_s=3600)
    path = str(tmp_path / "t")
    Tablet.create(path, SCH, opts).close()
    for i in range(4):
        t = Tablet.open(path, opts)
        insert(t, [i])
        if i == 2:
            t.flush()
        t.close()
    before = segments(path)
    t = Tablet.open(path, opts)
    t.close()
    assert set(before) <= set(segments(path))  # saved just now: kept
    past = time.time() - 7200
    os.utime(os.path.join(path, metadata.META_FILE), (past, past))
    ro = Tablet.open(path, opts, read_only=True)
    ro.close()
    assert set(before) <= set(segments(path))  # a reader never deletes
    t = Tablet.open(path, opts)
    assert len(segments(path)) < len(before)
    assert keys(t) == [0, 1, 2, 3]
    t.close()


def test_short_sessions_keep_the_log_bounded(tmp_path: Path) -> None:
    """The issue's case: each session writes a row and closes; no flush ever comes from
    a size or an age. Closing flushes once the log would replay too many segments."""
    opts = OPTS.with_(wal_replay_max_segments=8)
    path = str(tmp_path / "t")
    Tablet.create(path, SCH, opts).close()
    most = 0
    for i in range(60):
        t = Tablet.open(path, opts)
        insert(t, [i])
        t.close()
        most = max(most, len(segments(path)))
    assert most <= 8 + 2
    t = Tablet.open(path, opts, read_only=True)
    assert keys(t) == list(range(60))
    t.close()


def test_short_dbapi_sessions_keep_the_log_bounded(tmp_path: Path) -> None:
    """Through the DB-API, a two-tablet table, 40 sessions: segment files stay bounded
    (two tablets) and every row is there."""
    path = str(tmp_path / "db")
    opts = {"file_grace_s": 0, "wal_replay_max_segments": 4, "sync": False}
    with dbapi.connect(path, **opts) as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING) PARTITION BY HASH(k) PARTITIONS 2")
    most = 0
    for i in range(40):
        with dbapi.connect(path, **opts) as c:
            c.execute(f"INSERT INTO t VALUES ({i}, 'a'), ({i + 1000}, 'b')")
        most = max(most, len(segments(path)))
    assert most <= 2 * (4 + 2)
    with dbapi.connect(path, read_only=True) as c:
        assert c.execute("SELECT count(*), count(DISTINCT k) FROM t").fetchall() == [(80, 80)]


def test_sessions_that_write_nothing_leave_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Tablet.create(path, SCH, OPTS).close()
    t = Tablet.open(path, OPTS)
    insert(t, [1])
    t.flush()
    t.close()
    for _ in range(20):
        Tablet.open(path, OPTS).close()
    assert len(segments(path)) <= 2


def test_continuous_short_sessions_collect_what_is_older_than_the_grace(tmp_path: Path) -> None:
    """Sessions one after another, each flushing every few (so the superblock is always
    younger than the grace period): a segment still goes once what made it garbage is
    ``file_grace_s`` old, because the superblock records when each point became durable
    (``wal_gc_marks``), not only when it was last saved."""
    grace = 1.0
    opts = OPTS.with_(file_grace_s=grace, wal_replay_max_segments=2)
    path = str(tmp_path / "t")
    Tablet.create(path, SCH, opts).close()
    made: list[tuple[float, set[str]]] = []  # per session: its close time, its new segments
    start = time.monotonic()
    i = 0
    while True:
        before = set(segments(path))
        t = Tablet.open(path, opts)
        insert(t, [i])
        t.close()
        made.append((time.monotonic(), set(segments(path)) - before))
        i += 1
        # a session's segment is durable after a flush within ~2 sessions and marked by
        # the save after it: ripe ~ grace after the close 6 sessions on
        old = [
            segs
            for n, (_, segs) in enumerate(made[:-6])
            if made[n + 6][0] + grace < time.monotonic() - 0.5
        ]
        if (len(old) >= 10 and time.monotonic() - start > 4 * grace) or i >= 400:
            break
    assert len(old) >= 10
    left = set(segments(path))
    stale = set().union(*old) & left
    assert not stale, (len(stale), len(left), i)
    t = Tablet.open(path, opts, read_only=True)
    assert keys(t) == list(range(i))
    t.close()
