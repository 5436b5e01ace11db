"""Flushes and compactions in a worker process (compaction_worker.py): flushes, delta
flushes, merges and delta compactions with the same result as in the maintenance
thread, errors that come back with their class and leave the tablet as it was, a dead
child that fails one job and is replaced, a child that dies with its parent, and the
maintenance manager using it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kudusql.common.errors import CorruptionError, OperationalError
from kudusql.storage.tablet import compaction_worker
from kudusql.storage.tablet.compaction_worker import CompactionWorker
from kudusql.storage.tablet.maintenance import MaintenanceManager
from kudusql.storage.tablet.tablet import Tablet
from tests.storage.tablet.test_compaction import KV, OPTS, Clock, drs_ids, kv, make
from tests.support.tablets import rows
from tests.support.timing import WAIT, scaled

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _history_tablet(tmp_path: Any) -> tuple[Tablet, list[int]]:
    """Four overlapping rowsets with updates, deletes, ghosts and re-inserts; returns
    the tablet and a timestamp after each step (for time travel)."""
    t = make(tmp_path, Clock(), rowset_target_bytes=2048)
    stamps = []
    for k in range(4):
        t.insert(kv(list(range(k, 400, 4)), list(range(100)), [f"s{k}"] * 100))
        t.flush()
        stamps.append(t.latest_timestamp())
    t.update(kv(list(range(0, 400, 7)), [7] * 58))
    t.flush_deltas()
    stamps.append(t.latest_timestamp())
    t.delete(kv(list(range(1, 400, 8))))
    t.flush_deltas()
    t.insert(kv(list(range(1, 400, 16)), [99] * 25))  # re-inserted: ghosts in the rowsets
    t.flush()
    t.update(kv(list(range(2, 400, 9)), [9] * 45))  # still in the DeltaMemStores
    stamps.append(t.latest_timestamp())
    return t, stamps


def _picture(t: Tablet, stamps: list[int]) -> list[Any]:
    return [rows(t), *(rows(t, snapshot=s) for s in stamps)]


def _in_thread_and_in_worker(tmp_path: Any, stamps: list[int], act: Any) -> list[Any]:
    """``act(tablet, worker)`` on two copies of the tablet at ``tmp_path/"a"``: in this
    thread (worker None), then in a worker process. Each run must keep the picture
    (now and every snapshot), also after a reopen; returns what each ``act`` returned."""
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    out = []
    w = CompactionWorker()
    try:
        for name, worker in (("a", None), ("b", w)):
            t = Tablet.open(str(tmp_path / name / "t"), OPTS)
            before = _picture(t, stamps)
            out.append(act(t, worker))
            assert _picture(t, stamps) == before
            t.close()
            t = Tablet.open(str(tmp_path / name / "t"), OPTS)
            assert _picture(t, stamps) == before
            t.close()
        assert w.pid is not None  # the child stays for the next job
    finally:
        w.close()
    return out


def test_a_merge_in_the_worker_equals_one_in_the_thread(tmp_path: Any) -> None:
    t, stamps = _history_tablet(tmp_path / "a")
    t.close()

    def merge(t: Tablet, worker: CompactionWorker | None) -> Any:
        assert t.compact(drs_ids(t), worker=worker) >= 4
        return [(r["rows"], r["min_key"], r["max_key"]) for r in t.rowsets_info()[1:]]

    in_thread, in_worker = _in_thread_and_in_worker(tmp_path, stamps, merge)
    assert in_thread == in_worker


@pytest.mark.parametrize("kind", ["minor", "major"])
def test_a_delta_compaction_in_the_worker_equals_one_in_the_thread(
    tmp_path: Any, kind: str
) -> None:
    t, stamps = _history_tablet(tmp_path / "a")
    for _ in range(2):  # REDO files to compact in every rowset
        t.update(kv(list(range(0, 400, 5)), [5] * 80))
        t.flush_deltas()
    t.close()

    def compact(t: Tablet, worker: CompactionWorker | None) -> Any:
        for rid in drs_ids(t):
            if kind == "minor":
                assert t.minor_delta_compaction(rid, worker=worker)
            else:
                assert t.major_delta_compaction(rid, worker=worker)
        info = t.rowsets_info()[1:]
        assert all(r["redo_files"] <= 1 for r in info)
        return [(r["rows"], r["redo_files"], r["undo_files"]) for r in info]

    in_thread, in_worker = _in_thread_and_in_worker(tmp_path, stamps, compact)
    assert in_thread == in_worker


def test_flushes_in_the_worker_equal_flushes_in_the_thread(tmp_path: Any) -> None:
    t, stamps = _history_tablet(tmp_path / "a")
    t.insert(kv(list(range(1000, 1400, 3)), list(range(134)), ["new"] * 134))  # MemRowSet
    t.update(kv(list(range(1000, 1400, 9)), [3] * 45))  # mutations of MemRowSet rows
    t.delete(kv(list(range(0, 400, 11))))  # DeltaMemStores of every rowset
    stamps.append(t.latest_timestamp())
    t.close()  # reopened below: the WAL replays the memory stores

    def flush(t: Tablet, worker: CompactionWorker | None) -> Any:
        assert t.flush(worker=worker) >= 1
        assert t.flush_deltas(worker=worker) >= 4
        assert t.stats()["memrowset_rows"] == 0 and t.stats()["deltamemstore_events"] == 0
        return [(r["rows"], r["redo_files"], r["undo_files"]) for r in t.rowsets_info()[1:]]

    in_thread, in_worker = _in_thread_and_in_worker(tmp_path, stamps, flush)
    assert in_thread == in_worker


def test_an_error_in_the_worker_comes_back_and_changes_nothing(tmp_path: Any) -> None:
    t, _ = _history_tablet(tmp_path)
    ids = drs_ids(t)
    drs = t._rowsets.drs[1]
    victim = os.path.join(drs.dir, drs.meta.column_file(t.schema.columns[1].id))
    with open(victim, "r+b") as f:  # flip a byte inside the first page of a column
        f.seek(20)
        b = f.read(1)
        f.seek(20)
        f.write(bytes([b[0] ^ 0xFF]))
    listing = sorted(os.listdir(os.path.join(t.path, "rowsets")))
    w = CompactionWorker()
    try:
        with pytest.raises(CorruptionError) as e:
            t.compact(ids, worker=w)
        assert victim in str(e.value) and e.value.path == victim
        assert drs_ids(t) == ids
        assert sorted(m.id for m in t.meta.rowsets) == sorted(ids)
        t.close()
        # Nothing new is named; what the failed job wrote is gone after a reopen.
        t = Tablet.open(t.path, OPTS)
        assert drs_ids(t) == ids
        assert sorted(os.listdir(os.path.join(t.path, "rowsets"))) == listing
    finally:
        w.close()
        t.close()


def test_a_worker_dying_mid_job_fails_it_and_the_next_starts_a_new_one(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    t, stamps = _history_tablet(tmp_path)
    before = _picture(t, stamps)
    ids = drs_ids(t)
    w = CompactionWorker()
    sent = compaction_worker._send
    killed: list[int] = []

    def send_then_kill(f: Any, obj: Any) -> None:
        sent(f, obj)
        if not killed and w.pid is not None:  # the first job: its child dies at once
            killed.append(w.pid)
            os.kill(w.pid, signal.SIGKILL)

    monkeypatch.setattr(compaction_worker, "_send", send_then_kill)
    try:
        with pytest.raises(OperationalError, match="compaction worker process died"):
            t.compact(ids, worker=w)
        assert killed and drs_ids(t) == ids and _picture(t, stamps) == before
        assert t.compact(ids, worker=w) == len(ids)
        assert w.pid not in (None, killed[0])
        assert _picture(t, stamps) == before
    finally:
        w.close()
        t.close()


def test_a_worker_dead_between_jobs_is_replaced_quietly(tmp_path: Any) -> None:
    t, stamps = _history_tablet(tmp_path)
    before = _picture(t, stamps)
    w = CompactionWorker()
    try:
        w._start()
        first = w.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        _wait_until_gone(first)
        assert t.compact(drs_ids(t), worker=w) >= 4
        assert w.pid not in (None, first) and _picture(t, stamps) == before
    finally:
        w.close()
        t.close()


def _environ_after_exec(w: CompactionWorker) -> dict[str, str]:
    """The worker child's environment from ``/proc``. Popen returns once exec has closed
    the child's close-on-exec pipe, which the kernel does before it lays out the new
    command line and environment (together): read too soon, the files are empty or
    still the parent's. The command line naming the worker's module tells they are
    there."""
    deadline = time.monotonic() + WAIT
    while b"compaction_worker" not in _proc_file(w, "cmdline"):
        if time.monotonic() > deadline:
            raise AssertionError(f"the worker child never showed its command line: {w.pid}")
        time.sleep(0.01)
    raw = _proc_file(w, "environ")
    return dict(item.decode().split("=", 1) for item in raw.split(b"\0") if b"=" in item)


def _proc_file(w: CompactionWorker, name: str) -> bytes:
    with open(f"/proc/{w.pid}/{name}", "rb") as f:
        return f.read()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_child_keeps_freed_memory_unless_the_parent_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's allocators keep memory between jobs (``child_allocator_env``); a
    setting in the parent's environment wins."""
    from kudusql.storage.tablet import compaction_worker as cw

    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "0")
    w = CompactionWorker()
    try:
        w._start()
        env = _environ_after_exec(w)
    finally:
        w.close()
    assert env["MIMALLOC_PURGE_DELAY"] == "0"
    glibc = {k: env.get(k) for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")}
    if cw._glibc_at_least(2, 35):
        assert glibc == {
            "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
            "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
        }
    else:  # a trim threshold alone would freeze the mmap threshold low
        assert glibc == {"MALLOC_MMAP_THRESHOLD_": None, "MALLOC_TRIM_THRESHOLD_": None}


def test_glibc_versions_are_compared_as_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    from kudusql.storage.tablet import compaction_worker as cw

    for text, expected in (
        ("glibc 2.35", True),
        ("glibc 2.100", True),
        ("glibc 3.0", True),
        ("glibc 2.9", False),
        ("glibc 2.34", False),
        ("musl 1.2", False),
        ("", False),
    ):
        monkeypatch.setattr(cw.os, "confstr", lambda _name, t=text: t)
        assert cw._glibc_at_least(2, 35) is expected, text
    monkeypatch.setattr(cw.os, "confstr", lambda _name: "glibc 2.30")
    assert "MALLOC_TRIM_THRESHOLD_" not in cw.child_allocator_env()
    assert cw.child_allocator_env()["MIMALLOC_PURGE_DELAY"] == "10000"


PARENT = """
import sys, time
from kudusql.storage.tablet import compaction_worker
from kudusql.storage.tablet.compaction_worker import CompactionWorker
w = CompactionWorker()
w._start()
print(w.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(line for line in f if line.startswith("State:"))
    except (FileNotFoundError, ProcessLookupError):
        return True
    return "Z" in state.split()[1]  # a zombie nobody reaps has exited too


def _wait_until_gone(pid: int, what: str = "the process outlived its SIGKILL") -> None:
    deadline = time.monotonic() + WAIT
    while not _gone(pid):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_worker_dies_with_its_parent() -> None:
    """A SIGKILLed writer must not leave a merge writing into its tablet."""
    p = subprocess.Popen(
        [sys.executable, "-c", PARENT], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None
        child = int(p.stdout.readline())
        assert not _gone(child)
        p.send_signal(signal.SIGKILL)
        p.wait(WAIT)
        _wait_until_gone(child, "the merge worker outlived its parent")
    finally:
        p.kill()
        p.wait()
        if p.stdout is not None:
            p.stdout.close()


def test_background_merges_run_in_the_worker(tmp_path: Any) -> None:
    t, stamps = _history_tablet(tmp_path)
    before = _picture(t, stamps)
    mm = MaintenanceManager(poll_interval_s=0.02)
    try:
        t.attach(mm)
        deadline = time.monotonic() + scaled(30)
        while "merge_compaction" not in {r.op for r in mm.history()}:
            assert time.monotonic() < deadline, f"no merge ran: {mm.errors}"
            t.insert(kv([10_000 + int(time.monotonic() * 1000) % 100_000], [1]))
            time.sleep(0.05)
        worker = mm.compaction_worker()
        assert worker is not None and worker.pid is not None
    finally:
        mm.stop()
    assert worker.pid is None  # stopping the manager stops its worker
    assert not mm.errors
    now = rows(t)
    assert [r for r in now if r["key"] < 10_000] == before[0]
    assert [rows(t, snapshot=s) for s in stamps] == before[1:]
    t.close()


def test_a_manager_can_keep_merges_in_its_thread() -> None:
    mm = MaintenanceManager(enabled=False, worker_process=False)
    assert mm.compaction_worker() is None


def test_a_worker_whose_parent_stopped_reading_exits_quietly() -> None:
    """The parent SIGKILLed while a job ran: the reply meets a closed pipe before the
    death signal arrives. The child leaves without a traceback on the stderr it shares
    with the (dead) writer (a crash test found one there)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "kudusql.storage.tablet.compaction_worker", str(os.getpid())],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdin is not None and p.stdout is not None and p.stderr is not None
    try:
        p.stdout.close()  # nobody reads the reply
        job = compaction_worker.DeltaFilesJob([], KV, False)
        compaction_worker._send(p.stdin, job)
        assert p.wait(scaled(30)) == 0
        assert p.stderr.read() == b""
    finally:
        p.kill()
        p.wait()
        p.stdin.close()
        p.stderr.close()


def test_messages_cross_the_pipe_with_their_arrays_out_of_band() -> None:
    """The pipe protocol carries contiguous arrays out of band (not copied into the
    pickle) and everything else in band: what arrives equals what was sent, a strided
    view and a sliced Arrow array included; a stream cut anywhere reads as its end."""
    import io
    import pickle

    from kudusql.storage.tablet.delta import ColumnDelta, Deltas

    big = np.arange(1_000_000, dtype=np.int64)
    strided = big[::3]  # not contiguous: pickled in band
    words = pa.array([f"w{i}" for i in range(5_000)]).slice(100, 2_000)
    d = Deltas(
        big[:10],
        big[:10].astype(np.uint64),
        big[:10],
        np.zeros(10, np.uint8),
        {3: ColumnDelta(np.arange(4), pa.array([1.5, None, 2.5, 3.5]))},
    )
    msg = ("ok", {"big": big, "strided": strided, "words": words, "d": d, "n": 7})
    sink = io.BytesIO()
    compaction_worker._send(sink, msg)
    raw = sink.getvalue()
    assert len(raw) < len(pickle.dumps(msg, protocol=5)) + 1024  # nothing sent twice
    (pickled_len, count) = compaction_worker._HEAD.unpack_from(raw)
    assert count >= 2 and pickled_len < strided.nbytes + 64 * 1024  # big went out of band
    kind, got = compaction_worker._receive(io.BufferedReader(io.BytesIO(raw)))
    assert kind == "ok" and got["n"] == 7
    assert np.array_equal(got["big"], big) and np.array_equal(got["strided"], strided)
    assert got["words"].equals(words)
    assert np.array_equal(got["d"].rowid, d.rowid)
    assert got["d"].cols[3].values.equals(d.cols[3].values)
    got["big"][0] = -1  # arrives writable, in its own memory
    assert big[0] == 0
    for cut in (0, 5, compaction_worker._HEAD.size + 3, len(raw) // 2, len(raw) - 1):
        assert compaction_worker._receive(io.BufferedReader(io.BytesIO(raw[:cut]))) is None


@pytest.mark.parametrize("in_worker", [False, True])
def test_new_rowsets_come_with_their_sorted_keys_cached(tmp_path: Any, in_worker: bool) -> None:
    """A flush's and a merge's new rowsets have their key files' sorted arrays in the
    block cache, as the job had them, equal to what decoding the files builds: the
    writer's first lookups in them do not decode the files just written."""
    from kudusql.storage.cfile import key_array

    worker = CompactionWorker() if in_worker else None
    t = make(tmp_path)
    try:
        for k in range(3):  # overlapping rowsets
            t.insert(kv(list(range(k, 3000, 3)), list(range(1000))))
            t.flush(worker=worker)
        assert t.compact(drs_ids(t), worker=worker) == 3
        t.insert(kv(list(range(5000, 5400)), list(range(400))))
        t.flush(worker=worker)
        rowsets = t._rowsets.drs
        assert len(rowsets) >= 2
        for d in rowsets:
            reader = d.key_reader()
            cached = t.cache.get((reader.uid, key_array.WHOLE_FILE_ENTRY))
            assert cached is not None, d.id
            got, width = key_array.from_arrow(cached)
            built = key_array.build(reader.read_all().chunks)
            assert built is not None and width == built[1] == 8
            assert np.array_equal(got, built[0])
        got_keys = sorted(r["key"] for r in t.scan(["key"]).read_all().to_pylist())
        assert got_keys == [*range(3000), *range(5000, 5400)]
    finally:
        t.close()
        if worker is not None:
            worker.close()
