"""``MasterClient``: the thick client's calls to the master (Kudu's ``KuduClient`` to
master RPCs): DDL, table lookups, tablet locations and the tablet servers' list.

It is the ``LocationSource`` of the client's ``MetaCache``. DDL calls wait on the master
until the tablet servers have done their part (``ddl_done``), polling when the master's
own wait runs out, so a statement that returns has a table every server agrees on.

Several masters (a replicated catalog): the client holds one ``RpcClient`` per master and
sends each call to the leader it knows. A master that is not the leader answers
``NotTheLeader`` naming the leader it knows (the client goes there), and one that is
down or silent is passed over for the next; the call is tried again this way, with a
short backoff, until ``failover_timeout`` runs out, then fails saying that no leader
master answered. A DDL call whose answer was lost on the way (the master died with it)
is sent again to the new leader; a CREATE TABLE that then finds its table existing, or a
DROP TABLE that finds it gone, counts as done. With one master, a call goes to it alone,
as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from kudusql.cluster.errors import (
    ConnectionRefused,
    NotTheLeader,
    RpcTimedOut,
    ServiceUnavailable,
)
from kudusql.cluster.master.messages import (
    AlterTable,
    CreateTable,
    DdlResponse,
    DropTable,
    GetMetadataDocument,
    GetTable,
    GetTableLocations,
    ListTables,
    ListTablesResponse,
    ListTabletServers,
    ListTabletServersResponse,
    MetadataDocument,
    PutMetadataDocument,
    TableInfo,
    TableLocationsResponse,
    TabletLocationInfo,
    TabletServerInfo,
)
from kudusql.cluster.messages import Request, Response
from kudusql.cluster.rpc_client import RpcClient
from kudusql.common.errors import KuduAlreadyPresent, KuduNotFound, OperationalError

__all__ = ["MasterClient"]

R = TypeVar("R", bound=Response)

#: Seconds a DDL statement waits for the tablet servers to finish its part.
DDL_TIMEOUT = 60.0
#: Seconds the master holds one DDL call open waiting for it (then the client polls).
_MASTER_WAIT = 5.0
#: Seconds a call looks for the leader master (several masters) before it fails.
FAILOVER_TIMEOUT = 30.0
#: The pause between two rounds over the masters while none leads.
_FAILOVER_BACKOFF = 0.1


class MasterClient:
    """Calls to the master through ``rpc`` (an ``RpcClient`` of kind "master"), or to the
    leader of several masters (a sequence of them, one per master)."""

    def __init__(
        self,
        rpc: RpcClient | Sequence[RpcClient],
        *,
        ddl_timeout: float = DDL_TIMEOUT,
        failover_timeout: float = FAILOVER_TIMEOUT,
    ) -> None:
        self.rpcs = [rpc] if isinstance(rpc, RpcClient) else list(rpc)
        if not self.rpcs:
            raise OperationalError("a master client needs at least one master")
        #: The master calls go to first: the leader as last known.
        self.rpc = self.rpcs[0]
        self.ddl_timeout = ddl_timeout
        self.failover_timeout = failover_timeout
        #: Set by a call whose master failed without an answer (its outcome unknown).
        self._uncertain = False

    def close(self) -> None:
        for rpc in self.rpcs:
            rpc.close()

    @property
    def leader_address(self) -> str:
        """The master calls go to first (the leader, once one answered)."""
        return str(self.rpc.address)

    def _call(self, request: Request, kind: type[R]) -> R:
        self._uncertain = False
        if len(self.rpcs) == 1:
            response = self.rpc.call(request)
            assert isinstance(response, kind), response
            return response
        deadline = time.monotonic() + self.failover_timeout
        last: Exception | None = None
        tried = 0
        while True:
            rpc = self.rpc
            try:
                response = rpc.call(request)
                assert isinstance(response, kind), response
                return response
            except NotTheLeader as exc:
                last = exc
                self.rpc = self._by_address(exc.leader_address) or self._next(rpc)
            except (ServiceUnavailable, RpcTimedOut) as exc:
                last = exc
                if not isinstance(exc, ConnectionRefused):
                    self._uncertain = True
                self.rpc = self._next(rpc)
            tried += 1
            if time.monotonic() >= deadline:
                names = ",".join(str(r.address) for r in self.rpcs)
                raise OperationalError(
                    f"no leader master answered among {names} within "
                    f"{self.failover_timeout:g} s: a majority of the masters must be up "
                    f"(last error: {last})"
                ) from None
            if self.rpc is rpc or tried % len(self.rpcs) == 0:
                time.sleep(_FAILOVER_BACKOFF)

    def _by_address(self, address: str | None) -> RpcClient | None:
        for rpc in self.rpcs:
            if address is not None and str(rpc.address) == address:
                return rpc
        return None

    def _next(self, rpc: RpcClient) -> RpcClient:
        return self.rpcs[(self.rpcs.index(rpc) + 1) % len(self.rpcs)]

    # -- lookups --------------------------------------------------------------------------

    def locations(self, table_name: str) -> list[TabletLocationInfo]:
        """Every tablet of ``table_name`` and its server (the ``LocationSource`` call)."""
        return list(self._call(GetTableLocations(table_name), TableLocationsResponse).tablets)

    def table(self, name: str) -> TableInfo | None:
        """The master's record of table ``name``, or None when there is none."""
        try:
            return self._call(GetTable(name), TableInfo)
        except KuduNotFound:
            return None

    def table_names(self) -> list[str]:
        return list(self._call(ListTables(), ListTablesResponse).names)

    def document(self, name: str) -> str | None:
        """The clients' metadata document ``name`` kept in the catalog, or None."""
        return self._call(GetMetadataDocument(name), MetadataDocument).body

    def put_document(self, name: str, body: str) -> None:
        self._call(PutMetadataDocument(name, body), MetadataDocument)

    def tablet_servers(self) -> list[TabletServerInfo]:
        return list(self._call(ListTabletServers(), ListTabletServersResponse).servers)

    # -- DDL ------------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        schema: str,
        partitions: list[str],
        metadata: str,
        *,
        num_replicas: int | None = None,
    ) -> str:
        """Create the table; its id once every tablet runs. A master that has no live
        tablet server yet (just restarted) is asked again until the DDL timeout.
        ``num_replicas`` None: the cluster's default."""
        request = CreateTable(
            name,
            schema,
            partitions,
            metadata,
            wait_seconds=_MASTER_WAIT,
            num_replicas=num_replicas,
        )
        try:
            response = self._retrying(lambda: self._call(request, DdlResponse))
        except KuduAlreadyPresent:
            # Sent again after a master died with the answer: the first one created it.
            info = self.table(name) if self._uncertain else None
            if info is None:
                raise
            response = DdlResponse(info.table_id, info.ddl_done)
        self._wait_done(name, response)
        return response.table_id

    def alter_table(
        self,
        name: str,
        *,
        schema: str | None = None,
        new_name: str | None = None,
        metadata: str | None = None,
        add_partitions: list[str] | None = None,
        drop_tablets: list[str] | None = None,
    ) -> None:
        request = AlterTable(
            name,
            schema,
            new_name,
            metadata,
            wait_seconds=_MASTER_WAIT,
            add_partitions=add_partitions or [],
            drop_tablets=drop_tablets or [],
        )
        response = self._call(request, DdlResponse)
        self._wait_done(new_name or name, response)

    def drop_table(self, name: str) -> None:
        try:
            self._call(DropTable(name, wait_seconds=_MASTER_WAIT), DdlResponse)
        except KuduNotFound:
            if not self._uncertain:  # sent again after a lost answer: the first one did it
                raise

    def _retrying(self, call: Callable[[], R]) -> R:
        deadline = time.monotonic() + self.ddl_timeout
        while True:
            try:
                return call()
            except ServiceUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _wait_done(self, name: str, response: DdlResponse) -> None:
        if response.ddl_done:
            return
        deadline = time.monotonic() + self.ddl_timeout
        while time.monotonic() < deadline:
            info = self.table(name)
            if info is None or info.table_id != response.table_id:
                raise OperationalError(f"table {name!r} was dropped or replaced while it changed")
            if info.ddl_done:
                return
            time.sleep(0.05)
        raise OperationalError(
            f"table {name!r}: the tablet servers did not finish the change within "
            f"{self.ddl_timeout:g} s; it completes in the background (check SHOW TABLET "
            "SERVERS)"
        )
