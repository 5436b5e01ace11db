"""``python -m kudusql.cluster.master --dir D [--bind HOST:PORT] [--secret-file F]
[--tls-dir T] [--tserver-unresponsive-timeout S] [--tablet-creation-timeout S]
[--masters HOST:PORT,HOST:PORT,HOST:PORT [--raft-heartbeat-ms MS]]``: run the master.

With ``--masters`` (every master's address, this one's ``--bind`` among them; Kudu's
``--master_addresses``) the catalog is replicated across the masters with Raft and only
the leader master serves.

It logs to ``D/master.log``, writes its bound address (``HOST:PORT``) to
``D/master.address`` once it listens (and prints it), and on SIGTERM or SIGINT stops
serving, stops its driver, closes the catalog (WAL synced) and exits 0. A start that
fails prints one clear line and exits 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from kudusql.cluster.addresses import parse_master_addresses
from kudusql.cluster.master.server import DEFAULT_TICK_INTERVAL, MasterServer
from kudusql.cluster.master_state import MasterOptions
from kudusql.cluster.security import TlsFiles, read_secret_file
from kudusql.cluster.tserver.server import DEFAULT_RAFT_HEARTBEAT_MS, replica_options
from kudusql.common.errors import Error
from kudusql.storage.fs.files import write_file_atomic

ADDRESS_FILE = "master.address"
LOG_FILE = "master.log"


def parser() -> argparse.ArgumentParser:
    defaults = MasterOptions()
    p = argparse.ArgumentParser(prog="kudusql master", description="Run a kudusql master.")
    p.add_argument("--dir", required=True, help="the master's directory")
    p.add_argument("--bind", default="127.0.0.1:0", help="HOST:PORT to listen on (port 0: any)")
    p.add_argument("--secret-file", help="the cluster secret, required on every call")
    p.add_argument("--tls-dir", help="a directory with server.crt and server.key")
    p.add_argument(
        "--tserver-unresponsive-timeout",
        type=float,
        default=defaults.tserver_unresponsive_timeout,
        help="seconds without a heartbeat before a tablet server is not live (default %(default)s)",
    )
    p.add_argument(
        "--tablet-creation-timeout",
        type=float,
        default=defaults.tablet_creation_timeout,
        help="seconds before a tablet that is not created is replaced (default %(default)s)",
    )
    p.add_argument(
        "--tick-interval",
        type=float,
        default=DEFAULT_TICK_INTERVAL,
        help="seconds between the catalog's retries and timeouts (default %(default)s)",
    )
    p.add_argument(
        "--masters",
        help="HOST:PORT,HOST:PORT,... of every master (this one's --bind among them):"
        " the catalog is replicated across them; omitted: a single master",
    )
    p.add_argument(
        "--raft-heartbeat-ms",
        type=int,
        default=DEFAULT_RAFT_HEARTBEAT_MS,
        help="the replicated catalog's Raft heartbeat interval in ms; a leader master is"
        " suspected after 3 missed (default %(default)s)",
    )
    p.add_argument(
        "--catalog-write-timeout",
        type=float,
        default=5.0,
        help="seconds a replicated catalog write waits for a majority of the masters"
        " (default %(default)s)",
    )
    p.add_argument(
        "--default-num-replicas",
        type=int,
        default=None,
        help="replicas per tablet of a table created without a replication factor"
        " (default: 3 when at least 3 tablet servers are live, else 1)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    directory = os.path.abspath(args.dir)
    os.makedirs(directory, exist_ok=True)
    logging.basicConfig(
        filename=os.path.join(directory, LOG_FILE),
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log = logging.getLogger(__name__)
    try:
        secret = read_secret_file(args.secret_file) if args.secret_file else None
        tls = None
        if args.tls_dir:
            tls = TlsFiles(Path(args.tls_dir) / "server.crt", Path(args.tls_dir) / "server.key")
        options = MasterOptions(
            tserver_unresponsive_timeout=args.tserver_unresponsive_timeout,
            tablet_creation_timeout=args.tablet_creation_timeout,
            default_num_replicas=args.default_num_replicas,
        )
        server = MasterServer(
            directory,
            args.bind,
            secret=secret,
            tls=tls,
            options=options,
            tick_interval=args.tick_interval,
            masters=parse_master_addresses(args.masters) if args.masters else None,
            replica_options=replica_options(args.raft_heartbeat_ms),
            catalog_write_timeout=args.catalog_write_timeout,
        )
    except (Error, ValueError) as exc:
        log.error("master did not start: %s", exc)
        print(f"kudusql master: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if not stop.is_set():
            stop.set()
            threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    address = str(server.address)
    write_file_atomic(os.path.join(directory, ADDRESS_FILE), address.encode())
    log.info("master %s listening on %s", server.uuid, address)
    print(address, flush=True)
    try:
        server.serve()
    finally:
        server.close()
        log.info("master stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
