"""``MasterClient``: the thick client's calls to the master (Kudu's ``KuduClient`` to
master RPCs): DDL, table lookups, tablet locations and the tablet servers' list.

It is the ``LocationSource`` of the client's ``MetaCache``. DDL calls wait on the master
until the tablet servers have done their part (``ddl_done``), polling when the master's
own wait runs out, so a statement that returns has a table every server agrees on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from kudusql.cluster.errors import ServiceUnavailable
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
from kudusql.common.errors import KuduNotFound, OperationalError

__all__ = ["MasterClient"]

R = TypeVar("R", bound=Response)

#: Seconds a DDL statement waits for the tablet servers to finish its part.
DDL_TIMEOUT = 60.0
#: Seconds the master holds one DDL call open waiting for it (then the client polls).
_MASTER_WAIT = 5.0


class MasterClient:
    """Calls to one master through ``rpc`` (an ``RpcClient`` of kind "master")."""

    def __init__(self, rpc: RpcClient, *, ddl_timeout: float = DDL_TIMEOUT) -> None:
        self.rpc = rpc
        self.ddl_timeout = ddl_timeout

    def close(self) -> None:
        self.rpc.close()

    def _call(self, request: Request, kind: type[R]) -> R:
        response = self.rpc.call(request)
        assert isinstance(response, kind), response
        return response

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
        response = self._retrying(
            lambda: self._call(
                CreateTable(
                    name,
                    schema,
                    partitions,
                    metadata,
                    wait_seconds=_MASTER_WAIT,
                    num_replicas=num_replicas,
                ),
                DdlResponse,
            )
        )
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
        self._call(DropTable(name, wait_seconds=_MASTER_WAIT), DdlResponse)

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
