"""``connect()`` and ``Client``: the entry point, Kudu's ``kudu.connect`` /
``kudu.Client``, for a cluster (``connect(host, port)``: a ``RemoteDatabase``) or an
embedded database (``connect(directory)``).

A client opens (or wraps) one ``DatabaseHandle`` and reaches storage only through it and
its ``TableHandle``s, so both kinds serve every call; DDL goes through it
(``create_table``, ``delete_table``, ``new_table_alterer``), writes through sessions and
tables, reads through scanners. ``latest_observed_timestamp()`` is the highest
HybridTime of any write or scan this client has seen; a snapshot scan at it sees all of
them.

Tables have Kudu's owner and comment (``create_table(owner=, comment=)``, the alterer's
``set_owner``/``set_comment``), statistics (``get_table_statistics``: on-disk size and
live row count) and soft delete: ``soft_delete_table(name, reserve_seconds)`` (or
``delete_table(name, reserve_seconds=...)``) hides a table from ``list_tables`` and SQL
while it stays recallable (``recall_table(table.id)``); once the reserve time has passed
it is purged (an embedded database only: a cluster refuses soft delete). Errors have
kudu-python's classes (``KuduNotFound`` for a table that does not exist, ...), each also
the PEP 249 class (``kudusql.common.errors``).
"""

from __future__ import annotations

import getpass
import os
import threading
from dataclasses import dataclass
from typing import Any

from kudusql.client.alter import TableAlterer
from kudusql.client.partitioning import Partitioning
from kudusql.client.scanner import Scanner, deserialize_into_scanner
from kudusql.client.schema import Schema
from kudusql.client.session import FLUSH_MANUAL, Session
from kudusql.client.table import Table
from kudusql.client.timestamps import HybridTime
from kudusql.cluster.client.database import RemoteDatabase
from kudusql.cluster.client.target import (
    CLUSTER_OPTIONS,
    SCHEME,
    ClusterTarget,
    is_cluster_url,
)
from kudusql.cluster.rpc_client import DEFAULT_TIMEOUT
from kudusql.common.errors import (
    KuduAlreadyPresent,
    KuduInvalidArgument,
    KuduNotFound,
    KuduNotSupported,
    KuduTypeError,
    KuduValueError,
    NotSupportedError,
    ProgrammingError,
)
from kudusql.common.schema import Schema as CoreSchema
from kudusql.storage.tables.handles import DatabaseHandle
from kudusql.storage.tables.open_databases import open_database
from kudusql.storage.tables.table_rules import NUM_REPLICAS_PROPERTY

__all__ = [
    "ENCRYPTION_OPTIONAL",
    "ENCRYPTION_REQUIRED",
    "ENCRYPTION_REQUIRED_REMOTE",
    "Client",
    "TableStatistics",
    "connect",
]

#: Kudu's encryption policies (``connect(encryption_policy=...)``). An embedded database
#: sends nothing over a network, so every policy is met.
ENCRYPTION_OPTIONAL = 0
ENCRYPTION_REQUIRED_REMOTE = 1
ENCRYPTION_REQUIRED = 2


@dataclass(frozen=True)
class TableStatistics:
    """A table's statistics (Kudu's ``KuduTableStatistics``): ``on_disk_size`` (bytes of
    its DiskRowSets and WAL segments), ``live_row_count`` (rows live now), and the
    limits, -1 as no limit is set."""

    on_disk_size: int
    live_row_count: int
    on_disk_size_limit: int = -1
    live_row_count_limit: int = -1

    def __repr__(self) -> str:
        def shown(v: int) -> str:
            return "N/A" if v < 0 else str(v)

        return (
            f"on disk size: {shown(self.on_disk_size)}\n"
            f"live row count: {shown(self.live_row_count)}\n"
            f"on disk size limit: {shown(self.on_disk_size_limit)}\n"
            f"live row count limit: {shown(self.live_row_count_limit)}\n"
        )


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class TabletServer:
    """A tablet server of the cluster (kudu-python's ``TabletServer``)."""

    _uuid: str
    _address: str

    def uuid(self) -> str:
        return self._uuid

    def hostname(self) -> str:
        return self._address.rsplit(":", 1)[0]

    def port(self) -> int:
        return int(self._address.rsplit(":", 1)[1])

    def __repr__(self) -> str:
        return f"TabletServer({self._uuid}, {self._address})"


def _not_found(name: str) -> KuduNotFound:
    return KuduNotFound(f'the table does not exist: table_name: "{name}"')


def _current_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no user name in this environment
        return ""


class Client:
    """A connection to one database. ``Client(path, **database_options)`` opens (or
    creates) it, or shares the one another client of this process opened by the same
    path; the last of them to ``close()`` closes it. ``Client("kudusql://HOST:PORT",
    secret_file=..., tls_ca=..., timeout=...)`` connects to a cluster's master.
    ``Client(database)`` wraps an open database (embedded or a cluster's
    ``RemoteDatabase``) and leaves closing it to its owner."""

    def __init__(self, database: DatabaseHandle | str, **kw: Any) -> None:
        self._release = _nothing
        if not isinstance(database, str):
            if kw:
                raise ProgrammingError("database options apply only when opening by path")
            self._db: DatabaseHandle = database
            self._own = False
        elif is_cluster_url(database):
            remote = RemoteDatabase.open(database, **kw)
            self._db = remote
            self._release = remote.close
            self._own = True
        else:
            options = kw.pop("options", None)
            try:
                self._db, self._release = open_database(
                    str(database), {} if options is None else options, kw
                )
            except ProgrammingError as e:
                if "already open in this process" in str(e):
                    raise KuduInvalidArgument(str(e)) from None
                raise
            self._own = True
        self._closed = False
        self._observed = 0
        self._lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def database(self) -> DatabaseHandle:
        """The storage database: an embedded ``Database`` or a cluster's
        ``RemoteDatabase`` (both ``DatabaseHandle``s)."""
        return self._db

    @property
    def is_cluster(self) -> bool:
        """True when connected to a cluster's master (not an embedded database)."""
        return self._db.master_address is not None

    def _check_open(self) -> None:
        if self._db.closed:
            raise ProgrammingError(f"database {self._db.path} is closed")

    @property
    def path(self) -> str:
        return self._db.path

    def close(self) -> None:
        """Release the database if this client opened it (closing it when no other
        client of this process uses it)."""
        if self._own and not self._closed:
            self._closed = True
            self._release()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self._db.path!r})"

    @property
    def is_multimaster(self) -> bool:
        """True when connected to several (replicated) masters; an embedded database is
        its own single master."""
        return "," in (self._db.master_address or "")

    # -- time ----------------------------------------------------------------------------------
    def _observe(self, ts: int) -> None:
        with self._lock:
            if ts > self._observed:
                self._observed = ts

    def latest_observed_timestamp(self) -> HybridTime:
        """The highest HybridTime this client has observed (its writes' timestamps and its
        scans' snapshots; on a cluster also any server's answer); 0 before any.
        ``scanner.set_snapshot()`` of it reads all of them."""
        seen = self._db.observed_timestamp()
        if seen is not None:
            self._observe(seen)
        return HybridTime(self._observed)

    # -- tables --------------------------------------------------------------------------------
    def create_table(
        self,
        table_name: str,
        schema: Schema | CoreSchema,
        partitioning: Partitioning | None = None,
        n_replicas: int | None = None,
        owner: str | None = None,
        comment: str | None = None,
        *,
        properties: dict[str, str] | None = None,
        if_not_exists: bool = False,
    ) -> Table:
        """Create a table (``schema`` from ``kudu.schema_builder()``); without
        ``partitioning`` it has one tablet. ``owner`` defaults to the user running the
        process (as Kudu's master takes the client's user). Returns the new table."""
        if n_replicas is not None and (
            isinstance(n_replicas, bool) or not isinstance(n_replicas, int)
        ):
            raise KuduTypeError(f"n_replicas is an int, not {n_replicas!r}")
        if n_replicas:  # None or 0: the cluster's default (3 with 3 live tablet servers)
            properties = {**(properties or {}), NUM_REPLICAS_PROPERTY: str(n_replicas)}
        core_schema = schema.core if isinstance(schema, Schema) else schema
        if not isinstance(core_schema, CoreSchema):
            raise KuduTypeError(
                f"create_table() takes a Schema (kudu.schema_builder().build()), not "
                f"{type(schema).__name__}"
            )
        if partitioning is not None and not isinstance(partitioning, Partitioning):
            raise KuduTypeError(
                f"partitioning is a Partitioning, not {type(partitioning).__name__}"
            )
        for what, v in (("owner", owner), ("comment", comment)):
            if v is not None and not isinstance(v, str):
                raise KuduTypeError(f"a table {what} is a str, not {type(v).__name__}")
        self._check_open()
        self._db.purge_expired_tables()
        held = self._db.table_meta(table_name, soft_deleted=True)
        if held is not None and (held.soft_deleted or not if_not_exists):
            raise KuduAlreadyPresent(
                f"table {table_name} already exists with id {held.id}"
                + (" (soft-deleted: recall it or delete it)" if held.soft_deleted else "")
            )
        ps = partitioning.to_partition_schema(core_schema) if partitioning is not None else None
        try:
            core = self._db.create_table(
                table_name,
                core_schema,
                ps,
                properties=properties,
                if_not_exists=if_not_exists,
                owner=_current_user() if owner is None else owner,
                comment=comment or "",
            )
        except NotSupportedError as exc:
            # What this database cannot do (replicas on an embedded one): Kudu's class.
            raise KuduNotSupported(str(exc)) from None
        return Table(self, core)

    def delete_table(self, table_name: str, reserve_seconds: int | None = None) -> None:
        """Drop a table at once (also a soft-deleted one); with ``reserve_seconds``,
        soft-delete it instead (``soft_delete_table``). KuduNotFound if there is none."""
        if reserve_seconds is not None:
            self.soft_delete_table(table_name, reserve_seconds)
            return
        self._check_open()
        if not self._db.has_table(table_name, soft_deleted=True):
            raise _not_found(table_name)
        self._db.drop_table(table_name, soft_deleted=True)

    def soft_delete_table(self, table_name: str, reserve_seconds: int | None = None) -> None:
        """Soft-delete a table: it leaves ``list_tables`` and SQL but keeps its data and
        name, and ``recall_table(table.id)`` brings it back within ``reserve_seconds``;
        after that it is purged. Without ``reserve_seconds`` (or with 0) it is dropped at
        once, as in Kudu."""
        self._check_open()
        if reserve_seconds is not None and (
            isinstance(reserve_seconds, bool) or not isinstance(reserve_seconds, int)
        ):
            raise KuduTypeError(f"reserve_seconds is an int, not {reserve_seconds!r}")
        meta = self._db.table_meta(table_name, soft_deleted=True)
        if meta is None:
            raise _not_found(table_name)
        if meta.soft_deleted:
            if not reserve_seconds:
                self._db.drop_table(table_name, soft_deleted=True)
                return
            raise KuduInvalidArgument(
                f"soft_deleted table {table_name} should not be soft deleted again"
            )
        self._db.soft_drop_table(table_name, reserve_seconds or 0)

    def recall_table(self, table_id: int | str, new_table_name: str | None = None) -> Table:
        """Bring back a soft-deleted table (by its id) within its reserve time, under
        ``new_table_name`` if given; KuduNotFound if there is no such table."""
        self._check_open()
        if self.is_cluster:
            raise KuduNotSupported(
                "a kudusql cluster keeps no soft-deleted tables, so there is none to recall"
            )
        try:
            tid = int(table_id)
        except (TypeError, ValueError):
            raise KuduTypeError(f"a table id is an int, not {table_id!r}") from None
        self._db.purge_expired_tables()
        meta = next(
            (
                m
                for n in self._db.soft_deleted_table_names()
                if (m := self._db.table_meta(n, soft_deleted=True)) is not None and m.id == tid
            ),
            None,
        )
        if meta is None:
            raise KuduNotFound(
                f"table id {tid}: soft-deleted state false, expired state false, can't recall"
            )
        if new_table_name and self._db.has_table(new_table_name, soft_deleted=True):
            raise KuduAlreadyPresent(f"table {new_table_name} already exists")
        return Table(self, self._db.recall_table(tid, new_table_name or None))

    def table_exists(self, table_name: str) -> bool:
        """True if the table exists (a soft-deleted one too, as in Kudu)."""
        self._check_open()
        return self._db.has_table(table_name, soft_deleted=True)

    def table(self, table_name: str) -> Table:
        """The table called ``table_name`` (a soft-deleted one too; KuduNotFound if
        there is none)."""
        self._check_open()
        if not self._db.has_table(table_name, soft_deleted=True):
            raise _not_found(table_name)
        return Table(self, self._db.table(table_name, soft_deleted=True))

    def get_table_statistics(self, table_name: str) -> TableStatistics:
        """The table's on-disk size and live row count (KuduNotFound if there is none).
        The row count scans the first key column."""
        table = self.table(table_name)
        stats = table.core.statistics()
        wal = sum(t["wal_bytes"] for t in stats["tablets"])
        return TableStatistics(int(stats["disk_bytes"]) + int(wal), table.core.count_rows())

    def _table_by_id(self, table_id: int | str, name: str = "") -> Table:
        try:
            return Table(self, self._db.table_by_id(table_id, name or None))
        except ProgrammingError:
            if not name:
                raise
            raise ProgrammingError(f"table {name!r} was dropped") from None

    def list_tables(self, match_substring: str | None = None) -> list[str]:
        """The live tables' names (those containing ``match_substring``), sorted."""
        names = self._db.table_names()
        if match_substring is not None:
            names = [n for n in names if match_substring in n]
        return names

    def list_soft_deleted_tables(self, match_substring: str | None = None) -> list[str]:
        """The soft-deleted tables' names still recallable (those containing
        ``match_substring``), sorted."""
        names = self._db.soft_deleted_table_names()
        if match_substring is not None:
            names = [n for n in names if match_substring in n]
        return names

    def list_tablet_servers(self) -> list[TabletServer]:
        """The cluster's tablet servers (``uuid()``, ``hostname()``, ``port()``); an
        embedded database has none to list."""
        if not self.is_cluster:
            raise KuduNotSupported("an embedded database has no tablet servers to list")
        rows = self._db.system_table("tablet_servers").to_pylist()
        return [TabletServer(str(r["uuid"]), str(r["address"])) for r in rows]

    def new_table_alterer(self, table: Table | str) -> TableAlterer:
        """An alterer for ``table`` (a Table or its name)."""
        if isinstance(table, str):
            table = self.table(table)
        if table.client is not self:
            raise KuduInvalidArgument(f"{table!r} belongs to another client")
        return TableAlterer(table)

    # -- sessions and scans ------------------------------------------------------------------
    def new_session(
        self, flush_mode: str | int = FLUSH_MANUAL, timeout_ms: int = 5000, **kwargs: Any
    ) -> Session:
        """A write session: ``flush_mode`` 'manual' (default), 'sync' or 'background';
        keyword options ``mutation_buffer_sz`` (bytes), ``mutation_buffer_watermark``
        (0..1), ``mutation_buffer_flush_interval`` (ms), ``error_buffer_size``."""
        known = {
            "mutation_buffer_sz",
            "mutation_buffer_watermark",
            "mutation_buffer_flush_interval",
            "mutation_buffer_max_num",
            "error_buffer_size",
        }
        unknown = set(kwargs) - known
        if unknown:
            raise KuduValueError(
                f"unknown session option(s) {', '.join(sorted(unknown))}; known: "
                f"{', '.join(sorted(known))}"
            )
        self._check_open()
        return Session(self, flush_mode, timeout_ms, **kwargs)

    def deserialize_token_into_scanner(self, serialized_token: bytes | str) -> Scanner:
        """A scanner of a serialized scan token (planned by any client of this database)."""
        return deserialize_into_scanner(self, serialized_token)


def _one(what: str, value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise KuduValueError(f"kudusql has one master: give one {what}, not {len(value)}")
        return value[0]
    return value


def _several_masters(path: Any, port: Any) -> str | None:
    """kudu-python's ``connect([h1, h2, h3], [p1, p2, p3])`` (or one port for all): the
    replicated masters' URL; None when ``path`` is not a list of several host names."""
    if not isinstance(path, (list, tuple)) or len(path) < 2:
        return None
    if any(is_cluster_url(h) or _is_directory(str(h)) for h in path):
        return None
    ports = list(port) if isinstance(port, (list, tuple)) else [port] * len(path)
    if len(ports) != len(path) or any(p is None for p in ports):
        raise KuduValueError(f"give one port per master: {len(path)} masters, {len(ports)} ports")
    return SCHEME + ",".join(f"{h}:{int(p)}" for h, p in zip(path, ports, strict=True))


def _is_directory(path: str) -> bool:
    """A database directory, not a host name: a path with a separator, or ``:memory:``."""
    return "/" in path or os.sep in path or path == ":memory:"


def connect(
    path: str | list[str],
    port: int | list[int] | None = None,
    admin_timeout_ms: int | None = None,
    rpc_timeout_ms: int | None = None,
    require_authentication: bool = False,
    encryption_policy: int = ENCRYPTION_OPTIONAL,
    jwt: str | None = None,
    trusted_certificates: Any = None,
    **kw: Any,
) -> Client:
    """A client of a cluster or of an embedded database.

    A cluster, as kudu-python's ``connect(host, port)``: ``path`` is the master's host
    (or a list of one) with its ``port`` (or a list of one), or a ``kudusql://HOST:PORT``
    URL; replicated masters: a list of hosts with a list of ports (or one port), or a
    ``kudusql://H1:P1,H2:P2,H3:P3`` URL. Credentials as every cluster connection takes
    them (``cluster/client/target.py``): keyword ``secret``, ``secret_file``,
    ``tls_ca``, ``timeout`` (seconds), the URL's parameters, else
    ``KUDUSQL_SECRET_FILE``/``KUDUSQL_TLS_CA``.
    kudu-python's ``trusted_certificates`` (PEM texts) are the TLS roots;
    ``admin_timeout_ms``/``rpc_timeout_ms`` set the call timeout when ``timeout`` is not
    given; ``require_authentication`` needs a cluster secret, an encryption policy other
    than optional needs TLS; JWTs are refused.

    An embedded database, when ``path`` is a directory (no ``port``, or a ``path`` with
    a ``/``: then ``port`` is ignored):
    ``Database`` keyword options such as ``options=TabletOptions(...)``,
    ``read_only=True``, ``create=False``; a one-element list of paths is accepted, the
    timeouts are ignored (local calls do not time out) and every encryption policy is
    met (nothing goes over a network)."""
    several = _several_masters(path, port)
    if several is not None:
        path, port = several, None
    address: str = _one("master address", path)
    port_number: int | None = _one("port", port)
    if encryption_policy not in (
        ENCRYPTION_OPTIONAL,
        ENCRYPTION_REQUIRED_REMOTE,
        ENCRYPTION_REQUIRED,
    ):
        raise KuduValueError(f"Invalid encryption policy: {encryption_policy!r}")
    for ms in (admin_timeout_ms, rpc_timeout_ms):
        if ms is not None and ms < 0:
            raise KuduValueError("a timeout cannot be negative")
    if is_cluster_url(address) or (port_number is not None and not _is_directory(address)):
        return _connect_cluster(
            address if port_number is None else f"{SCHEME}{address}:{int(port_number)}",
            [ms for ms in (admin_timeout_ms, rpc_timeout_ms) if ms],
            require_authentication,
            encryption_policy,
            jwt,
            trusted_certificates,
            kw,
        )
    if require_authentication or jwt is not None or trusted_certificates is not None:
        raise KuduNotSupported(
            "an embedded database has no authentication (require_authentication, jwt and "
            "trusted_certificates need a cluster: connect(host, port))"
        )
    return Client(address, **kw)


def _connect_cluster(
    url: str,
    timeouts_ms: list[int],
    require_authentication: bool,
    encryption_policy: int,
    jwt: str | None,
    trusted_certificates: Any,
    kw: dict[str, Any],
) -> Client:
    if jwt is not None:
        raise KuduNotSupported(
            "a kudusql cluster authenticates with its shared secret (secret_file=...), not JWTs"
        )
    unknown = set(kw) - CLUSTER_OPTIONS
    if unknown:
        raise KuduValueError(
            f"unknown option(s) {', '.join(sorted(unknown))} for a cluster; known: "
            f"{', '.join(sorted(CLUSTER_OPTIONS))}"
        )
    if kw.get("timeout") is None and timeouts_ms:
        kw = {**kw, "timeout": max(timeouts_ms) / 1000}
    target = ClusterTarget.parse(url, **kw)
    tls_root = target.tls_root
    if trusted_certificates is not None:
        certs = (
            [trusted_certificates]
            if isinstance(trusted_certificates, (str, bytes))
            else list(trusted_certificates)
        )
        tls_root = b"\n".join(c.encode() if isinstance(c, str) else bytes(c) for c in certs)
    if require_authentication and target.secret is None:
        raise KuduNotSupported(
            "require_authentication: give the cluster's secret (secret_file=... or "
            "KUDUSQL_SECRET_FILE); a kudusql cluster has no Kerberos"
        )
    if encryption_policy != ENCRYPTION_OPTIONAL and tls_root is None:
        raise KuduNotSupported(
            "this encryption policy needs TLS: give the cluster's CA certificate "
            "(tls_ca=... or trusted_certificates=[...])"
        )
    db = RemoteDatabase(
        target.address,
        secret=target.secret,
        tls_root=tls_root,
        timeout=target.timeout or DEFAULT_TIMEOUT,
    )
    try:
        db.table_names()  # reachable now, or a clear error now
    except BaseException:
        db.close()
        raise
    client = Client(db)
    client._own = True
    client._release = db.close
    return client
