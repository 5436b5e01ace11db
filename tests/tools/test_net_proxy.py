"""The partition proxy with real sockets: an echo server, a target the test drives by hand,
a mesh of three servers, and a real Arrow Flight server reached through a proxy."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pyarrow.flight as flight
import pytest

from tests.support.net_proxy import Address, NetProxy, ProxyMesh
from tests.support.timing import scaled

#: How long a test waits to be sure bytes do not arrive (expected to run out).
SILENCE_S = 0.3


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        with contextlib.suppress(OSError):
            while data := self.request.recv(65536):
                self.request.sendall(data)


@contextlib.contextmanager
def echo_server() -> Iterator[Address]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield ("127.0.0.1", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def connect(address: Address) -> socket.socket:
    sock = socket.create_connection(address, timeout=scaled(5))
    return sock


def roundtrip(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    got = bytearray()
    while len(got) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got.extend(chunk)
    return bytes(got)


def assert_silent(sock: socket.socket) -> None:
    sock.settimeout(SILENCE_S)
    with pytest.raises(TimeoutError):
        sock.recv(1)
    sock.settimeout(scaled(5))


def assert_dropped(sock: socket.socket) -> None:
    """The connection ends (reset or EOF) rather than hanging."""
    sock.settimeout(scaled(5))
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""


def assert_reset_on_arrival(address: Address) -> None:
    """A new connection is reset: at connect, or at its first read."""
    try:
        sock = socket.create_connection(address, timeout=scaled(5))
    except ConnectionResetError:
        return
    with sock:
        assert_dropped(sock)


def test_echo_through_the_proxy_including_a_large_payload() -> None:
    with echo_server() as target, NetProxy(target) as proxy:
        with connect(proxy.address) as s:
            assert roundtrip(s, b"hello") == b"hello"
            big = bytes(range(256)) * 8192  # 2 MiB: more than the proxy buffers each way
            assert roundtrip(s, big) == big
        with connect(proxy.address) as s2:
            assert roundtrip(s2, b"again") == b"again"


def test_cut_black_holes_old_and_new_connections_and_heal_restores_new_ones() -> None:
    with echo_server() as target, NetProxy(target) as proxy:
        old = connect(proxy.address)
        assert roundtrip(old, b"before") == b"before"
        proxy.cut()
        old.sendall(b"lost")
        assert_silent(old)
        new = connect(proxy.address)  # accepted, but reaches nothing
        new.sendall(b"nothing")
        assert_silent(new)
        assert proxy.connection_count() == 2
        proxy.heal()
        assert_dropped(old)
        assert_dropped(new)
        with connect(proxy.address) as fresh:
            assert roundtrip(fresh, b"after") == b"after"
        old.close()
        new.close()


def test_cut_with_reset_ends_connections_at_once() -> None:
    with echo_server() as target, NetProxy(target) as proxy:
        old = connect(proxy.address)
        assert roundtrip(old, b"x") == b"x"
        proxy.cut(reset=True)
        assert_dropped(old)
        assert_reset_on_arrival(proxy.address)
        proxy.heal()
        with connect(proxy.address) as fresh:
            assert roundtrip(fresh, b"y") == b"y"
        old.close()


@contextlib.contextmanager
def manual_target() -> Iterator[tuple[Address, socket.socket]]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(scaled(5))
    try:
        yield ("127.0.0.1", listener.getsockname()[1]), listener
    finally:
        listener.close()


@pytest.mark.parametrize("direction", ["a->b", "b->a"])
def test_one_direction_can_be_cut(direction: str) -> None:
    with manual_target() as (target, listener), NetProxy(target) as proxy:
        client = connect(proxy.address)
        server, _ = listener.accept()
        server.settimeout(scaled(5))
        proxy.cut(direction="a->b" if direction == "a->b" else "b->a")
        client.sendall(b"c")
        server.sendall(b"s")
        if direction == "a->b":
            assert_silent(server)
            assert client.recv(1) == b"s"
        else:
            assert server.recv(1) == b"c"
            assert_silent(client)
        proxy.heal()
        assert_dropped(client)
        client.close()
        server.close()


def test_no_target_and_a_dead_target_reset_connections() -> None:
    with NetProxy() as proxy:
        assert_reset_on_arrival(proxy.address)
        with manual_target() as (target, _):
            pass  # closed again: nothing listens there now
        proxy.retarget(target)
        assert_reset_on_arrival(proxy.address)
        with echo_server() as live:
            proxy.retarget(live)
            with connect(proxy.address) as s:
                assert roundtrip(s, b"up") == b"up"


def test_close_leaves_no_thread_or_listener() -> None:
    before = set(threading.enumerate())
    with echo_server() as target:
        proxy = NetProxy(target)
        held = connect(proxy.address)
        assert roundtrip(held, b"x") == b"x"
        proxy.cut()
        proxy.close()
        proxy.close()  # idempotent
        assert_dropped(held)
        held.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(proxy.address, timeout=scaled(5))
        with pytest.raises(RuntimeError, match="is closed"):
            proxy.cut()
    leftover = [t for t in set(threading.enumerate()) - before if t.name.startswith("net-proxy")]
    assert leftover == []


def test_mesh_cuts_pairs_and_isolates_a_server() -> None:
    with contextlib.ExitStack() as stack:
        targets = [stack.enter_context(echo_server()) for _ in range(3)]
        mesh = stack.enter_context(ProxyMesh(3, targets))
        assert len(mesh.proxies) == 6
        with pytest.raises(ValueError, match="no proxy from 1 to 1"):
            mesh.address(1, 1)

        def reaches(i: int, j: int) -> bool:
            with connect(mesh.address(i, j)) as s:
                s.sendall(b"?")
                s.settimeout(SILENCE_S)
                try:
                    return s.recv(1) == b"?"
                except TimeoutError:
                    return False

        mesh.cut(0, 1)
        assert not reaches(0, 1) and reaches(1, 0) and reaches(0, 2)
        mesh.heal_all()
        mesh.isolate(2)
        assert reaches(0, 1) and reaches(1, 0)
        assert not any(reaches(i, j) for i, j in [(0, 2), (2, 0), (1, 2), (2, 1)])
        mesh.heal_all()
        assert all(reaches(i, j) for i, j in mesh.proxies)


class _PingServer(flight.FlightServerBase):
    def do_action(self, context: object, action: flight.Action) -> Iterator[bytes]:
        if action.type == "ping":
            yield b"pong"
        else:
            raise flight.FlightServerError(f"unknown action {action.type}")


def ping(address: Address, timeout_s: float) -> bytes:
    with flight.connect(f"grpc://{address[0]}:{address[1]}") as client:
        return ping_with(client, timeout_s)


def ping_with(client: flight.FlightClient, timeout_s: float) -> bytes:
    options = flight.FlightCallOptions(timeout=timeout_s)
    results = list(client.do_action(flight.Action("ping", b""), options=options))
    return bytes(results[0].body.to_pybytes())


def test_flight_calls_through_a_cut_proxy_time_out_instead_of_hanging() -> None:
    server = _PingServer("grpc://127.0.0.1:0")
    try:
        with NetProxy(("127.0.0.1", server.port)) as proxy:
            client = flight.connect(f"grpc://127.0.0.1:{proxy.port}")
            assert ping_with(client, scaled(5)) == b"pong"
            proxy.cut()
            started = time.monotonic()
            with pytest.raises((flight.FlightTimedOutError, flight.FlightUnavailableError)):
                ping_with(client, 1.0)  # an established channel
            with pytest.raises((flight.FlightTimedOutError, flight.FlightUnavailableError)):
                ping(proxy.address, 1.0)  # a new channel
            assert time.monotonic() - started < scaled(10)  # a bound on a hang, not a speed
            proxy.heal()
            assert ping(proxy.address, scaled(5)) == b"pong"
            # The old channel's connection was reset at heal: its next call may fail once
            # with UNAVAILABLE, then gRPC reconnects.
            with contextlib.suppress(flight.FlightUnavailableError):
                ping_with(client, scaled(5))
            assert ping_with(client, scaled(5)) == b"pong"
            client.close()
    finally:
        server.shutdown()
