"""The cluster's consistency check (Kudu's ``ksck``): ``ksck(master_address)`` asks the
master for every table, its replication factor and its tablets' replicas, asks every
tablet server for its tablet report (each replica's Raft role, term and committed
config), and says of each tablet whether it is healthy.

A tablet is, worst first:

- UNAVAILABLE: no replica reports itself leader, or fewer than a majority of its
  committed config's voters answer (writes cannot commit);
- UNDER-REPLICATED: fewer voters answer than the table's replication factor (the master
  re-replicates it);
- LEADER-MISMATCH: the master's leader is not the one the replicas report, or the
  replicas' reported configs differ;
- HEALTHY otherwise.

A replica "answers" when its server is live at the master, answers the report call, and
reports the tablet as a voter (LEADER or FOLLOWER). ``KsckReport.healthy`` is true when
every tablet is HEALTHY and every live server answered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kudusql.cluster.heartbeat_messages import ReportedTabletInfo
from kudusql.cluster.master.messages import (
    GetTable,
    GetTableLocations,
    ListTables,
    ListTablesResponse,
    ListTabletServers,
    ListTabletServersResponse,
    TableInfo,
    TableLocationsResponse,
    TabletLocationInfo,
)
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.security import read_secret_file
from kudusql.cluster.tserver.messages import GetTabletReport, TabletReportResponse
from kudusql.common.errors import Error

__all__ = ["HEALTHY", "KsckReport", "ReplicaHealth", "TabletHealth", "ksck"]

HEALTHY = "HEALTHY"
UNDER_REPLICATED = "UNDER-REPLICATED"
UNAVAILABLE = "UNAVAILABLE"
LEADER_MISMATCH = "LEADER-MISMATCH"
_VOTER_ROLES = ("LEADER", "FOLLOWER")


@dataclass(frozen=True)
class ReplicaHealth:
    """One replica as ksck sees it: ``role``/``term`` as its server reports them
    (None when it did not), and ``health`` (RUNNING, or why not)."""

    tserver_uuid: str
    address: str
    role: str | None
    term: int | None
    health: str


@dataclass(frozen=True)
class TabletHealth:
    table: str
    tablet_id: str
    num_replicas: int
    status: str
    replicas: tuple[ReplicaHealth, ...]
    detail: str = ""


@dataclass
class KsckReport:
    tablets: list[TabletHealth] = field(default_factory=list)
    #: Problems outside any tablet (an unreachable server, a table not running).
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems and all(t.status == HEALTHY for t in self.tablets)

    @property
    def text(self) -> str:
        lines = []
        for t in self.tablets:
            extra = f" ({t.detail})" if t.detail else ""
            lines.append(
                f"table {t.table} tablet {t.tablet_id} RF {t.num_replicas}: {t.status}{extra}"
            )
            for r in t.replicas:
                role = r.role or "-"
                term = "-" if r.term is None else str(r.term)
                lines.append(
                    f"  {r.tserver_uuid} {r.address:<21} {role:<15} term {term:<4} {r.health}"
                )
        lines += [f"problem: {p}" for p in self.problems]
        bad = sum(1 for t in self.tablets if t.status != HEALTHY)
        verdict = "OK" if self.healthy else "UNHEALTHY"
        lines.append(
            f"{verdict}: {len(self.tablets)} tablets, {bad} not healthy,"
            f" {len(self.problems)} other problems"
        )
        return "\n".join(lines)


def ksck(
    master_address: str,
    *,
    secret: str | None = None,
    secret_file: str | None = None,
    tls_root: str | None = None,
    timeout: float = 5.0,
) -> KsckReport:
    """Check the cluster whose master listens at ``master_address``."""
    if secret is None and secret_file is not None:
        secret = read_secret_file(secret_file)

    def client(address: str, kind: str) -> RpcClient:
        return RpcClient(
            address,
            secret=secret,
            tls_root=tls_root,
            server_kind=kind,
            timeout=timeout,
            retry=RetryPolicy(max_attempts=2, deadline=timeout),
        )

    report = KsckReport()
    with client(master_address, "master") as master:
        servers = master.call(ListTabletServers())
        assert isinstance(servers, ListTabletServersResponse)
        names = master.call(ListTables())
        assert isinstance(names, ListTablesResponse)
        tables: list[tuple[TableInfo, TableLocationsResponse | None]] = []
        for name in names.names:
            info = master.call(GetTable(name))
            assert isinstance(info, TableInfo)
            try:
                located = master.call(GetTableLocations(name))
                assert isinstance(located, TableLocationsResponse)
            except Error as exc:
                report.problems.append(f"table {name}: {exc}")
                located = None
            tables.append((info, located))
    live = {s.uuid for s in servers.servers if s.live}
    reported: dict[str, dict[str, ReportedTabletInfo]] = {}
    for s in servers.servers:
        if not s.live:
            continue
        try:
            with client(s.address, "tablet server") as ts:
                answer = ts.call(GetTabletReport())
            assert isinstance(answer, TabletReportResponse)
            reported[s.uuid] = {t.tablet_id: t for t in answer.updated_tablets}
        except Error as exc:
            report.problems.append(f"tablet server {s.uuid} ({s.address}) did not answer: {exc}")
    for info, located in tables:
        if located is None:
            continue
        for loc in located.tablets:
            report.tablets.append(_check(info, loc, live, reported))
    return report


def _check(
    info: TableInfo,
    loc: TabletLocationInfo,
    live: set[str],
    reported: dict[str, dict[str, ReportedTabletInfo]],
) -> TabletHealth:
    tablet_id = loc.tablet_id
    replicas = []
    seen: dict[str, ReportedTabletInfo] = {}
    for r in loc.replicas or []:
        mine = reported.get(r.tserver_uuid, {}).get(tablet_id)
        if r.tserver_uuid not in live:
            health = "SERVER DOWN"
        elif r.tserver_uuid not in reported:
            health = "SERVER UNREACHABLE"
        elif mine is None:
            health = "NOT HOSTED (no data: copying or tombstoned)"
        else:
            health = "RUNNING"
            seen[r.tserver_uuid] = mine
        replicas.append(
            ReplicaHealth(
                r.tserver_uuid,
                r.address,
                None if mine is None else (mine.role or "LEADER"),
                None if mine is None else mine.term,
                health,
            )
        )
    if not any(m.role for m in seen.values()):
        # An unreplicated tablet: healthy when its one server hosts it.
        status = HEALTHY if seen else UNAVAILABLE
        return TabletHealth(info.name, tablet_id, info.num_replicas, status, tuple(replicas))
    leaders = [(m.term or 0, u) for u, m in seen.items() if m.role == "LEADER"]
    leader = max(leaders)[1] if leaders else None
    lead_info = seen.get(leader) if leader is not None else None
    voters = (
        list(lead_info.voters)
        if lead_info is not None and lead_info.voters
        else [r.tserver_uuid for r in loc.replicas or []]
    )
    answering = [u for u in voters if u in seen and seen[u].role in _VOTER_ROLES]
    configs = {m.config_index for m in seen.values() if m.config_index is not None}
    if leader is None or len(answering) < len(voters) // 2 + 1:
        status = UNAVAILABLE
        detail = "no leader" if leader is None else f"{len(answering)} of {len(voters)} voters"
    elif len(answering) < info.num_replicas:
        status = UNDER_REPLICATED
        detail = f"{len(answering)} live voters of {info.num_replicas}"
    elif leader != loc.tserver_uuid or len(configs) > 1:
        status = LEADER_MISMATCH
        detail = (
            f"the master's leader is {loc.tserver_uuid}, the replicas report {leader}"
            if leader != loc.tserver_uuid
            else f"replicas report configs {sorted(configs)}"
        )
    else:
        status, detail = HEALTHY, ""
    return TabletHealth(info.name, tablet_id, info.num_replicas, status, tuple(replicas), detail)
