"""``RemoteDatabase``: a cluster as the SQL layers see a database (``DatabaseHandle``).

A connection to ``kudusql://HOST:PORT`` holds one: the thick client of the paper's
§3.3. It keeps no data; it asks the master for tables and tablet locations and the
tablet servers for rows, through ``RemoteTable``.

What the master keeps of a table: ``schema`` (the ``Schema`` the tablets need) and
``metadata``, the JSON of the SQL layers' ``TableMeta`` (partition schema, properties,
owner, comment, statistics), whose tablet ids are the partitions' positions; each
tablet's partition string is its ``TabletPartition``. CREATE and ALTER TABLE apply the
embedded catalog's own rules (``table_rules``, ``apply_alter``) before the master sees
anything, so a table is refused or made alike in both modes.

Caching: a table's record and locations are cached (``MetaCache``) and reused while
the master is down; a record older than ``table_ttl`` seconds is looked up again at its
next use, and this client's own DDL forgets what it changed at once. So another
client's ALTER or DROP is seen within ``table_ttl`` seconds (Kudu's clients likewise
keep a table's schema until they reopen it); a stale tablet location costs one retry.

Time: every response carries its server's HybridTime; the session keeps the largest
(``ObservedTimestamps``) and a ``HybridClock`` moved past it. A statement's snapshot is
that clock's ``now``: after every write this session saw acknowledged and, on one
machine's clock, after every write any session had acknowledged when the statement
began; each tablet server waits for its safe time before answering.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from kudusql.cluster.addresses import parse_host_port, parse_master_addresses
from kudusql.cluster.client.master_client import MasterClient
from kudusql.cluster.client.meta_cache import MetaCache
from kudusql.cluster.client.remote_table import RemoteTable
from kudusql.cluster.client.scan_token import RemoteScanToken
from kudusql.cluster.client.target import ClusterTarget
from kudusql.cluster.client.tserver_client import TabletServerPool
from kudusql.cluster.master.messages import TableInfo
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import DEFAULT_TIMEOUT, ObservedTimestamps, RpcClient
from kudusql.cluster.tablet_partition import TabletPartition
from kudusql.common.errors import (
    CorruptionError,
    Error,
    KuduNotFound,
    KuduNotSupported,
    OperationalError,
    ProgrammingError,
)
from kudusql.common.hybrid_time import (
    MAX_CLOCK_ERROR_MICROS,
    HybridClock,
    describe,
    from_micros,
    wall_micros,
)
from kudusql.common.options import TabletOptions
from kudusql.common.schema import Schema
from kudusql.storage.tables import system_schemas
from kudusql.storage.tables.alter import AlterStep, apply_alter
from kudusql.storage.tables.catalog import TableMeta
from kudusql.storage.tables.handles import ScanTokenHandle
from kudusql.storage.tables.partition import PartitionSchema
from kudusql.storage.tables.table_rules import (
    check_altered,
    new_table_meta,
    num_replicas_property,
)

__all__ = ["RemoteDatabase"]

#: Seconds a cached table record is used before the master is asked again.
TABLE_TTL_S = 1.0


class RemoteDatabase:
    """The cluster whose master is at ``address`` ("host:port"), or whose masters are
    at "host:port,host:port,..." (the leader is found and followed)."""

    def __init__(
        self,
        address: str,
        *,
        secret: str | None = None,
        tls_root: bytes | None = None,
        options: TabletOptions | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        table_ttl: float = TABLE_TTL_S,
    ) -> None:
        masters = parse_master_addresses(address)
        self.master_address: str | None = ",".join(masters)
        self.path = f"kudusql://{self.master_address}"
        self.options = options or TabletOptions()
        self.read_only = False
        self.table_ttl = table_ttl
        self.observed = ObservedTimestamps()
        self.clock = HybridClock()
        # Several masters: one attempt per master and call, the master client moving
        # on to the next master (the leader) itself.
        once = RetryPolicy(max_attempts=1, deadline=timeout) if len(masters) > 1 else None
        self.master = MasterClient(
            [
                RpcClient(
                    parse_host_port(m),
                    secret=secret,
                    tls_root=tls_root,
                    server_kind="master",
                    timeout=timeout,
                    observed=self.observed,
                    retry=once,
                )
                for m in masters
            ]
        )
        self.servers = TabletServerPool(
            secret=secret, tls_root=tls_root, timeout=timeout, observed=self.observed
        )
        self.meta_cache = MetaCache(self.master)
        self._lock = threading.Lock()
        #: name -> (when it was looked up, the master's record, the table)
        self._tables: dict[str, tuple[float, TableInfo, RemoteTable]] = {}
        self._write_locks: dict[str, threading.RLock] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"RemoteDatabase({self.path})"

    @classmethod
    def open(cls, url: str, *, options: TabletOptions | None = None, **kw: Any) -> RemoteDatabase:
        """The cluster at ``url`` (``kudusql://HOST:PORT``, see ``target.py`` for the
        credentials ``kw`` may give), checked reachable now: a master that is down, or
        refuses the credentials, fails the connect with its clear error."""
        target = ClusterTarget.parse(url, **kw)
        db = cls(
            target.address,
            secret=target.secret,
            tls_root=target.tls_root,
            options=options,
            timeout=target.timeout or DEFAULT_TIMEOUT,
        )
        try:
            db.master.table_names()
        except BaseException:
            db.close()
            raise
        return db

    # -- life -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.master.close()
        self.servers.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ProgrammingError(f"the connection to {self.path} is closed")

    def statement(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def refresh(self, *, tablets: bool = True) -> bool:
        """Forget every cached table record (the next use asks the master)."""
        with self._lock:
            changed = bool(self._tables)
            self._tables.clear()
        return changed

    # -- time -----------------------------------------------------------------------------

    def snapshot(self, ts: int | None = None) -> int:
        """``ts`` (refused when in the future), or now: after every write this session
        has seen acknowledged."""
        seen = self.observed.value
        if seen is not None:
            self.clock.observe(seen)
        if ts is None:
            return self.clock.now()
        if ts > self.clock.peek() + from_micros(MAX_CLOCK_ERROR_MICROS):
            raise ProgrammingError(f"snapshot timestamp {describe(ts)} is in the future")
        return ts

    def latest_timestamp(self) -> int:
        return self.snapshot()

    # -- tables ---------------------------------------------------------------------------

    def table_names(self) -> list[str]:
        self._check_open()
        return self.master.table_names()

    def has_table(self, name: str, *, soft_deleted: bool = False) -> bool:
        return self._cached(name) is not None

    def table_meta(self, name: str, *, soft_deleted: bool = False) -> TableMeta | None:
        found = self._cached(name)
        return None if found is None else found[2].meta

    def table(self, name: str, *, soft_deleted: bool = False) -> RemoteTable:
        found = self._cached(name)
        if found is None:
            raise KuduNotFound(f"table {name!r} does not exist")
        return found[2]

    def table_by_id(self, table_id: int | str, name: str | None = None) -> RemoteTable:
        """The table with the master's id ``table_id``, whatever its name now (``name``,
        a likely one, is looked at first)."""
        wanted = str(table_id)
        names = [name] if name else []
        with self._lock:
            names += [n for n, e in self._tables.items() if e[1].table_id == wanted]
        for candidate in [*names, *self.table_names()]:
            found = self._cached(candidate)
            if found is not None and found[1].table_id == wanted:
                return found[2]
        raise ProgrammingError(
            f"table {name or wanted!r} was dropped"
            + (" (or dropped and created again)" if name and self.has_table(name) else "")
        )

    def observed_timestamp(self) -> int | None:
        """The highest HybridTime the master and tablet servers answered with."""
        return self.observed.value

    # -- scan tokens ----------------------------------------------------------------------

    def scan_token(self, data: bytes | str) -> RemoteScanToken:
        """A cluster scan token read back (``scan_token.py``)."""
        return RemoteScanToken.deserialize(data)

    def scan_token_reader(
        self, token: ScanTokenHandle, *, ordered: bool = False
    ) -> pa.RecordBatchReader:
        """The rows of one token: its tablet read at its snapshot."""
        own = self.scan_token(token.serialize())
        try:
            table = self.table_by_id(own.table_id, own.table_name)
        except ProgrammingError:
            raise ProgrammingError(
                f"table {own.table_name!r} was dropped after the scan was planned"
            ) from None
        return table.scan_token_reader(own, ordered=ordered)

    # -- soft delete: not on a cluster ----------------------------------------------------

    def soft_deleted_table_names(self) -> list[str]:
        """None: the master keeps no soft-deleted tables."""
        return []

    def purge_expired_tables(self) -> list[str]:
        return []

    def soft_drop_table(self, name: str, reserve_seconds: int) -> None:
        """A reserve time of 0 drops the table at once (as Kudu does); a positive one is
        refused: the master has no soft-deleted state."""
        if reserve_seconds > 0:
            raise KuduNotSupported(
                "soft delete needs the master to keep deleted tables, which a kudusql "
                "cluster does not: delete the table, or use an embedded database"
            )
        self.drop_table(name)

    def recall_table(self, table_id: int, new_name: str | None = None) -> RemoteTable:
        raise KuduNotSupported(
            "a kudusql cluster keeps no soft-deleted tables, so there is none to recall"
        )

    def _cached(self, name: str) -> tuple[float, TableInfo, RemoteTable] | None:
        """The table's cached record while fresh, else the master's (the cached one
        when the master cannot be reached); None when there is no such table."""
        self._check_open()
        now = time.monotonic()
        with self._lock:
            cached = self._tables.get(name)
        if cached is not None and now - cached[0] <= self.table_ttl:
            return cached
        try:
            info = self.master.table(name)
        except OperationalError:
            if cached is None:
                raise
            # The master is down: keep serving what is known, and ask it again only
            # after another ``table_ttl``.
            entry = (now, cached[1], cached[2])
            with self._lock:
                self._tables[name] = entry
            return entry
        if info is None:
            with self._lock:
                self._tables.pop(name, None)
            return None
        if cached is not None and (cached[1].table_id, cached[1].schema_version) == (
            info.table_id,
            info.schema_version,
        ):
            entry = (now, cached[1], cached[2])
        else:
            if cached is not None and cached[1].table_id != info.table_id:
                self.meta_cache.invalidate(name)
            entry = (now, info, self._open(info))
        with self._lock:
            self._tables[name] = entry
        return entry

    def _open(self, info: TableInfo) -> RemoteTable:
        try:
            meta = TableMeta.from_dict(json.loads(info.metadata))
        except (ValueError, KeyError, TypeError) as exc:
            raise OperationalError(
                f"table {info.name!r}: the master's record is not a kudusql table ({exc})"
            ) from None
        meta = meta.with_(name=info.name, schema_version=info.schema_version)
        with self._lock:
            lock = self._write_locks.setdefault(info.table_id, threading.RLock())
        table = RemoteTable(
            info.name,
            meta.schema,
            meta.partition_schema,
            self.meta_cache,
            self.servers,
            threads=max(1, self.options.threads),
            meta=meta,
            now=self.snapshot,
            write_lock=lock,
            table_id=info.table_id,
            master=self.master_address or "",
        )
        table.on_statistics = lambda stats: self._save_statistics(info.name, stats)
        return table

    def _forget(self, *names: str) -> None:
        with self._lock:
            for n in names:
                self._tables.pop(n, None)
        for n in names:
            self.meta_cache.invalidate(n)

    # -- DDL ------------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        schema: Schema,
        partition_schema: PartitionSchema | None = None,
        *,
        properties: dict[str, str] | None = None,
        if_not_exists: bool = False,
        owner: str = "",
        comment: str = "",
    ) -> RemoteTable:
        """Create the table at the master; returns once every tablet runs. Its
        replication factor is the ``'kudu.num_tablet_replicas'`` property, else the
        cluster's default (3 when at least 3 tablet servers are live, else 1)."""
        self._check_open()
        ps = partition_schema or PartitionSchema()
        meta = new_table_meta(
            0,
            name,
            schema,
            ps,
            0,
            properties=properties,
            owner=owner,
            comment=comment,
            created_micros=wall_micros(),
        )
        if self.has_table(name):
            if if_not_exists:
                return self.table(name)
            raise ProgrammingError(f"table {name!r} already exists")
        partitions = [TabletPartition.of(ps, p).to_json() for p in meta.partitions()]
        self._forget(name)
        try:
            self.master.create_table(
                name,
                json.dumps(schema.to_dict()),
                partitions,
                json.dumps(meta.to_dict()),
                num_replicas=num_replicas_property(properties),
            )
        except ProgrammingError as exc:
            if if_not_exists and "already" in str(exc):
                return self.table(name)
            raise
        return self.table(name)

    def drop_table(self, name: str, *, if_exists: bool = False, soft_deleted: bool = False) -> None:
        self._check_open()
        if not self.has_table(name):
            if if_exists:
                return
            raise KuduNotFound(f"table {name!r} does not exist")
        try:
            self.master.drop_table(name)
        except KuduNotFound:
            if not if_exists:
                raise
        finally:
            self._forget(name)

    def alter_table(self, name: str, steps: Sequence[AlterStep]) -> RemoteTable:
        """ALTER TABLE: the embedded rules decide the new table; the master records it,
        creates the tablets of added range partitions, deletes those of dropped ones,
        and brings every tablet to the new schema."""
        self._check_open()
        table = self.table(name)
        old = table.meta
        res = apply_alter(old, steps, max((e.id for e in old.tablets), default=-1) + 1)
        check_altered(name, res)
        new = res.meta
        if new.name != name and self.has_table(new.name):
            raise ProgrammingError(f"table {new.name!r} already exists")
        drop_tablets: list[str] = []
        if res.dropped:
            by_start = self.meta_cache.table(name).by_start
            for e in res.dropped:
                located = by_start.get(e.partition_key_start)
                if located is None:
                    raise OperationalError(
                        f"table {name!r}: no running tablet serves the partition to drop yet; "
                        "try again"
                    )
                drop_tablets.append(located.tablet_id)
        added = {e.partition_key_start for e in res.added}
        add_partitions = [
            TabletPartition.of(new.partition_schema, p).to_json()
            for p in new.partitions()
            if p.partition_key_start in added
        ]
        self._forget(name, new.name)
        self.master.alter_table(
            name,
            schema=json.dumps(new.schema.to_dict()) if res.schema_changed else None,
            new_name=new.name if new.name != name else None,
            metadata=json.dumps(new.to_dict()),
            add_partitions=add_partitions,
            drop_tablets=drop_tablets,
        )
        self._forget(name, new.name)
        return self.table(new.name)

    def _save_statistics(self, name: str, stats: dict[str, Any]) -> None:
        table = self.table(name)
        meta = table.meta.with_(statistics=stats)
        self._forget(name)
        self.master.alter_table(name, metadata=json.dumps(meta.to_dict()))

    # -- introspection --------------------------------------------------------------------

    def system_table(self, name: str) -> pa.Table:
        """``sys.tables``, ``sys.tablets`` and ``sys.tablet_servers`` from the master and
        the tablet servers; the per-process tables (rowsets, maintenance) are empty."""
        schema = system_schemas.SCHEMAS.get(name)
        if schema is None:
            system_schemas.system_table_missing(name)
            raise AssertionError  # unreachable
        rows: list[dict[str, Any]] = []
        if name == "tablet_servers":
            now = wall_micros()
            for s in self.master.tablet_servers():
                last = now - int(s.seconds_since_heartbeat * 1e6)
                rows.append(
                    {
                        "uuid": s.uuid,
                        "address": s.address,
                        "state": "LIVE" if s.live else "UNAVAILABLE",
                        "last_heartbeat": system_schemas.micros_to_datetime(last),
                        "seconds_since_heartbeat": s.seconds_since_heartbeat,
                        "tablets": s.tablet_count,
                    }
                )
        elif name == "tablet_replicas":
            rows = self._replica_rows()
        elif name == "tables":
            for n in self.table_names():
                found = self._cached(n)
                if found is not None:
                    rows.append(system_schemas.table_row(n, found[2].meta, found[1].table_id))
        elif name == "tablets":
            for n in self.table_names():
                found = self._cached(n)
                if found is not None:
                    rows.extend(
                        {
                            "table_name": n,
                            "tablet_id": st["tablet_id"],
                            "partition": st["partition"],
                            "memrowset_rows": st["memrowset_rows"],
                            "diskrowsets": st["diskrowsets"],
                            "disk_bytes": st["disk_bytes"],
                            "wal_bytes": st["wal_bytes"],
                        }
                        for st in found[2].tablet_statistics()
                    )
        return pa.Table.from_pylist(rows, schema=schema)

    def _replica_rows(self) -> list[dict[str, Any]]:
        """Every running tablet's replicas with their Raft role (LEADER, FOLLOWER,
        LEARNER) and health (RUNNING while the server heartbeats, else UNAVAILABLE), as
        the master's locations and registry have them."""
        live = {s.uuid: s.live for s in self.master.tablet_servers()}
        rows: list[dict[str, Any]] = []
        for n in self.master.table_names():
            try:
                located = self.master.locations(n)
            except Error:
                continue  # not running yet (being created or altered)
            for loc in located:
                start = TabletPartition.from_json(loc.partition).partition_key_start
                replicas = [(r.tserver_uuid, r.address, r.role) for r in loc.replicas] or [
                    (loc.tserver_uuid, loc.address, "LEADER")
                ]
                rows.extend(
                    {
                        "table_name": n,
                        "tablet_id": loc.tablet_id,
                        "start_key": start.hex().upper(),
                        "tserver_uuid": uuid,
                        "address": address,
                        "role": role,
                        "health": "RUNNING" if live.get(uuid) else "UNAVAILABLE",
                    }
                    for uuid, address, role in replicas
                )
        return rows

    # -- the SQL layers' metadata files ---------------------------------------------------

    def load_meta_file(self, name: str, magic: bytes, version: int, what: str) -> Any:
        """The body of the SQL layers' metadata file ``name``, kept at the master as a
        catalog document (``{"magic", "version", "body"}``), or None."""
        text = self.master.document(name)
        if text is None:
            return None
        try:
            doc = json.loads(text)
            ok = doc.get("magic") == magic.hex() and doc.get("version") == version
        except (ValueError, AttributeError):
            ok = False
        if not ok:
            raise CorruptionError(f"{self.path}/{name}", 0, f"unreadable {what}")
        return doc["body"]

    def save_meta_file(self, name: str, magic: bytes, version: int, body: Any) -> None:
        doc = {"magic": magic.hex(), "version": version, "body": body}
        self.master.put_document(name, json.dumps(doc, sort_keys=True))
