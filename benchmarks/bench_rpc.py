"""Latency of one cluster RPC: a ping round trip, with and without TLS.

Run: ``python -m benchmarks.bench_rpc [--calls N]``. It starts the test server
(``tests/cluster/rpc_test_server.py``) as a separate process on a loopback port, with
the cluster secret, once in plain TCP and once with a self-signed TLS certificate, and
times ``RpcClient.ping()`` (a Flight action carrying the secret header and a JSON
envelope each way) from one reused client. It prints p50 and p99 and asserts nothing:
the floor under every control call and point lookup of the cluster.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.security import generate_self_signed, write_secret_file
from tests.cluster.servers import running_server

SECRET = "bench-secret"


def measure(client: RpcClient, calls: int) -> tuple[float, float]:
    for _ in range(200):  # warm-up: connection, TLS session, code paths
        client.ping()
    times = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter_ns()
        client.ping()
        times[i] = time.perf_counter_ns() - start
    p50, p99 = np.percentile(times, [50, 99]) / 1000
    return float(p50), float(p99)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_rpc")
    p.add_argument("--calls", type=int, default=3000)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_secret_file(work / "secret", SECRET)
        tls = generate_self_signed(work / "tls")
        print(f"ping round trip, {args.calls} calls, one reused client (µs)")
        print(f"{'transport':<10} {'p50':>8} {'p99':>8}")
        for name, tls_dir in (("plain", None), ("TLS", work / "tls")):
            with running_server(
                work, secret_file=work / "secret", tls_dir=tls_dir, name=name
            ) as server:
                root = tls.certificate if tls_dir else None
                with RpcClient(server.address, secret=SECRET, tls_root=root) as client:
                    p50, p99 = measure(client, args.calls)
            print(f"{name:<10} {p50:>8.0f} {p99:>8.0f}")


if __name__ == "__main__":
    main()
