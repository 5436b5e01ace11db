"""The cluster's commands of the ``kudusql`` command line (``kudusql.shell.cli``
delegates here when the first argument is one of them):

- ``kudusql master --dir D --bind H:P ...`` and ``kudusql tserver --dir D --master H:P
  --bind H:P ...``: run one daemon in the foreground (their ``__main__`` modules);
- ``kudusql cluster start DIR [--tservers N] [--masters M]``: a master (M > 1: M masters
  replicating the catalog) and N tablet servers as detached processes under DIR
  (``launcher.MiniCluster``); prints the master's address (several: comma-separated);
- ``kudusql cluster stop DIR``: SIGTERM, wait, SIGKILL;
- ``kudusql cluster status DIR``: every master with its role (LEADER, FOLLOWER, down)
  and every tablet server, live or not, and the tablets each hosts;
- ``kudusql cluster ksck DIR`` (or ``--master HOST:PORT [--secret-file F]``): every
  tablet's replicas, roles, terms and health (``ksck.py``); exit 1 when any is not
  healthy.

Exit codes: 0 on success, 1 when the command failed (one clear line on standard error),
2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kudusql.common.errors import Error

__all__ = ["COMMANDS", "main"]

COMMANDS = ("master", "tserver", "cluster")


def _cluster_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kudusql cluster", description="Run a local kudusql cluster.")
    sub = p.add_subparsers(dest="action", required=True)
    start = sub.add_parser("start", help="start a master and tablet servers under DIR")
    start.add_argument("dir", metavar="DIR")
    start.add_argument("--tservers", type=int, default=3, help="tablet servers (default 3)")
    start.add_argument(
        "--masters",
        type=int,
        default=1,
        help="masters; more than one replicates the catalog with Raft (default 1; use 3)",
    )
    start.add_argument(
        "--tls",
        action="store_true",
        help="serve TLS with a certificate generated in DIR/tls "
        "(clients: tls_ca=DIR/tls/server.crt)",
    )
    start.add_argument(
        "--master-flag", action="append", default=[], help="an extra flag for the master"
    )
    start.add_argument(
        "--tserver-flag", action="append", default=[], help="an extra flag for tablet servers"
    )
    stop = sub.add_parser("stop", help="stop the cluster under DIR")
    stop.add_argument("dir", metavar="DIR")
    status = sub.add_parser("status", help="the servers of the cluster under DIR")
    status.add_argument("dir", metavar="DIR")
    check = sub.add_parser("ksck", help="check every tablet's replicas (Kudu's ksck)")
    check.add_argument("dir", metavar="DIR", nargs="?", help="the cluster's directory")
    check.add_argument("--master", help="HOST:PORT of the master (instead of DIR)")
    check.add_argument("--secret-file", help="the cluster secret (with --master)")
    check.add_argument("--tls-ca", help="the CA certificate of a TLS cluster (with --master)")
    return p


def _ksck(args: argparse.Namespace) -> int:
    from kudusql.cluster.ksck import ksck
    from kudusql.cluster.launcher import STATE_FILE, MiniCluster

    if args.master:
        report = ksck(args.master, secret_file=args.secret_file, tls_root=args.tls_ca)
    elif args.dir:
        cluster = MiniCluster(args.dir)
        if cluster.master is None:
            print(f"kudusql cluster: no cluster in {args.dir} (no {STATE_FILE})", file=sys.stderr)
            return 1
        ca = cluster.tls_ca
        report = ksck(
            cluster.master_address,
            secret_file=str(cluster.secret_file),
            tls_root=None if ca is None else str(ca),
        )
    else:
        print("kudusql cluster ksck: give DIR or --master HOST:PORT", file=sys.stderr)
        return 2
    print(report.text)
    return 0 if report.healthy else 1


def _cluster(argv: Sequence[str]) -> int:
    from kudusql.cluster.launcher import STATE_FILE, MiniCluster

    args = _cluster_parser().parse_args(argv)
    if args.action == "ksck":
        return _ksck(args)
    if args.action == "start":
        if args.tservers < 1 or args.masters < 1:
            print("kudusql cluster: --tservers and --masters are at least 1", file=sys.stderr)
            return 2
        flags = {"master_flags": args.master_flag, "tserver_flags": args.tserver_flag}
        cluster = MiniCluster(args.dir, tls=args.tls, masters=args.masters, **flags)
        cluster.start(args.tservers)
        print(cluster.master_address)
        tls = f" and tls_ca={cluster.tls_ca}" if cluster.tls_ca else ""
        print(
            f"connect with kudusql://{cluster.master_address}, secret_file="
            f"{cluster.secret_file}{tls} (or export KUDUSQL_SECRET_FILE)",
            file=sys.stderr,
        )
        return 0
    cluster = MiniCluster(args.dir)
    if cluster.master is None:
        print(f"kudusql cluster: no cluster in {args.dir} (no {STATE_FILE})", file=sys.stderr)
        return 1
    if args.action == "stop":
        cluster.stop()
        print(f"stopped the cluster in {args.dir}")
        return 0
    running = {d.pid for d in cluster.running()}
    if len(cluster.masters) > 1:
        for d in cluster.masters:
            status = cluster.master_status(d)
            role = "down" if d.pid not in running else "running, not answering"
            if status is not None:
                role = f"{status.role} (term {status.term})"
            print(f"master {d.address} {role}")
        master_state = "running" if cluster.leader_master() is not None else "down"
        if master_state == "down":
            print("no leader master: a majority of the masters must be up")
    else:
        master_state = "running" if cluster.master.pid in running else "down"
        print(f"master {cluster.master.address} {master_state}")
    if master_state == "down":
        for d in cluster.tservers:
            up = "running" if d.pid in running else "down"
            print(f"tserver {d.address} {up}")
        return 1
    servers = cluster.tablet_servers()
    print(f"{'uuid':<32}  {'address':<21}  {'live':<4}  {'last heartbeat':>14}  tablets")
    for s in servers:
        live = "yes" if s.live else "no"
        ago = f"{s.seconds_since_heartbeat:.1f} s ago"
        print(f"{s.uuid:<32}  {s.address:<21}  {live:<4}  {ago:>14}  {s.tablet_count}")
    return 0


def main(argv: Sequence[str]) -> int:
    """Run ``argv`` (its first item is one of ``COMMANDS``); the exit code."""
    command, rest = argv[0], list(argv[1:])
    try:
        if command == "master":
            from kudusql.cluster.master.__main__ import main as master_main

            return master_main(rest)
        if command == "tserver":
            from kudusql.cluster.tserver.__main__ import main as tserver_main

            return tserver_main(rest)
        return _cluster(rest)
    except Error as exc:
        print(f"kudusql {command}: {exc}", file=sys.stderr)
        return 1
