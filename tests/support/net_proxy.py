"""Loopback TCP proxies that a fault test cuts and heals to make network partitions.

What it owns: forwarding bytes between a client ("a", the side that connects) and a
target server ("b") through 127.0.0.1, and dropping that path on command.

- ``NetProxy`` listens on 127.0.0.1 at an ephemeral port and forwards each accepted
  connection to its target. ``cut()`` makes it a black hole, the way a real partition
  looks to gRPC: open connections stop passing bytes in both directions (the bytes
  wait, unread, in kernel buffers, as unacknowledged segments would), and new
  connections are accepted but reach nothing, so calls hang until their deadline.
  ``cut(reset=True)`` instead resets every connection at once and resets new ones on
  arrival. ``cut(direction="a->b")`` / ``"b->a"`` stops one direction only. ``heal()``
  resets the connections that were black-holed (a partition that outlived TCP's
  patience: the client sees a reset and reconnects) and forwards new connections again.
  ``retarget()`` points the proxy at a server that restarted on another port; with no
  target, new connections are reset (a server that is down).
- ``ProxyMesh`` holds one proxy per ordered pair (i, j) of N servers: server i talks to
  server j at ``mesh.address(i, j)``, so a test can cut one pair, partition two servers
  or isolate one.

Each proxy runs one thread with a ``selectors`` loop over non-blocking sockets; every
control call (cut, heal, retarget, close) runs inside that loop and returns once it has
taken effect, so after ``cut()`` returns no further byte is forwarded. Invariant: only
the loop thread touches sockets and link state.
"""

from __future__ import annotations

import contextlib
import queue
import selectors
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Address = tuple[str, int]
Direction = Literal["both", "a->b", "b->a"]

#: Bytes buffered per direction before the proxy stops reading the sender.
_BUFFER_LIMIT = 1 << 20
_CHUNK = 1 << 16
#: How long connecting to the target may take (the loop waits for it; loopback only).
_CONNECT_TIMEOUT_S = 1.0


def _reset(sock: socket.socket) -> None:
    """Close with an RST rather than a FIN (SO_LINGER 0), as a dropped connection would."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@dataclass(eq=False)
class _Link:
    """One proxied connection: client socket ``a``, target socket ``b`` (None if never
    connected), the bytes read but not yet written each way, and end-of-stream flags."""

    a: socket.socket
    b: socket.socket | None
    a2b: bytearray = field(default_factory=bytearray)
    b2a: bytearray = field(default_factory=bytearray)
    a_eof: bool = False
    b_eof: bool = False
    b_shut: bool = False
    a_shut: bool = False
    #: Set when a cut touched this link; heal resets it.
    stalled: bool = False


class NetProxy:
    """A cuttable TCP forwarder from ``address`` (127.0.0.1, ephemeral port) to a target."""

    def __init__(self, target: Address | None = None, *, name: str = "") -> None:
        self._target = target
        self._cut_a2b = False
        self._cut_b2a = False
        self._reset_mode = False
        self._links: set[_Link] = set()
        self._commands: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]] = (
            queue.SimpleQueue()
        )
        self._closed = False
        self._error: BaseException | None = None
        self._sel = selectors.DefaultSelector()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._listener.setblocking(False)
        self.address: Address = ("127.0.0.1", self._listener.getsockname()[1])
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(
            target=self._run, name=f"net-proxy-{name or self.address[1]}", daemon=True
        )
        self._thread.start()

    # --- control (any thread) -----------------------------------------------------------

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def target(self) -> Address | None:
        return self._target

    def connection_count(self) -> int:
        """Connections currently held open (forwarding or black-holed)."""
        counted: list[int] = []
        self._call(lambda: counted.append(len(self._links)))
        return counted[0]

    def cut(self, *, direction: Direction = "both", reset: bool = False) -> None:
        """Stop forwarding: black-hole (default) or reset (``reset=True``) connections.

        ``direction`` limits a black hole to client-to-target ("a->b") or
        target-to-client ("b->a") bytes; ``reset`` always means both directions.
        """
        if reset and direction != "both":
            raise ValueError("cut(reset=True) resets whole connections: direction must be 'both'")
        if direction not in ("both", "a->b", "b->a"):
            raise ValueError(f"direction must be 'both', 'a->b' or 'b->a', not {direction!r}")
        self._call(lambda: self._do_cut(direction, reset))

    def heal(self) -> None:
        """Forward new connections again; black-holed connections are reset now."""
        self._call(self._do_heal)

    def retarget(self, target: Address | None) -> None:
        """Send new connections to ``target`` (None: reset them); open ones stay as they are."""
        self._call(lambda: setattr(self, "_target", target))

    def close(self) -> None:
        """Reset every connection, close the listener and stop the thread (idempotent)."""
        if self._closed:
            return
        self._call(self._do_close)
        self._thread.join()

    def __enter__(self) -> NetProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, fn: Callable[[], None]) -> None:
        if self._closed:
            raise RuntimeError(f"proxy {self.address} is closed")
        done = threading.Event()
        self._commands.put((fn, done))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")
        while not done.wait(0.1):
            if not self._thread.is_alive():
                if self._error is not None:
                    raise RuntimeError(f"proxy {self.address} loop died: {self._error!r}")
                raise RuntimeError(f"proxy {self.address} is closed")

    # --- the loop (its own thread) ------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closed:
                for key, mask in self._sel.select(timeout=1.0):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        self._drain_commands()
                    else:
                        link = key.data
                        if link in self._links:
                            self._service(link, key.fileobj, mask)
                    if self._closed:
                        break
        except BaseException as e:  # surfaced to the next control call
            self._error = e
            self._do_close()
            raise
        finally:
            self._sel.close()
            self._wake_r.close()
            self._wake_w.close()

    def _drain_commands(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass
        while True:
            try:
                fn, done = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                fn()
            finally:
                done.set()

    def _accept(self) -> None:
        while True:
            try:
                a, _ = self._listener.accept()
            except BlockingIOError:
                return
            if self._reset_mode:
                _reset(a)
                continue
            a.setblocking(False)
            b: socket.socket | None = None
            blackholed = self._cut_a2b and self._cut_b2a
            if not blackholed:
                if self._target is None:
                    _reset(a)
                    continue
                try:
                    b = socket.create_connection(self._target, timeout=_CONNECT_TIMEOUT_S)
                except OSError:
                    _reset(a)
                    continue
                b.setblocking(False)
                b.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(a, b, stalled=self._cut_a2b or self._cut_b2a)
            self._links.add(link)
            self._update(link)

    def _want(self, link: _Link) -> tuple[int, int]:
        """The selector events each socket of ``link`` waits for now."""
        a_ev = b_ev = 0
        if link.b is not None:
            if not self._cut_a2b:
                if not link.a_eof and len(link.a2b) < _BUFFER_LIMIT:
                    a_ev |= selectors.EVENT_READ
                if link.a2b:
                    b_ev |= selectors.EVENT_WRITE
            if not self._cut_b2a:
                if not link.b_eof and len(link.b2a) < _BUFFER_LIMIT:
                    b_ev |= selectors.EVENT_READ
                if link.b2a:
                    a_ev |= selectors.EVENT_WRITE
        return a_ev, b_ev

    def _update(self, link: _Link) -> None:
        a_ev, b_ev = self._want(link)
        for sock, ev in ((link.a, a_ev), (link.b, b_ev)):
            if sock is None:
                continue
            try:
                registered = self._sel.get_key(sock).events
            except KeyError:
                registered = 0
            if ev == registered:
                continue
            if not ev:
                self._sel.unregister(sock)
            elif not registered:
                self._sel.register(sock, ev, link)
            else:
                self._sel.modify(sock, ev, link)

    def _service(self, link: _Link, sock: object, mask: int) -> None:
        assert link.b is not None
        from_a = sock is link.a
        src = link.a if from_a else link.b
        inbox, outbox = (link.a2b, link.b2a) if from_a else (link.b2a, link.a2b)
        try:
            if mask & selectors.EVENT_READ:
                data = src.recv(_CHUNK)
                if data:
                    inbox.extend(data)
                elif from_a:
                    link.a_eof = True
                else:
                    link.b_eof = True
            if mask & selectors.EVENT_WRITE and outbox:
                sent = src.send(outbox)
                del outbox[:sent]
            # A side that ended its stream ends the other side's once its bytes are out.
            if link.a_eof and not link.a2b and not link.b_shut:
                link.b.shutdown(socket.SHUT_WR)
                link.b_shut = True
            if link.b_eof and not link.b2a and not link.a_shut:
                link.a.shutdown(socket.SHUT_WR)
                link.a_shut = True
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._drop(link, reset=True)
            return
        if link.a_shut and link.b_shut:
            self._drop(link, reset=False)
        else:
            self._update(link)

    def _drop(self, link: _Link, *, reset: bool) -> None:
        self._links.discard(link)
        for sock in (link.a, link.b):
            if sock is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(sock)
            if reset:
                _reset(sock)
            else:
                sock.close()

    def _do_cut(self, direction: Direction, reset: bool) -> None:
        if reset:
            self._reset_mode = True
            for link in list(self._links):
                self._drop(link, reset=True)
            return
        if direction in ("both", "a->b"):
            self._cut_a2b = True
        if direction in ("both", "b->a"):
            self._cut_b2a = True
        for link in self._links:
            link.stalled = True
            self._update(link)

    def _do_heal(self) -> None:
        self._cut_a2b = self._cut_b2a = self._reset_mode = False
        for link in [link for link in self._links if link.stalled]:
            self._drop(link, reset=True)

    def _do_close(self) -> None:
        self._closed = True
        for link in list(self._links):
            self._drop(link, reset=True)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(self._listener)
        self._listener.close()


class ProxyMesh:
    """One ``NetProxy`` per ordered pair (i, j), i != j, of ``n`` servers.

    Server i reaches server j at ``address(i, j)``; cutting (i, j) stops the
    connections i opens to j (both directions of their bytes), not those j opens to i.
    """

    def __init__(self, n: int, targets: Sequence[Address | None] | None = None) -> None:
        if targets is not None and len(targets) != n:
            raise ValueError(f"{len(targets)} targets for {n} servers")
        self.n = n
        self.proxies: dict[tuple[int, int], NetProxy] = {}
        try:
            for i in range(n):
                for j in range(n):
                    if i != j:
                        target = None if targets is None else targets[j]
                        self.proxies[i, j] = NetProxy(target, name=f"{i}->{j}")
        except BaseException:
            self.close()
            raise

    def address(self, i: int, j: int) -> Address:
        """Where server i connects to reach server j."""
        return self._proxy(i, j).address

    def set_target(self, j: int, target: Address | None) -> None:
        """Server j now listens at ``target`` (e.g. restarted on another port)."""
        for i in range(self.n):
            if i != j:
                self.proxies[i, j].retarget(target)

    def cut(self, i: int, j: int, *, reset: bool = False) -> None:
        """Connections from i to j stop (j can still reach i)."""
        self._proxy(i, j).cut(reset=reset)

    def partition(self, i: int, j: int, *, reset: bool = False) -> None:
        """i and j cannot reach each other."""
        self.cut(i, j, reset=reset)
        self.cut(j, i, reset=reset)

    def split(self, side: Iterable[int], *, reset: bool = False) -> None:
        """Servers in ``side`` and all the others cannot reach each other."""
        inside = set(side)
        for i in inside:
            for j in range(self.n):
                if j not in inside:
                    self.partition(i, j, reset=reset)

    def isolate(self, i: int, *, reset: bool = False) -> None:
        """Server i can reach no one and no one can reach it."""
        self.split([i], reset=reset)

    def heal(self, i: int, j: int) -> None:
        self._proxy(i, j).heal()

    def heal_all(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.close()

    def __enter__(self) -> ProxyMesh:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _proxy(self, i: int, j: int) -> NetProxy:
        if i == j or (i, j) not in self.proxies:
            raise ValueError(f"no proxy from {i} to {j} in a mesh of {self.n}")
        return self.proxies[i, j]
