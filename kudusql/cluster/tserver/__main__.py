"""``python -m kudusql.cluster.tserver --dir D [--bind HOST:PORT] [--master HOST:PORT]
[--secret-file F] [--tls-dir T] [--heartbeat-interval S] [--remember-clients-ttl S]
[--remember-responses-ttl S] [--raft-heartbeat-ms MS]
[--raft-max-clock-error-ms MS]``: run a tablet server.

With ``--master`` it heartbeats to that master (``heartbeater.py``) from the moment it
listens until it stops. ``--masters HOST:PORT,HOST:PORT,...`` (or a list in
``--master``) names replicated masters: it heartbeats to every one of them, each with
its own heartbeater (Kudu's); the followers refuse, the leader master processes.

It logs to ``D/tserver.log``, writes its bound address (``HOST:PORT``) to
``D/tserver.address`` once it listens (and prints it), and on SIGTERM or SIGINT stops
serving, closes its tablets (WALs synced) and exits 0. A start that fails prints one
clear line and exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from kudusql.cluster.addresses import parse_master_addresses
from kudusql.cluster.security import TlsFiles, read_secret_file
from kudusql.cluster.tserver.heartbeater import DEFAULT_HEARTBEAT_INTERVAL, Heartbeater
from kudusql.cluster.tserver.result_tracker import DEFAULT_CLIENTS_TTL, DEFAULT_RESPONSES_TTL
from kudusql.cluster.tserver.server import (
    DEFAULT_FOLLOWER_FAILED_S,
    DEFAULT_RAFT_HEARTBEAT_MS,
    LOSE_WRITE_RESPONSES_ENV,
    LoseWriteResponses,
    TabletServer,
    replica_options,
)
from kudusql.cluster.tserver.tablet_replica import ReplicaOptions
from kudusql.common.errors import Error
from kudusql.storage.consensus import DEFAULT_SEGMENT_SIZE
from kudusql.storage.fs.files import write_file_atomic

ADDRESS_FILE = "tserver.address"
LOG_FILE = "tserver.log"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kudusql tserver", description="Run a kudusql tablet server.")
    p.add_argument("--dir", required=True, help="the tablet server's directory")
    p.add_argument("--bind", default="127.0.0.1:0", help="HOST:PORT to listen on (port 0: any)")
    p.add_argument(
        "--master",
        "--masters",
        dest="master",
        help="HOST:PORT of the master to heartbeat to (several masters: a comma-separated list)",
    )
    p.add_argument("--secret-file", help="the cluster secret, required on every call")
    p.add_argument("--tls-dir", help="a directory with server.crt and server.key")
    p.add_argument(
        "--heartbeat-interval",
        type=float,
        default=DEFAULT_HEARTBEAT_INTERVAL,
        help="seconds between heartbeats to the master (default %(default)s)",
    )
    p.add_argument(
        "--remember-clients-ttl",
        type=float,
        default=DEFAULT_CLIENTS_TTL,
        help="seconds a write client not heard from is remembered (default %(default)s)",
    )
    p.add_argument(
        "--remember-responses-ttl",
        type=float,
        default=DEFAULT_RESPONSES_TTL,
        help="seconds a write's response is kept for its retries (default %(default)s)",
    )
    p.add_argument(
        "--raft-heartbeat-ms",
        type=int,
        default=DEFAULT_RAFT_HEARTBEAT_MS,
        help="replicated tablets' Raft heartbeat interval in ms; a leader is suspected"
        " after 3 missed (default %(default)s)",
    )
    p.add_argument(
        "--raft-max-clock-error-ms",
        type=int,
        default=None,
        help="the clock error leader leases allow for, below the election timeout"
        " (default: a third of it)",
    )
    p.add_argument(
        "--follower-unavailable-considered-failed-sec",
        type=float,
        default=DEFAULT_FOLLOWER_FAILED_S,
        help="seconds a replicated tablet's leader waits for a silent follower before it"
        " evicts it and the master re-replicates (default %(default)s)",
    )
    p.add_argument(
        "--log-segment-size-mb",
        type=float,
        default=DEFAULT_SEGMENT_SIZE / (1 << 20),
        help="replicated tablets' consensus log segment size in MiB; the log GC deletes"
        " whole segments (Kudu's --log_segment_size_mb; default %(default)s)",
    )
    p.add_argument(
        "--log-gc-interval-sec",
        type=float,
        default=ReplicaOptions().log_gc_interval_s,
        help="seconds between runs of a replicated tablet's flush and log GC; 0: only"
        " when the tablet is flushed through the RPC (default %(default)s)",
    )
    args = p.parse_args(argv)
    directory = os.path.abspath(args.dir)
    os.makedirs(directory, exist_ok=True)
    logging.basicConfig(
        filename=os.path.join(directory, LOG_FILE),
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        secret = read_secret_file(args.secret_file) if args.secret_file else None
        tls = None
        if args.tls_dir:
            tls = TlsFiles(Path(args.tls_dir) / "server.crt", Path(args.tls_dir) / "server.key")
        masters = parse_master_addresses(args.master) if args.master else []
        fault_spec = os.environ.get(LOSE_WRITE_RESPONSES_ENV)
        server = TabletServer(
            directory,
            args.bind,
            secret=secret,
            tls=tls,
            remember_clients_ttl=args.remember_clients_ttl,
            remember_responses_ttl=args.remember_responses_ttl,
            lose_write_responses=LoseWriteResponses.parse(fault_spec) if fault_spec else None,
            replica_options=dataclasses.replace(
                replica_options(
                    args.raft_heartbeat_ms,
                    args.follower_unavailable_considered_failed_sec,
                    args.raft_max_clock_error_ms,
                ),
                log_segment_bytes=max(1024, int(args.log_segment_size_mb * (1 << 20))),
                log_gc_interval_s=args.log_gc_interval_sec,
            ),
        )
    except (Error, ValueError) as exc:
        logging.getLogger(__name__).error("tablet server did not start: %s", exc)
        print(f"kudusql tserver: {exc}", file=sys.stderr)
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
    log = logging.getLogger(__name__)
    log.info(
        "tablet server %s listening on %s (incarnation %d)",
        server.uuid,
        address,
        server.tablets.incarnation,
    )
    print(address, flush=True)
    heartbeaters = [
        Heartbeater(
            server.tablets,
            uuid=server.uuid,
            address=address,
            master_address=master,
            secret=secret,
            tls_root=str(tls.certificate) if tls is not None else None,
            interval=args.heartbeat_interval,
        )
        for master in masters
    ]

    def trigger() -> None:
        for h in heartbeaters:
            h.trigger()

    server.on_tablets_changed = trigger  # type: ignore[method-assign]
    for h in heartbeaters:
        h.start()
    try:
        server.serve()
    finally:
        for h in heartbeaters:
            h.stop()
        server.close()
        log.info("tablet server stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
