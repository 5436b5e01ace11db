"""Raft under real faults: three replicated masters and five tablet servers as real
processes, every table replicated three ways, every operation checked.

The tablet servers dial each other through a ``ProxyMesh`` (``PeerLinks``: each pair
has its own loopback proxy, so one server can be cut off from its peers while clients
and the masters still reach it). The register and bank workloads of
``test_histories`` run while the nemesis kills -9 a tablet server hosting the bank's
tablet (then restarts it on its port), cuts one off from every peer (the minority side
of a partition: its replicas elect nobody and a deposed leader must not answer), pauses
one for longer than the election timeout (SIGSTOP, then SIGCONT: the old leader must
not commit or serve anything after it is deposed), and kills the leader master. The
checks are ``test_histories.run_histories``': a linearizable register history, bank
snapshots that always sum to the total, no acknowledged write lost, and operations
acknowledged before, during and after every fault.

The slow variant plays twenty seeded faults of every kind over two minutes.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest

from kudusql.cluster.launcher import MiniCluster
from kudusql.cluster.routes import ROUTES_ENV
from tests.cluster.mini_cluster import MASTER_FLAGS, TSERVER_FLAGS, eventually
from tests.cluster.test_histories import Cluster, run_histories
from tests.support.nemesis import ROUTES_FILE, Nemesis, PeerLinks, PlannedFault, schedule
from tests.support.timing import scaled

#: 100 ms Raft heartbeats: a leader is suspected after 300 ms (and leases last 200 ms).
RAFT = ["--raft-heartbeat-ms", "100"]
TSERVERS = 5


@pytest.fixture(scope="module")
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("raft-histories")
    cluster = MiniCluster(
        root,
        master_flags=[*MASTER_FLAGS, *RAFT],
        tserver_flags=[*TSERVER_FLAGS, *RAFT],
        start_timeout=scaled(60),
        masters=3,
    )
    before = os.environ.get(ROUTES_ENV)
    os.environ[ROUTES_ENV] = ROUTES_FILE
    links: PeerLinks | None = None
    try:
        cluster.start(TSERVERS)
        # Before any replicated tablet exists: every peer call goes through the mesh.
        links = PeerLinks(cluster)
        yield Cluster(cluster, Nemesis(cluster, peers=links))
    finally:
        cluster.stop()
        if links is not None:
            links.close()
        if before is None:
            os.environ.pop(ROUTES_ENV, None)
        else:
            os.environ[ROUTES_ENV] = before
    logs = [*root.glob("master-*/master.log"), *root.glob("ts-*/tserver.log")]
    assert len(logs) == TSERVERS + 3
    for log in logs:
        assert "Traceback" not in log.read_text(), f"{log} has a traceback"


def replicas_of(env: Cluster, table: str) -> list[tuple[int, str]]:
    """(tablet server index, role) of every replica of ``table``'s tablets."""
    import kudusql

    with kudusql.connect(env.cluster.url, timeout=10) as conn:
        rows = conn.execute(
            "SELECT address, role FROM sys.tablet_replicas WHERE table_name = ?", [table]
        ).fetchall()
    index = {d.address: i for i, d in enumerate(env.cluster.tservers)}
    return [(index[address], role) for address, role in rows]


def test_replicated_histories_under_kills_partitions_pauses_and_a_master_kill(
    replicated: Cluster,
) -> None:
    """Four faults in about 9 s: the server leading most register tablets cut off from
    its peers (clients still reach it: a deposed leader must not answer them); the
    bank's leader then (as the master sees it when the fault starts) paused past the
    election timeout (SIGSTOP, then SIGCONT: deposed meanwhile, it must not commit or
    answer); the bank's leader then killed; the leader master killed."""

    def plan() -> list[PlannedFault]:
        reg = eventually(lambda: replicas_of(replicated, "reg") or None, "register replicas")
        bank = eventually(lambda: replicas_of(replicated, "bank") or None, "bank replicas")
        assert len(bank) == 3 and len(reg) == 9
        leads = Counter(i for i, role in reg if role == "LEADER")
        reg_leader = leads.most_common(1)[0][0]
        bank_leader = next(i for i, role in bank if role == "LEADER")
        replicated.nemesis.targets["bank-leader"] = lambda: next(
            i for i, role in replicas_of(replicated, "bank") if role == "LEADER"
        )
        return [
            PlannedFault(0.6, "partition", reg_leader, 1.5),
            PlannedFault(2.6, "pause", bank_leader, 1.2, target="bank-leader"),
            PlannedFault(4.6, "kill", bank_leader, 1.0, target="bank-leader"),
            PlannedFault(6.6, "kill-leader-master", 0, 1.0),
        ]

    run_histories(replicated, plan, duration_s=9.0, seed=3)


@pytest.mark.slow
def test_replicated_histories_for_two_minutes_under_every_fault(replicated: Cluster) -> None:
    plan = schedule(
        17,
        duration_s=120,
        count=20,
        tservers=TSERVERS,
        kinds=("kill", "pause", "partition", "kill-leader-master"),
        hold_s=2.0,
    )
    run_histories(replicated, plan, duration_s=120.0, seed=17)
