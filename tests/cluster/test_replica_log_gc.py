"""A replicated tablet's durable applied state and consensus log GC (docs/CLUSTER.md,
"Durable applied state and log GC"): a writer process SIGKILLed again and again (at
random moments and at durability points) while flushes, compactions and segment
deletions run under its writes reopens with exactly the acknowledged batches applied
once each; bootstrap after a flush replays only the tail; a tablet WAL tail lost to a
power cut comes back from the consensus log; GCed segments stay gone across restarts,
followers still catch up, and one behind the GC point is reported as needing a copy."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.cluster.test_tablet_replica as trep
from kudusql.cluster.tserver.tablet_replica import ReplicaOptions, TabletReplica
from kudusql.common.options import TabletOptions
from kudusql.consensus.opid import OpId
from kudusql.consensus.raft_config import RaftConfig
from kudusql.consensus.raft_consensus import RaftOptions
from kudusql.storage.consensus import write_copied_log
from tests.cluster.replica_gc_writer import (
    OPTIONS as WRITER_OPTIONS,
)
from tests.cluster.replica_gc_writer import (
    SCHEMA,
    UUID,
    model,
    open_replica,
    settled,
    write_batch,
)
from tests.cluster.test_tablet_replica import UUIDS, Group, wait_for
from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
POINTS = ["write", "fsync", "rename", "fsync_dir", "delete"]


# -- the crash loop ---------------------------------------------------------------------------


def _acks(path: Path) -> list[int]:
    return [int(x.split()[1]) for x in path.read_text().splitlines() if x.startswith("ACK ")]


def _run_writer(directory: Path, rng: random.Random) -> int:
    """One writer process, killed after a random number of batches or at a random
    durability point; the last batch it saw acknowledged (0: none). Its output goes to
    a file (a helper process it started may outlive it holding a pipe open)."""
    args = [sys.executable, "-m", "tests.cluster.replica_gc_writer", str(directory)]
    if rng.random() < 0.5:
        args += [rng.choice(POINTS), str(rng.randint(0, 60))]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = directory.parent / "writer.stdout"
    stderr = directory.parent / "writer.stderr"
    want = rng.randint(1, 40)
    with open(out, "wb") as o, open(stderr, "ab") as err:
        p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=o, stderr=err)
        deadline = time.monotonic() + scaled(60)
        while p.poll() is None and len(_acks(out)) < want and time.monotonic() < deadline:
            time.sleep(0.01)
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert p.returncode == -signal.SIGKILL, stderr.read_text()[-3000:]
    acks = _acks(out)
    return acks[-1] if acks else 0


def _crash_loop(tmp_path: Path, rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    directory = tmp_path / "replica"
    acked = 0
    first_index = 1
    for _ in range(rounds):
        acked = max(acked, _run_writer(directory, rng))
        if not (directory / "replica.meta").exists():
            assert acked == 0  # killed while creating it
            continue
        replica = open_replica(str(directory))
        try:
            last, rows = settled(replica, scaled(20))
            # Every acknowledged batch, each once, and nothing else.
            assert last >= acked
            assert rows == model(last), (last, acked)
            acked = last
            first_index = max(first_index, replica.log_first_index)
        finally:
            replica.abandon()
    assert "Traceback" not in (tmp_path / "writer.stderr").read_text()
    assert first_index > 1, "the log GC never deleted a segment"


def test_sigkilled_writer_reopens_with_each_acknowledged_batch_once(tmp_path: Path) -> None:
    _crash_loop(tmp_path, rounds=4, seed=1)


@pytest.mark.slow
def test_sigkilled_writer_long_loop(tmp_path: Path) -> None:
    _crash_loop(tmp_path, rounds=40, seed=2)


# -- one replica in process -------------------------------------------------------------------

SOLO_OPTIONS = ReplicaOptions(
    raft=WRITER_OPTIONS.raft,
    tick_interval_s=0.01,
    tablet=TabletOptions(),
    log_segment_bytes=4096,
    log_gc_interval_s=0,
)


@pytest.fixture
def solo(tmp_path: Path) -> Iterator[str]:
    directory = str(tmp_path / "solo")
    TabletReplica.create(
        directory,
        uuid=UUID,
        tablet_id="t1",
        schema=SCHEMA,
        config=RaftConfig.of_voters([UUID]),
        transport=lambda m: None,
        options=SOLO_OPTIONS,
    ).close()
    yield directory


def _open(directory: str) -> TabletReplica:
    return TabletReplica.open(directory, transport=lambda m: None, options=SOLO_OPTIONS)


def _write(replica: TabletReplica, batches: range) -> None:
    settled(replica, scaled(20))
    for n in batches:
        write_batch(replica, n)


def test_bootstrap_after_a_flush_replays_only_the_tail(solo: str) -> None:
    replica = _open(solo)
    _write(replica, range(1, 31))
    assert replica.flush_and_gc(flush=True) > 0  # and segments went
    _write(replica, range(31, 36))
    replica.abandon()  # a SIGKILL: nothing synced on the way out
    replica = _open(solo)
    try:
        stats = replica.bootstrap_stats
        # The tablet held every entry; its WAL replayed only the 5 batches (+ their
        # progress rows) after the flush; no consensus log entry applied again.
        assert stats["entries_replayed"] == 0
        assert 0 < stats["tablet_wal_rows"] <= 5 * 7
        assert stats["applied_index"] == replica.applied_index
        last, rows = settled(replica, scaled(20))
        assert last == 35 and rows == model(35)
    finally:
        replica.close()


def test_a_tablet_wal_tail_lost_to_a_power_cut_comes_back_from_the_consensus_log(
    solo: str,
) -> None:
    replica = _open(solo)
    _write(replica, range(1, 21))
    replica.flush_and_gc(flush=False)  # every applied entry durable in the tablet
    durable = replica.applied_index
    wal = Path(solo) / "tablet" / "wal"
    sizes = {p.name: p.stat().st_size for p in wal.iterdir()}
    _write(replica, range(21, 26))
    replica.abandon()
    # A power cut: what the tablet's WAL had not synced is gone (the consensus log
    # synced each entry before it was acknowledged).
    for p in wal.iterdir():
        if p.name not in sizes:
            p.unlink()
        else:
            os.truncate(p, sizes[p.name])
    replica = _open(solo)
    try:
        assert replica.bootstrap_stats["applied_index"] == durable
        last, rows = settled(replica, scaled(20))
        assert last == 25 and rows == model(25)
    finally:
        replica.close()


# -- three replicas -------------------------------------------------------------------------

GROUP_OPTIONS = ReplicaOptions(
    raft=RaftOptions(heartbeat_interval_ms=50, evict_failed_followers=False),
    tick_interval_s=0.01,
    write_timeout_s=5.0,
    log_segment_bytes=4096,
    log_max_segments_to_retain=2,
    log_gc_interval_s=0,
)


@pytest.fixture
def group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Group]:
    monkeypatch.setattr(trep, "OPTIONS", GROUP_OPTIONS)
    g = Group(tmp_path, seed=3)
    try:
        yield g
    finally:
        g.close()


def test_gced_segments_stay_gone_and_a_follower_past_them_needs_a_copy(group: Group) -> None:
    group.write(range(0, 5))
    group.converged()
    leader = group.leader()
    lagging = next(u for u in UUIDS if u != leader.uuid)
    others = tuple(u for u in UUIDS if u != lagging)
    group.crash(lagging)
    for i in range(30):
        group.write(range(100 + 10 * i, 110 + 10 * i), among=list(others))
    group.converged(others)
    segments = len(leader._log.segments())
    deleted = sum(group.net.replicas[u].flush_and_gc(flush=True) for u in others)
    assert deleted > 0 and leader.log_first_index > 1
    # The leader kept no more than the retention bound for the lagging follower.
    assert len(leader._log.segments()) <= max(2, segments - deleted)
    assert leader.peers_needing_copy() == [lagging]
    # Every healthy replica restarts from its flushed tablet and GCed log, and a
    # leader still replicates to the other.
    for u in others:
        group.crash(u)
    for u in others:
        reopened = group.reopen(u)
        assert reopened.log_first_index > 1
        assert reopened.bootstrap_stats["applied_index"] >= reopened.log_first_index - 1
    group.write(range(1000, 1010), among=list(others))
    rows = group.converged(others)
    group.check_acked(rows)
    # The lagging follower comes back: it answers with a log the leader no longer has.
    group.reopen(lagging)
    new_leader = group.leader(list(others))
    wait_for(
        lambda: new_leader.peers_needing_copy() == [lagging] or None,
        "the lagging follower to be reported as needing a copy",
    )


def test_a_follower_within_the_retained_log_catches_up_after_gc(group: Group) -> None:
    group.write(range(0, 5))
    group.converged()
    leader = group.leader()
    behind = next(u for u in UUIDS if u != leader.uuid)
    others = [u for u in UUIDS if u != behind]
    group.crash(behind)
    group.write(range(10, 12), among=others)
    group.write(range(12, 14), among=others)
    for u in others:
        group.net.replicas[u].flush_and_gc(flush=True)
    assert leader.peers_needing_copy() == []
    group.reopen(behind)
    rows = group.converged()
    group.check_acked(rows)


def test_a_copy_of_copy_source_opens_as_the_same_replica(solo: str, tmp_path: Path) -> None:
    """What ``copy_source`` lists, copied with the consensus log from its first index,
    opens as a replica holding the same rows (what a tablet copy will do over Flight)."""
    replica = _open(solo)
    _write(replica, range(1, 31))
    replica.flush_and_gc(flush=True)
    _write(replica, range(31, 36))  # in the tablet's WAL only
    dest = tmp_path / "copy"
    try:
        with replica.copy_source() as src:
            before = replica.log_first_index
            _write(replica, range(36, 38))  # writes go on
            # A flush waits for the end of the copy; nothing is GCed meanwhile.
            gc = threading.Thread(target=replica.flush_and_gc, kwargs={"flush": True})
            gc.start()
            assert replica.log_first_index == before == src.log_first_index > 1
            assert src.applied_index >= src.log_first_index - 1
            (dest / "tablet").mkdir(parents=True)
            for rel in src.tablet_files:
                target = dest / "tablet" / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(os.path.join(src.tablet_dir, rel), target)
            lg = replica._log
            first = src.log_first_index
            entries = lg.entries(first, lg.last_opid().index, 1 << 40)
            preceding = OpId(lg.term_at(first - 1) or 0, first - 1)
            write_copied_log(str(dest / "wal"), entries, preceding, segment_size=4096)
            for name in ("replica.meta", "cmeta", "replica.committed"):
                shutil.copyfile(os.path.join(solo, name), dest / name)
            assert gc.is_alive() and replica.log_first_index == before
        gc.join()
        _write(replica, range(38, 40))
    finally:
        replica.close()
    copy = _open(str(dest))
    try:
        last, rows = settled(copy, scaled(20))
        assert last == 37 and rows == model(37)
    finally:
        copy.close()


def test_a_replica_from_before_replica_committed_rebuilds_its_tablet_once(solo: str) -> None:
    replica = _open(solo)
    _write(replica, range(1, 11))
    replica.close()
    os.unlink(os.path.join(solo, "replica.committed"))  # as such a replica was
    replica = _open(solo)
    try:
        assert replica.bootstrap_stats["applied_index"] == 0  # rebuilt from the log
        last, rows = settled(replica, scaled(20))
        assert last == 10 and rows == model(10)
    finally:
        replica.close()
    replica = _open(solo)  # from now on its tablet is durable state
    try:
        assert replica.bootstrap_stats["applied_index"] > 10
    finally:
        replica.close()
