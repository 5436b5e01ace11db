"""The tablet server's outbound Raft traffic (Kudu's Peer / ConsensusProxy, one-way):
``PeerMessenger`` queues the consensus messages of every hosted replica per destination
tablet server and sends them with one thread per destination over ``RpcClient`` as
``tserver_consensus`` calls.

Invariants:

- ``send`` never blocks and never calls into a replica: it is the replicas' transport,
  called with a replica's lock held. A full queue, or a destination whose address is
  unknown, drops the message (Raft resends: heartbeats, retried votes);
- a destination's messages leave in the order they were queued; each call carries the
  consecutive messages of one tablet;
- a call is tried once with a bounded timeout: a down or slow peer costs its own thread
  that long, and the messages of that call are dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.routes import Route
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.tserver.consensus_wire import encode_message
from kudusql.cluster.tserver.messages import ConsensusRequest
from kudusql.common.errors import Error
from kudusql.consensus.messages import ConsensusMessage

__all__ = ["PeerMessenger"]

log = logging.getLogger(__name__)

#: Messages queued for one destination before new ones are dropped.
MAX_QUEUED = 1024
#: Messages sent in one pass of a destination's thread.
MAX_BATCH = 64
#: Seconds between two log lines about the same unreachable destination.
_LOG_EVERY = 10.0


class _Destination:
    """One peer tablet server: its queue, client and sender thread."""

    def __init__(self, messenger: PeerMessenger, uuid: str, address: str) -> None:
        self.messenger = messenger
        self.uuid = uuid
        self.address = address
        self.client = messenger.client_for(address)
        self.queue: deque[tuple[str, ConsensusMessage]] = deque()
        self.changed = threading.Condition()
        self.stopped = False
        self.dropped = 0
        self.logged_at = 0.0
        self.thread = threading.Thread(target=self._run, name=f"peer-{uuid}", daemon=True)
        self.thread.start()

    def put(self, tablet_id: str, message: ConsensusMessage) -> None:
        with self.changed:
            if self.stopped:
                return
            if len(self.queue) >= self.messenger.max_queued:
                self.dropped += 1
                return
            self.queue.append((tablet_id, message))
            self.changed.notify()

    def readdress(self, address: str) -> None:
        with self.changed:
            if address == self.address:
                return
            old, self.client = self.client, self.messenger.client_for(address)
            self.address = address
        old.close()

    def stop(self) -> None:
        with self.changed:
            self.stopped = True
            self.queue.clear()
            self.changed.notify()

    def _run(self) -> None:
        while True:
            with self.changed:
                while not self.queue and not self.stopped:
                    self.changed.wait()
                if self.stopped:
                    break
                batch = [self.queue.popleft() for _ in range(min(MAX_BATCH, len(self.queue)))]
                client = self.client
            for tablet_id, messages in _runs(batch):
                self._call(client, tablet_id, messages)
        self.client.close()

    def _call(self, client: RpcClient, tablet_id: str, messages: list[ConsensusMessage]) -> None:
        sender = self.messenger.sender
        request = ConsensusRequest(
            tablet_id,
            [encode_message(m) for m in messages],
            None if sender is None else sender[0],
            None if sender is None else sender[1],
        )
        try:
            client.call(request, idempotent=False, timeout=self.messenger.timeout)
        except Exception as exc:
            # Raft resends what is lost; say so now and then, not on every heartbeat. An
            # error that is not a kudusql one is a bug: logged with its traceback, and
            # the thread goes on (it is the destination's only sender).
            now = time.monotonic()
            if now - self.logged_at >= _LOG_EVERY:
                self.logged_at = now
                log.log(
                    logging.INFO if isinstance(exc, Error) else logging.ERROR,
                    "consensus messages of tablet %s to tablet server %s (%s) dropped: %s",
                    tablet_id,
                    self.uuid,
                    self.address,
                    exc,
                    exc_info=not isinstance(exc, Error),
                )


def _runs(
    batch: list[tuple[str, ConsensusMessage]],
) -> list[tuple[str, list[ConsensusMessage]]]:
    """The batch cut into runs of consecutive messages of one tablet, in order."""
    runs: list[tuple[str, list[ConsensusMessage]]] = []
    for tablet_id, message in batch:
        if runs and runs[-1][0] == tablet_id:
            runs[-1][1].append(message)
        else:
            runs.append((tablet_id, [message]))
    return runs


class PeerMessenger:
    """Sends the hosted replicas' consensus messages to peer tablet servers."""

    def __init__(
        self,
        *,
        secret: str | None = None,
        tls_root: str | None = None,
        timeout: float = 2.0,
        max_queued: int = MAX_QUEUED,
        route: Route | None = None,
    ) -> None:
        """``route``: where to dial a peer's address (tests reroute through proxies)."""
        self.secret = secret
        self.route: Route = route or (lambda address: address)
        self.tls_root = tls_root
        self.timeout = timeout
        self.max_queued = max_queued
        self._lock = threading.Lock()
        self._addresses: dict[str, str] = {}
        self._destinations: dict[str, _Destination] = {}
        self._closed = False
        self.sender: tuple[str, str] | None = None

    def client_for(self, address: str, *, timeout: float | None = None) -> RpcClient:
        """A client of the peer at ``address`` (one attempt per call)."""
        seconds = self.timeout if timeout is None else timeout
        return RpcClient(
            self.route(address),
            secret=self.secret,
            tls_root=self.tls_root,
            server_kind="tablet server",
            timeout=seconds,
            retry=RetryPolicy(max_attempts=1, deadline=seconds),
        )

    def identify(self, uuid: str, address: str) -> None:
        """This server's uuid and address, sent with every call so a peer that does not
        know this server yet (a tablet copy's destination) can answer it."""
        self.sender = (uuid, address)

    def set_address(self, uuid: str, address: str) -> None:
        """Where tablet server ``uuid`` listens (from a replicated tablet's peers)."""
        with self._lock:
            self._addresses[uuid] = address
            dest = self._destinations.get(uuid)
        if dest is not None:
            dest.readdress(address)

    def address_of(self, uuid: str) -> str | None:
        with self._lock:
            return self._addresses.get(uuid)

    def send(self, tablet_id: str, message: ConsensusMessage) -> None:
        """Queue ``message`` for its ``dest_uuid`` (a replica's transport); never blocks."""
        uuid = message.dest_uuid
        with self._lock:
            if self._closed:
                return
            dest = self._destinations.get(uuid)
            if dest is None:
                address = self._addresses.get(uuid)
                if address is None:
                    return  # unknown peer: dropped, as a message to a down one
                dest = _Destination(self, uuid, address)
                self._destinations[uuid] = dest
        dest.put(tablet_id, message)

    def close(self) -> None:
        """Stop every sender; queued messages are dropped."""
        with self._lock:
            self._closed = True
            dests, self._destinations = list(self._destinations.values()), {}
        for dest in dests:
            dest.stop()
        for dest in dests:
            dest.thread.join(self.timeout + 1.0)
