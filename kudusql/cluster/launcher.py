"""Start, stop and inspect a local cluster: a master (or ``masters`` replicated masters)
and N tablet servers as separate processes on loopback ports (Kudu's
``ExternalMiniCluster``).

``MiniCluster(root)`` lays the cluster out under ``root``::

    root/secret            the cluster secret (owner-only), generated at the first start
    root/cluster.json      the processes: pid, directory and address of each
    root/master/           the master's directory (its log, address file, catalog)
    root/master-0/ ...     with several masters: one directory per master
    root/ts-0/ ...         one directory per tablet server

Several masters are given loopback ports chosen before they start (each one's
``--masters`` lists all of them), and every tablet server heartbeats to all of them.

Each daemon runs as ``python -m kudusql.cluster.master`` / ``...tserver`` in its own
session (detached: it outlives the command that started it), binds ``127.0.0.1:0``
and writes its address file once it listens. ``start`` returns once every tablet server
has registered with the master. ``stop`` sends SIGTERM, waits, then SIGKILLs what is
left; it only signals a pid whose command line is one of this cluster's daemons, so a
pid the system has reused is left alone. The ``kudusql cluster`` commands and the tests'
``mini_cluster`` fixture are built on this class.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kudusql.cluster.master.messages import (
    GetMasterStatus,
    ListTabletServers,
    ListTabletServersResponse,
    MasterStatus,
    TabletServerInfo,
)
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.security import (
    generate_secret,
    generate_self_signed,
    read_secret_file,
    write_secret_file,
)
from kudusql.common.errors import Error, OperationalError
from kudusql.storage.fs.files import write_file_atomic

__all__ = ["Daemon", "MiniCluster", "free_loopback_ports"]

STATE_FILE = "cluster.json"
SECRET_FILE = "secret"
#: With TLS: the directory of the cluster's certificate and key (every daemon serves
#: the one self-signed certificate, which is also the clients' trust root).
TLS_DIR = "tls"
MASTER_DIR = "master"


@dataclass
class Daemon:
    """One daemon process of the cluster."""

    kind: str  # "master" or "tserver"
    directory: str
    pid: int
    address: str


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _is_daemon(daemon: Daemon) -> bool:
    """Whether ``daemon.pid`` still runs that daemon (not a reused pid)."""
    try:
        with open(f"/proc/{daemon.pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return _alive(daemon.pid)  # no /proc: trust the pid
    module = f"kudusql.cluster.{daemon.kind}".encode()
    return module in argv and daemon.directory.encode() in argv


class MiniCluster:
    """A local cluster under ``root``. ``master_flags`` and ``tserver_flags`` are added
    to every start of the daemons (e.g. shorter timeouts for tests).

    ``tserver_master_address(index, master_address)``, if given, is the master address
    tablet server ``index`` is started with (a fault test passes a loopback proxy's
    address there, to cut that server off from the master); by default the master's own.

    ``masters`` > 1 starts that many masters replicating the catalog (``--masters``).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        master_flags: Sequence[str] = (),
        tserver_flags: Sequence[str] = (),
        start_timeout: float = 60.0,
        tls: bool = False,
        tserver_master_address: Callable[[int, str], str] | None = None,
        masters: int = 1,
    ) -> None:
        if masters < 1:
            raise OperationalError("a cluster has at least one master")
        self.root = Path(root).resolve()
        self.num_masters = masters
        #: Every master (one unless ``masters`` > 1); ``master`` is the first.
        self.masters: list[Daemon] = []
        self.master_flags = list(master_flags)
        self.tserver_flags = list(tserver_flags)
        self.start_timeout = start_timeout
        self.tls = tls
        self.tserver_master_address = tserver_master_address
        self.master: Daemon | None = None
        self.tservers: list[Daemon] = []
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        state = self.root / STATE_FILE
        if state.exists():
            self._load(state)

    # -- state ----------------------------------------------------------------------------

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text())
            self.master = Daemon(**raw["master"]) if raw.get("master") else None
            self.masters = [Daemon(**d) for d in raw.get("masters", [])] or (
                [self.master] if self.master else []
            )
            self.num_masters = len(self.masters) or 1
            self.tservers = [Daemon(**d) for d in raw.get("tservers", [])]
            self.tls = bool(raw.get("tls", False))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise OperationalError(f"{path} is not a cluster state file: {exc}") from None

    def _save(self) -> None:
        state = {
            "master": asdict(self.master) if self.master else None,
            "masters": [asdict(d) for d in self.masters],
            "tservers": [asdict(d) for d in self.tservers],
            "tls": self.tls,
        }
        write_file_atomic(str(self.root / STATE_FILE), json.dumps(state, indent=1).encode())

    @property
    def secret_file(self) -> Path:
        return self.root / SECRET_FILE

    @property
    def secret(self) -> str:
        return read_secret_file(self.secret_file)

    @property
    def tls_ca(self) -> Path | None:
        """The certificate a client trusts (with ``tls``), else None."""
        return self.root / TLS_DIR / "server.crt" if self.tls else None

    @property
    def url(self) -> str:
        """The ``kudusql://`` URL a client connects with, credentials included."""
        url = f"kudusql://{self.master_address}?secret_file={self.secret_file}"
        return url + (f"&tls_ca={self.tls_ca}" if self.tls_ca else "")

    @property
    def master_address(self) -> str:
        """The master's ``HOST:PORT``; several masters: all of them, comma-separated."""
        if self.master is None:
            raise OperationalError(f"no cluster was started in {self.root}")
        return ",".join(d.address for d in self.masters) if self.masters else self.master.address

    def master_client(self, *, timeout: float = 10.0) -> RpcClient:
        """A client of the master (several masters: of the leader master, or of the first
        if none leads now) with the cluster's secret (close it)."""
        address = self.master.address if self.master else self.master_address
        if len(self.masters) > 1:
            leader = self.leader_master()
            address = leader.address if leader is not None else address
        return self._client_of(address, timeout)

    def _client_of(self, address: str, timeout: float) -> RpcClient:
        return RpcClient(
            address,
            secret=self.secret,
            tls_root=self.tls_ca,
            server_kind="master",
            timeout=timeout,
            retry=RetryPolicy(deadline=timeout),
        )

    def master_status(self, daemon: Daemon, *, timeout: float = 2.0) -> MasterStatus | None:
        """What master ``daemon`` says of its role; None when it does not answer."""
        if not self._running(daemon):
            return None
        try:
            with self._client_of(daemon.address, timeout) as client:
                status = client.call(GetMasterStatus(), idempotent=False)
        except Error:
            return None
        assert isinstance(status, MasterStatus)
        return status

    def leader_master(self) -> Daemon | None:
        """The master that serves now (its own status says LEADER), or None."""
        for d in self.masters or ([self.master] if self.master else []):
            status = self.master_status(d)
            if status is not None and status.role == "LEADER":
                return d
        return None

    # -- processes ------------------------------------------------------------------------

    def _spawn(self, kind: str, directory: Path, flags: list[str]) -> Daemon:
        return self._await(kind, directory, self._launch(kind, directory, flags))

    def _launch(self, kind: str, directory: Path, flags: list[str]) -> subprocess.Popen[bytes]:
        """Start the daemon's process (``_await`` waits until it listens)."""
        address_file = directory / f"{kind}.address"
        directory.mkdir(parents=True, exist_ok=True)
        address_file.unlink(missing_ok=True)
        command = [sys.executable, "-m", f"kudusql.cluster.{kind}", "--dir", str(directory)]
        command += ["--secret-file", str(self.secret_file), *flags]
        if self.tls:
            command += ["--tls-dir", str(self.root / TLS_DIR)]
        package_root = str(Path(__file__).resolve().parents[2])  # holds kudusql/
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        with (directory / "process.out").open("ab") as out:
            process = subprocess.Popen(
                command,
                cwd=directory,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self._children[process.pid] = process
        return process

    def _await(self, kind: str, directory: Path, process: subprocess.Popen[bytes]) -> Daemon:
        """The daemon once it wrote its address file (or the clear error why not)."""
        address_file = directory / f"{kind}.address"
        deadline = time.monotonic() + self.start_timeout
        while not address_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                output = (directory / "process.out").read_text(errors="replace").strip()
                last = output.splitlines()[-1] if output else "no output"
                raise OperationalError(f"the {kind} in {directory} did not start: {last}")
            time.sleep(0.02)
        return Daemon(kind, str(directory), process.pid, address_file.read_text().strip())

    def _start_master(self, port: int = 0) -> None:
        flags = ["--bind", f"127.0.0.1:{port}", *self.master_flags]
        self.master = self._spawn("master", self.root / MASTER_DIR, flags)
        self.masters = [self.master]
        self._save()

    def _start_masters(self) -> None:
        """Several masters on ports chosen first (each one's ``--masters`` lists all)."""
        addresses = [f"127.0.0.1:{p}" for p in free_loopback_ports(self.num_masters)]
        self.masters = [
            Daemon("master", str(self.root / f"{MASTER_DIR}-{i}"), 0, a)
            for i, a in enumerate(addresses)
        ]
        # Launched together, awaited in turn: each waits for its peers only to elect.
        launched = [(i, self._launch_master_at(i)) for i in range(self.num_masters)]
        for i, process in launched:
            self._await_master_at(i, process)

    def _launch_master_at(self, index: int) -> subprocess.Popen[bytes]:
        old = self.masters[index]
        flags = ["--bind", old.address, "--masters", ",".join(d.address for d in self.masters)]
        return self._launch("master", Path(old.directory), [*flags, *self.master_flags])

    def _await_master_at(self, index: int, process: subprocess.Popen[bytes]) -> Daemon:
        daemon = self._await("master", Path(self.masters[index].directory), process)
        self.masters[index] = daemon
        self.master = self.masters[0]
        self._save()
        return daemon

    def _start_master_at(self, index: int) -> Daemon:
        return self._await_master_at(index, self._launch_master_at(index))

    def _start_tserver(self, index: int, port: int = 0) -> Daemon:
        master = self.master_address
        if self.tserver_master_address is not None:
            master = self.tserver_master_address(index, master)
        flags = ["--bind", f"127.0.0.1:{port}", "--master", master, *self.tserver_flags]
        return self._spawn("tserver", self.root / f"ts-{index}", flags)

    def start(self, tservers: int = 3) -> None:
        """Start a master and ``tservers`` tablet servers; return once all registered."""
        if self.master is not None and self.running():
            raise OperationalError(f"a cluster is already running in {self.root}")
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.secret_file.exists():
            write_secret_file(self.secret_file, generate_secret())
        if self.tls and not (self.root / TLS_DIR / "server.crt").exists():
            generate_self_signed(self.root / TLS_DIR)
        self.tservers = []
        try:
            if self.num_masters > 1:
                self._start_masters()
            else:
                self._start_master()
            for i in range(tservers):
                self.tservers.append(self._start_tserver(i))
                self._save()
            self.wait_for_tservers(tservers)
        except BaseException:
            self.stop()
            raise

    def running(self) -> list[Daemon]:
        """The daemons whose processes run."""
        daemons = self._master_daemons() + self.tservers
        return [d for d in daemons if self._running(d)]

    def _master_daemons(self) -> list[Daemon]:
        return list(self.masters) or ([self.master] if self.master else [])

    def _running(self, daemon: Daemon) -> bool:
        child = self._children.get(daemon.pid)
        if child is not None:
            return child.poll() is None
        return _alive(daemon.pid) and _is_daemon(daemon)

    def _signal(self, daemon: Daemon, sig: int) -> None:
        if self._running(daemon):
            with contextlib.suppress(ProcessLookupError):
                os.kill(daemon.pid, sig)

    def _wait_exit(self, daemons: Sequence[Daemon], timeout: float) -> list[Daemon]:
        deadline = time.monotonic() + timeout
        while True:
            left = [d for d in daemons if self._running(d)]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM every daemon (tablet servers first), wait, then SIGKILL the rest."""
        daemons = [*self.tservers, *self._master_daemons()]
        for d in daemons:
            self._signal(d, signal.SIGTERM)
            self._signal(d, signal.SIGCONT)  # a paused daemon acts on the SIGTERM
        for d in self._wait_exit(daemons, timeout):
            self._signal(d, signal.SIGKILL)
        self._wait_exit(daemons, 10.0)
        for child in self._children.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(1)

    def kill(self, daemon: Daemon) -> None:
        """SIGKILL one daemon: what survives is what a crash leaves."""
        self._signal(daemon, signal.SIGKILL)
        self._wait_exit([daemon], 10.0)

    def pause(self, daemon: Daemon) -> None:
        """SIGSTOP one daemon: it keeps its sockets and answers nothing until ``resume``."""
        self._signal(daemon, signal.SIGSTOP)

    def resume(self, daemon: Daemon) -> None:
        """SIGCONT a paused daemon."""
        self._signal(daemon, signal.SIGCONT)

    def restart_master(self, *, wait: bool = True, index: int = 0) -> None:
        """Start the master (several: master ``index``) again on the same port (the tablet
        servers know it), SIGKILLing it first if it runs; with ``wait``, return once every
        running tablet server has registered with the leader master."""
        assert self.master is not None
        if len(self.masters) > 1:
            if self._running(self.masters[index]):
                self.kill(self.masters[index])
            self._start_master_at(index)
        else:
            if self._running(self.master):
                self.kill(self.master)
            port = int(self.master.address.rsplit(":", 1)[1])
            self._start_master(port)
        if wait:
            self.wait_for_tservers(sum(1 for d in self.running() if d.kind == "tserver"))

    def restart_tserver(self, index: int, *, same_port: bool = False) -> Daemon:
        """Start tablet server ``index`` again (SIGKILL first if it runs), on a new port,
        or with ``same_port`` on its old one (clients' cached locations stay valid)."""
        old = self.tservers[index]
        if self._running(old):
            self.kill(old)
        port = int(old.address.rsplit(":", 1)[1]) if same_port else 0
        self.tservers[index] = self._start_tserver(index, port)
        self._save()
        return self.tservers[index]

    # -- the master's view ----------------------------------------------------------------

    def tablet_servers(self) -> list[TabletServerInfo]:
        """What the master knows of the tablet servers."""
        with self.master_client() as client:
            response = client.call(ListTabletServers())
        assert isinstance(response, ListTabletServersResponse)
        return response.servers

    def wait_for_tservers(self, count: int, timeout: float | None = None) -> None:
        """Wait until ``count`` tablet servers are live at the master."""
        deadline = time.monotonic() + (timeout or self.start_timeout)
        live = 0
        while True:
            try:
                live = sum(1 for s in self.tablet_servers() if s.live)
            except Error:
                live = 0
            if live >= count:
                return
            if time.monotonic() > deadline:
                raise OperationalError(
                    f"only {live} of {count} tablet servers registered with the (leader)"
                    f" master {self.master_address}"
                )
            time.sleep(0.1)


def free_loopback_ports(n: int) -> list[int]:
    """``n`` loopback ports free now (the system's picks, released at once)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
