"""The nemesis: faults injected into a running ``MiniCluster``, on a seeded schedule, logged.

What it owns: doing and undoing faults to the tablet servers of a cluster of real
processes, and the log of every fault (what, to whom, when it began and ended), which a
fault test reads to prove that faults happened and that operations completed on both
sides of each. It knows nothing of workloads or data.

Faults (each has an undo, and ``heal_all`` undoes whatever is still in effect):

- ``kill``: SIGKILL a tablet server (what survives is what a crash leaves); undone by
  restarting it on the same port, so clients' cached locations stay valid (a
  replicated cluster's peers, which dial fixed addresses, need that too).
- ``pause``: SIGSTOP a tablet server (it holds its sockets and answers nothing: calls
  time out, as with a long GC pause or a hung disk); undone by SIGCONT.
- ``isolate-from-master``: cut the path from a tablet server to the master (its
  heartbeats stop; the master calls it dead after its unresponsive timeout); undone by
  healing it. Needs ``MasterLinks``: the cluster must be built with
  ``tserver_master_address=links.route`` so each tablet server dials the master
  through its own ``NetProxy``.
- ``partition``: cut a tablet server off from every other tablet server, both ways
  (the minority side of a network partition: its replicas hear no leader and no
  follower, while clients and the master still reach it); undone by healing. Needs
  ``PeerLinks``: each tablet server dials its peers through a ``ProxyMesh``.
- ``kill-leader-master``: SIGKILL the leader of replicated masters (the server index
  is ignored; the record names the master); undone by restarting it on its port.

``schedule`` is pure: a seed, a duration and the fault kinds give the same list of
``PlannedFault`` every time, one fault at a time (the unreplicated cluster has no
majority to lose; on a replicated one, one server at a time is a minority of 3).
``NemesisThread`` plays a schedule against a ``Nemesis`` in real time.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kudusql.cluster.launcher import MiniCluster
from kudusql.cluster.routes import ROUTES_ENV
from tests.support.net_proxy import NetProxy, ProxyMesh

__all__ = [
    "FAULT_KINDS",
    "FaultRecord",
    "MasterLinks",
    "Nemesis",
    "NemesisThread",
    "PeerLinks",
    "PlannedFault",
    "schedule",
]

#: The fault kinds a schedule may draw.
FAULT_KINDS = ("kill", "pause", "isolate-from-master", "partition", "kill-leader-master")


class MasterLinks:
    """One loopback proxy per tablet server on its way to the master.

    Pass ``route`` as ``MiniCluster(tserver_master_address=...)``: tablet server ``i``
    is then started with the address of proxy ``i``, which forwards to the master.
    The proxy outlives restarts of either side (same port for the master).
    """

    def __init__(self) -> None:
        self._proxies: dict[int, NetProxy] = {}
        self._lock = threading.Lock()

    def route(self, index: int, master_address: str) -> str:
        host, port = master_address.rsplit(":", 1)
        with self._lock:
            proxy = self._proxies.get(index)
            if proxy is None:
                proxy = self._proxies[index] = NetProxy((host, int(port)), name=f"ts{index}-m")
            else:
                proxy.retarget((host, int(port)))
        return f"{proxy.address[0]}:{proxy.port}"

    def proxy(self, index: int) -> NetProxy:
        with self._lock:
            if index not in self._proxies:
                raise KeyError(f"tablet server {index} was not started through MasterLinks")
            return self._proxies[index]

    def close(self) -> None:
        with self._lock:
            proxies, self._proxies = list(self._proxies.values()), {}
        for p in proxies:
            p.close()


#: The route table's file name in each tablet server's directory.
ROUTES_FILE = "routes.json"


class PeerLinks:
    """A ``ProxyMesh`` among a cluster's tablet servers: server i dials server j through
    its own proxy (i, j), so a test cuts one pair or isolates one server.

    Set ``ROUTES_ENV`` to ``ROUTES_FILE`` in the environment the cluster's processes
    inherit (``environment()``) before starting it, then call ``install`` once every
    tablet server listens and before any replicated tablet exists: it writes each
    server's route table. Servers restarted on the same port keep their routes.
    """

    def __init__(self, cluster: MiniCluster) -> None:
        addresses = [d.address for d in cluster.tservers]
        targets = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in addresses]
        self.mesh = ProxyMesh(len(targets), targets)
        for i, daemon in enumerate(cluster.tservers):
            table = {
                addresses[j]: "{}:{}".format(*self.mesh.address(i, j))
                for j in range(len(addresses))
                if j != i
            }
            with open(os.path.join(daemon.directory, ROUTES_FILE), "w", encoding="utf-8") as f:
                json.dump(table, f)

    @staticmethod
    def environment() -> dict[str, str]:
        return {ROUTES_ENV: ROUTES_FILE}

    def isolate(self, i: int) -> None:
        for j in range(self.mesh.n):
            if j != i:
                self.mesh.partition(i, j)

    def heal(self, i: int) -> None:
        for j in range(self.mesh.n):
            if j != i:
                self.mesh.proxies[i, j].heal()
                self.mesh.proxies[j, i].heal()

    def close(self) -> None:
        self.mesh.close()


@dataclass(frozen=True)
class FaultRecord:
    """One fault as it happened: ``start_ns`` when it took effect, ``end_ns`` when its
    undo finished (None while it is in effect). Times are ``time.monotonic_ns``, the
    history's clock."""

    kind: str
    tserver: int
    address: str
    start_ns: int
    end_ns: int | None

    def describe(self, t0_ns: int = 0) -> str:
        end = "..." if self.end_ns is None else f"{(self.end_ns - t0_ns) / 1e9:.2f}s"
        who = f"master-{-1 - self.tserver}" if self.tserver < 0 else f"ts-{self.tserver}"
        return f"{self.kind} {who} ({self.address}) [{(self.start_ns - t0_ns) / 1e9:.2f}s, {end}]"


class Nemesis:
    """Does and undoes faults on ``cluster``'s tablet servers, logging each one.

    Invariant: at most one fault per tablet server is in effect, and ``log`` lists every
    fault in the order it was injected. Thread-safe (one lock around each action).
    """

    def __init__(
        self,
        cluster: MiniCluster,
        *,
        links: MasterLinks | None = None,
        peers: PeerLinks | None = None,
        targets: dict[str, Callable[[], int]] | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self.cluster = cluster
        self.links = links
        self.peers = peers
        #: Named targets a planned fault may aim at, resolved when it starts.
        self.targets: dict[str, Callable[[], int]] = dict(targets or {})
        self._clock = clock
        self._lock = threading.Lock()
        self._active: dict[int, int] = {}  # tablet server (-1 - i: master i) -> log index
        self.log: list[FaultRecord] = []

    def inject(self, kind: str, tserver: int) -> FaultRecord:
        """Start fault ``kind`` on tablet server ``tserver``."""
        with self._lock:
            if kind == "kill-leader-master":
                leader = self.cluster.leader_master()
                if leader is None:
                    raise RuntimeError("no leader master to kill")
                tserver = -1 - self.cluster.masters.index(leader)
            if tserver in self._active:
                raise RuntimeError(f"ts-{tserver} already has a fault in effect")
            daemon = (
                self.cluster.masters[-1 - tserver]
                if tserver < 0
                else self.cluster.tservers[tserver]
            )
            if kind in ("kill", "kill-leader-master"):
                self.cluster.kill(daemon)
            elif kind == "pause":
                self.cluster.pause(daemon)
            elif kind == "isolate-from-master":
                if self.links is None:
                    raise RuntimeError("isolate-from-master needs the cluster built on MasterLinks")
                self.links.proxy(tserver).cut()
            elif kind == "partition":
                if self.peers is None:
                    raise RuntimeError("partition needs the cluster's peers on PeerLinks")
                self.peers.isolate(tserver)
            else:
                raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULT_KINDS)}")
            record = FaultRecord(kind, tserver, daemon.address, self._clock(), None)
            self._active[tserver] = len(self.log)
            self.log.append(record)
            return record

    def undo(self, tserver: int) -> FaultRecord:
        """End the fault in effect on ``tserver``; return its finished record."""
        with self._lock:
            at = self._active.pop(tserver, None)
            if at is None:
                raise RuntimeError(f"ts-{tserver} has no fault in effect")
            record = self.log[at]
            if record.kind == "kill":
                self.cluster.restart_tserver(tserver, same_port=True)
            elif record.kind == "kill-leader-master":
                self.cluster.restart_master(index=-1 - tserver, wait=False)
            elif record.kind == "pause":
                self.cluster.resume(self.cluster.tservers[tserver])
            elif record.kind == "partition":
                assert self.peers is not None
                self.peers.heal(tserver)
            else:
                assert self.links is not None
                self.links.proxy(tserver).heal()
            done = FaultRecord(record.kind, tserver, record.address, record.start_ns, self._clock())
            self.log[at] = done
            return done

    def active(self) -> list[int]:
        with self._lock:
            return sorted(self._active)

    def heal_all(self) -> None:
        """Undo every fault still in effect (restart, resume, heal)."""
        for tserver in self.active():
            self.undo(tserver)

    def counts(self) -> dict[str, int]:
        """Faults injected, by kind."""
        out: dict[str, int] = {}
        for r in self.log:
            out[r.kind] = out.get(r.kind, 0) + 1
        return out


@dataclass(frozen=True)
class PlannedFault:
    """A fault of a schedule: start ``at_s`` seconds after the run starts, hold it
    ``hold_s`` seconds, then undo it."""

    at_s: float
    kind: str
    tserver: int
    hold_s: float
    #: A name the nemesis resolves to a tablet server when the fault starts (such as
    #: the current leader of a tablet: ``Nemesis.targets``); None: ``tserver``.
    target: str | None = None


def schedule(
    seed: int,
    *,
    duration_s: float,
    count: int,
    tservers: int,
    kinds: Sequence[str] = ("kill", "pause"),
    hold_s: float = 1.5,
    lead_s: float = 0.5,
) -> list[PlannedFault]:
    """``count`` faults in ``[lead_s, duration_s)``, one at a time, drawn from ``seed``.

    The span is cut into ``count`` equal slots; each fault starts at a random point of
    its slot that leaves ``hold_s`` (plus a quarter of it, for the undo) inside the slot,
    so faults never overlap and every fault has operations on both sides. Kinds cycle
    through ``kinds`` in a seeded order (each kind appears once ``count >= len(kinds)``).
    """
    if count < 1:
        return []
    for k in kinds:
        if k not in FAULT_KINDS:
            raise ValueError(f"unknown fault {k!r}; known: {', '.join(FAULT_KINDS)}")
    slot = (duration_s - lead_s) / count
    if slot < hold_s * 1.25:
        raise ValueError(
            f"{count} faults of {hold_s}s do not fit in {duration_s - lead_s:.1f}s; "
            "fewer faults or a longer run"
        )
    rng = random.Random(seed)
    order = list(kinds)
    rng.shuffle(order)
    plan = []
    for i in range(count):
        start = lead_s + i * slot + rng.uniform(0, slot - hold_s * 1.25)
        plan.append(
            PlannedFault(round(start, 3), order[i % len(order)], rng.randrange(tservers), hold_s)
        )
    return plan


class NemesisThread(threading.Thread):
    """Plays ``plan`` against ``nemesis`` in real time from ``start()``; ``stop()``
    cuts the plan short and heals everything. An exception in a fault is kept in
    ``error`` (and re-raised by ``stop``)."""

    def __init__(self, nemesis: Nemesis, plan: Sequence[PlannedFault]) -> None:
        super().__init__(name="nemesis", daemon=True)
        self.nemesis = nemesis
        self.plan = list(plan)
        self._stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        t0 = time.monotonic()
        try:
            for fault in self.plan:
                if self._stop_event.wait(max(0.0, t0 + fault.at_s - time.monotonic())):
                    return
                tserver = fault.tserver
                if fault.target is not None:
                    tserver = self.nemesis.targets[fault.target]()
                record = self.nemesis.inject(fault.kind, tserver)
                self._stop_event.wait(fault.hold_s)
                self.nemesis.undo(record.tserver)
        except BaseException as exc:  # kept for stop() to raise in the test's thread
            self.error = exc

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.nemesis.heal_all()
        if self.error is not None:
            raise self.error
