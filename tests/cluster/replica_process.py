"""One ``TabletReplica`` in its own process, for tests that SIGKILL a replica.

The child (``python -m tests.cluster.replica_process DIR``) opens the replica at ``DIR``
and speaks length-prefixed pickles: on stdin ``("msg", message)``, ``("write", req, ids)``
and ``("status", req, with_rows)``; on stdout ``("send", message)`` (the replica's transport),
``("wrote", req, error or None)`` and ``("status", req, {...})``. ``ReplicaProcess`` is
the parent's handle; ``ProcessNetwork`` routes the children's messages to each other.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parents[2]
_LEN = struct.Struct("<I")


def _write_frame(out: BinaryIO, lock: threading.Lock, obj: Any) -> None:
    data = pickle.dumps(obj)
    with lock:
        out.write(_LEN.pack(len(data)) + data)
        out.flush()


def _read_frame(inp: BinaryIO) -> Any:
    head = inp.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    (n,) = _LEN.unpack(head)
    return pickle.loads(inp.read(n))


# -- the child ------------------------------------------------------------------------------


def _child(directory: str) -> None:
    import pyarrow as pa

    from kudusql.cluster.tserver.tablet_replica import ReplicaOptions, TabletReplica
    from kudusql.consensus.raft_consensus import RaftOptions

    options = ReplicaOptions(
        raft=RaftOptions(heartbeat_interval_ms=50, evict_failed_followers=False),
        tick_interval_s=0.01,
    )

    out = sys.stdout.buffer
    inp = sys.stdin.buffer
    lock = threading.Lock()
    outbox: queue.Queue[Any] = queue.Queue()

    def pump() -> None:
        while True:
            _write_frame(out, lock, outbox.get())

    threading.Thread(target=pump, daemon=True).start()
    replica = TabletReplica.open(
        directory, transport=lambda m: outbox.put(("send", m)), options=options
    )

    def write(req: int, ids: list[int]) -> None:
        data = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
        try:
            result = replica.write(data, "upsert", timeout_s=2.0)
            error = None if not result.errors else f"row errors {result.errors}"
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
        outbox.put(("wrote", req, error))

    while (cmd := _read_frame(inp)) is not None:
        if cmd[0] == "msg":
            replica.receive(cmd[1])
        elif cmd[0] == "write":
            threading.Thread(target=write, args=cmd[1:], daemon=True).start()
        elif cmd[0] == "status":
            status: dict[str, Any] = {
                "is_leader": replica.is_leader,
                "term": replica.term,
                "applied": replica.applied_index,
                "committed": replica.committed_index,
            }
            if cmd[2]:
                rows = replica.tablet.scan(ordered=True).read_all().to_pylist()
                status["rows"] = [(r["id"], r["name"]) for r in rows]
            outbox.put(("status", cmd[1], status))
    replica.close()


# -- the parent -----------------------------------------------------------------------------


class ReplicaProcess:
    """A child process hosting the replica at ``directory``."""

    def __init__(self, uuid: str, directory: Path, network: ProcessNetwork) -> None:
        self.uuid = uuid
        self.network = network
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._replies: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._next = 0
        self._gone = False
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.stderr = open(directory.parent / f"{uuid}.stderr", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.cluster.replica_process", str(directory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=ROOT,
            env=env,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while (frame := _read_frame(self.proc.stdout)) is not None:
            if frame[0] == "send":
                self.network.route(self.uuid, frame[1])
            else:
                with self._lock:
                    waiting = self._replies.pop(frame[1], None)
                if waiting is not None:
                    waiting[1].append(frame[2])
                    waiting[0].set()
        # The child is gone: nothing it was asked will be answered.
        with self._lock:
            self._gone = True
            waiting_all, self._replies = list(self._replies.values()), {}
        for event, _ in waiting_all:
            event.set()

    def send(self, cmd: tuple[Any, ...]) -> None:
        assert self.proc.stdin is not None
        # A child that is gone drops it, as the network to a dead server does.
        with contextlib.suppress(BrokenPipeError, ValueError):
            _write_frame(self.proc.stdin, self._write_lock, cmd)

    def call(self, kind: str, *args: Any, timeout_s: float = 10.0) -> Any:
        """A request's answer; TimeoutError if the child does not answer in time,
        ConnectionError if it is down."""
        event: threading.Event = threading.Event()
        box: list[Any] = []
        with self._lock:
            if self._gone:
                raise ConnectionError(f"{self.uuid} is down")
            self._next += 1
            req = self._next
            self._replies[req] = (event, box)
        self.send((kind, req, *args))
        if not event.wait(timeout_s):
            raise TimeoutError(f"{self.uuid} did not answer {kind}")
        if not box:
            raise ConnectionError(f"{self.uuid} went down before answering {kind}")
        return box[0]

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._close()

    def _close(self) -> None:
        self._reader.join()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.stderr.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._close()


class ProcessNetwork:
    """Routes each child's messages to the child named by ``dest_uuid``, if it is up."""

    def __init__(self) -> None:
        self.children: dict[str, ReplicaProcess] = {}

    def route(self, sender: str, message: Any) -> None:
        dest = self.children.get(message.dest_uuid)
        if dest is not None:
            dest.send(("msg", message))


if __name__ == "__main__":
    _child(sys.argv[1])
