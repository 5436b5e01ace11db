"""The RPC layer against real server processes on ephemeral loopback ports."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from kudusql.cluster.errors import RpcTimedOut, ServiceUnavailable, Unauthenticated
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.rpc_server import RpcServer
from kudusql.cluster.security import generate_self_signed, write_secret_file
from kudusql.common.errors import InternalError, ProgrammingError
from kudusql.common.hybrid_time import from_micros, wall_micros
from tests.cluster.rpc_test_server import (
    Count,
    Fail,
    GetTable,
    PutTable,
    Record,
    Recorded,
    Sleep,
)
from tests.cluster.servers import ServerProcess, running_server, start_server
from tests.support.timing import scaled

SECRET = "test-cluster-secret"
FAST = RetryPolicy(max_attempts=4, initial_backoff=0.02, max_backoff=0.1, deadline=3.0)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rpc")
    write_secret_file(path / "secret", SECRET)
    return path


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[ServerProcess]:
    with running_server(workdir, secret_file=workdir / "secret", name="plain") as process:
        yield process


def client(server: ServerProcess, **kwargs: object) -> RpcClient:
    options: dict[str, object] = {"secret": SECRET, "server_kind": "tablet server"}
    options.update(kwargs)
    return RpcClient(server.address, **options)  # type: ignore[arg-type]


def test_ping_round_trip_propagates_timestamps(server: ServerProcess) -> None:
    with client(server) as c:
        before = from_micros(wall_micros())
        pong = c.ping()
        assert pong.server_kind == "tablet server" and len(pong.server_uuid) == 32
        first = c.observed.value
        assert first is not None and first >= before
        c.ping()
        assert c.observed.value is not None and c.observed.value > first
        # A client that has seen a timestamp ahead of the server's clock (another
        # server's, say) drags this server's clock past it.
        ahead = from_micros(wall_micros() + 2_000_000)
        c.observed.observe(ahead)
        c.ping()
        assert c.observed.value > ahead


def test_put_and_get_an_arrow_table(server: ServerProcess) -> None:
    table = pa.table(
        {"k": pa.array(range(150_000), pa.int64()), "s": [f"r{i}" for i in range(150_000)]}
    )
    with client(server) as c:
        assert c.put(PutTable("lineitem"), table) == Count(150_000)
        assert c.get(GetTable("lineitem")).equals(table)
        assert c.put(PutTable("empty"), table.slice(0, 0)) == Count(0)
        got = c.get(GetTable("empty"))
        assert got.num_rows == 0 and got.schema == table.schema
        with pytest.raises(ProgrammingError, match=r"no table 'missing'"):
            c.get(GetTable("missing"))
        # The same stream, batch by batch as it arrives; an error comes at the open.
        sizes = [batch.num_rows for batch in c.stream(GetTable("lineitem"))]
        assert sum(sizes) == 150_000 and max(sizes) <= 64 * 1024 and len(sizes) > 1
        assert c.stream(GetTable("lineitem")).read_all().equals(table)
        assert c.stream(GetTable("empty")).read_all().num_rows == 0
        with pytest.raises(ProgrammingError, match=r"no table 'missing'"):
            c.stream(GetTable("missing"))


@pytest.mark.parametrize("secret", [None, "wrong-secret", ""])
def test_a_call_without_the_secret_is_refused_and_touches_nothing(
    server: ServerProcess, secret: str | None
) -> None:
    with client(server) as c:
        before = c.call(Recorded())
    with client(server, secret=secret) as intruder:
        for call in (
            lambda: intruder.call(Record("intrusion")),
            lambda: intruder.put(PutTable("intrusion"), pa.table({"a": [1]})),
            lambda: intruder.get(GetTable("lineitem")),
            intruder.ping,
        ):
            with pytest.raises(Unauthenticated, match=r"tablet server 127\.0\.0\.1:\d+ refused"):
                call()
    with client(server) as c:
        assert c.call(Recorded()) == before
        with pytest.raises(ProgrammingError):
            c.get(GetTable("intrusion"))


def test_handler_errors_come_back_typed_and_bugs_do_not_leak(server: ServerProcess) -> None:
    with client(server) as c:
        with pytest.raises(ProgrammingError, match=r"^table 'nope' does not exist$"):
            c.call(Fail("programming"))
        with pytest.raises(InternalError) as info:
            c.call(Fail("bug"))
        message = str(info.value)
        assert f"tablet server {server.address}" in message and "log" in message
        assert "ZeroDivision" not in message and "Traceback" not in message
        assert c.call(Record("after the bug")).count >= 1  # the server still serves
    deadline = time.monotonic() + scaled(5)
    while "ZeroDivisionError" not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "Traceback" in server.log_text() and "ZeroDivisionError" in server.log_text()


def test_a_slow_call_times_out_within_its_bound(server: ServerProcess) -> None:
    # The server answers after 2 s; the error (rather than that answer) is the proof
    # that the 0.3 s bound cut the call. No wall-clock assertion: the machine may be busy.
    expected = r"did not answer test_sleep within 0.3 s"
    with client(server, timeout=0.3) as c, pytest.raises(RpcTimedOut, match=expected):
        c.call(Sleep(2.0))  # not idempotent: one attempt


def test_tls_round_trip_and_plaintext_refused(workdir: Path) -> None:
    tls_dir = workdir / "tls"
    files = generate_self_signed(tls_dir)
    assert files.private_key.stat().st_mode & 0o077 == 0
    with running_server(
        workdir, secret_file=workdir / "secret", tls_dir=tls_dir, name="tls"
    ) as server:
        with client(server, tls_root=files.certificate) as c:
            assert c.ping().server_kind == "tablet server"
            table = pa.table({"a": [1, 2, 3]})
            assert c.put(PutTable("t"), table) == Count(3)
            assert c.get(GetTable("t")).equals(table)
        with client(server, retry=FAST) as plain, pytest.raises(ServiceUnavailable) as info:
            plain.ping()
        assert f"tablet server {server.address} is unavailable" in str(info.value)
        other = generate_self_signed(workdir / "other-tls")
        stranger = client(server, tls_root=other.certificate, retry=FAST)
        with stranger, pytest.raises(ServiceUnavailable, match=r"TLS handshake failed"):
            stranger.ping()


def test_server_down_gives_a_bounded_clear_error_and_restart_recovers(tmp_path: Path) -> None:
    write_secret_file(tmp_path / "secret", SECRET)
    server = start_server(tmp_path, secret_file=tmp_path / "secret", name="restart")
    try:
        c = client(server, retry=FAST)
        c.ping()
        server.kill()
        start = time.monotonic()
        with pytest.raises(ServiceUnavailable) as info:
            c.ping()
        assert time.monotonic() - start < FAST.deadline + scaled(2)  # bounded, not hung
        assert str(info.value).startswith(
            f"tablet server {server.address} is unavailable: connection refused (tried 4 times"
        )
        with pytest.raises(ServiceUnavailable, match=r"unavailable: connection refused$"):
            c.call(Record("x"))  # not idempotent: one attempt, no retry
        server = start_server(
            tmp_path, port=server.port, secret_file=tmp_path / "secret", name="restart"
        )
        assert c.ping().server_kind == "tablet server"  # the same client recovers
        assert c.call(Recorded()) == Count(0)  # a new process: the record never ran
        c.close()
    finally:
        server.stop()


def test_a_server_on_a_reachable_address_refuses_to_start_without_secret_and_tls() -> None:
    with pytest.raises(ProgrammingError, match=r"refusing to listen on 0.0.0.0:0"):
        RpcServer("0.0.0.0:0", secret=SECRET)


def test_a_dropped_connection_does_not_fail_calls_other_threads_are_making(
    server: ServerProcess,
) -> None:
    """A failed call drops the shared connection while other threads' calls are on it;
    theirs still go through (closing it under them raised a raw "FlightClient is closed"
    ArrowInvalid from a write: seen in CI when a tablet server was killed while a
    statement wrote to several of its tablets)."""
    failures: list[BaseException] = []
    with client(server) as c:
        stop = threading.Event()

        def caller() -> None:
            try:
                while not stop.is_set():
                    c.put(PutTable("dropped"), pa.table({"x": [1, 2]}))
            except BaseException as e:  # any error fails the test
                failures.append(e)

        threads = [threading.Thread(target=caller) for _ in range(4)]
        for t in threads:
            t.start()
        for _ in range(300):  # what a failed call does, over and over
            c._reconnect(c._connection())
        stop.set()
        for t in threads:
            t.join()
    assert failures == []
