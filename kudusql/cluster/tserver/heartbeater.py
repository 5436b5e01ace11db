"""The tablet server's heartbeats to the master (Kudu's ``Heartbeater``).

A thread sends ``TSHeartbeat`` to the master every ``interval`` seconds (0.5 s by
default; Kudu's is 1 s: half of it makes a new server usable sooner and costs one small
call a second more). Each heartbeat carries a tablet report:

- **full** on the first heartbeat of the process and whenever the master answers
  ``needs_full_report`` (a master that restarted, or does not know this incarnation):
  every RUNNING replica with its schema version;
- **incremental** otherwise: the replicas whose schema version changed, or that appeared,
  since the last report the master acknowledged, and the ids of those gone since
  (deleted). A replica is dirty exactly while what the master last acknowledged differs
  from the superblock; the acknowledgement of sequence number N makes what report N
  said the acknowledged view, so a lost heartbeat or answer loses no change.

Sequence numbers start at 1 in each process (the master orders reports by
(incarnation, sequence number), and the incarnation goes up at each start). A failed
heartbeat is logged and retried at the next interval; the master's unresponsive timeout
is what tells it that this server is gone.

With replicated masters the server runs one heartbeater per master (Kudu's): a follower
master refuses with ``NotTheLeader`` (quietly ignored here), the leader processes; a
master that becomes leader asks for a full report, as any master that does not know
this incarnation.
"""

from __future__ import annotations

import logging
import threading

from kudusql.cluster.errors import NotTheLeader
from kudusql.cluster.heartbeat_messages import HeartbeatResponse, ReportedTabletInfo, TSHeartbeat
from kudusql.cluster.retry import RetryPolicy
from kudusql.cluster.rpc_client import RpcClient
from kudusql.cluster.tserver.superblock import RUNNING
from kudusql.cluster.tserver.tablet_manager import TabletManager
from kudusql.common.errors import Error

__all__ = ["DEFAULT_HEARTBEAT_INTERVAL", "Heartbeater"]

log = logging.getLogger(__name__)

#: Seconds between heartbeats.
DEFAULT_HEARTBEAT_INTERVAL = 0.5


#: A tablet as reported: schema version, Raft role and term (None, None: unreplicated).
_Reported = tuple[int, str | None, int | None, tuple[int, tuple[str, ...], tuple[str, ...]] | None]


class Heartbeater:
    """Heartbeats of the server ``uuid`` at ``address`` (its tablets in ``tablets``) to
    the master at ``master_address``; ``start`` then ``stop``."""

    def __init__(
        self,
        tablets: TabletManager,
        *,
        uuid: str,
        address: str,
        master_address: str,
        secret: str | None = None,
        tls_root: str | None = None,
        interval: float = DEFAULT_HEARTBEAT_INTERVAL,
    ) -> None:
        self._tablets = tablets
        self._uuid = uuid
        self._address = address
        self._interval = interval
        timeout = max(2.0, 4 * interval)
        self._master = RpcClient(
            master_address,
            secret=secret,
            tls_root=tls_root,
            server_kind="master",
            timeout=timeout,
            retry=RetryPolicy(max_attempts=1, deadline=timeout),
        )
        self._stop = threading.Event()
        #: Set to heartbeat now rather than at the next interval.
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeater", daemon=True)
        self._sequence = 0
        #: What the master acknowledged: tablet id -> (schema version, Raft role, term);
        #: None: send a full report.
        self._acked: dict[str, _Reported] | None = None
        self._logged_failure = False
        #: The last heartbeat sent (for tests and debugging).
        self.last_sent: TSHeartbeat | None = None

    def start(self) -> None:
        self._thread.start()

    def trigger(self) -> None:
        """Heartbeat as soon as possible: a tablet changed, and the master waits for the
        report that shows it (a CREATE TABLE returns once its tablets are reported)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop heartbeating (the master notices through its unresponsive timeout)."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._master.close()

    def _hosted(self) -> dict[str, _Reported]:
        """Every RUNNING tablet: its schema version and, if replicated, its replica's
        role and term (a change of either is reported, as a new version is)."""
        roles = self._tablets.replica_roles()
        return {
            e.tablet_id: (e.schema_version, *roles.get(e.tablet_id, (None, None, None)))
            for e in self._tablets.superblock.tablets
            if e.state == RUNNING and (not e.replicated or e.tablet_id in roles)
        }

    def heartbeat(self) -> HeartbeatResponse:
        """Send one heartbeat and process its answer (the thread calls this)."""
        hosted = self._hosted()
        self._sequence += 1
        acked = self._acked
        if acked is None:
            updated = hosted
            removed: list[str] = []
        else:
            updated = {t: v for t, v in hosted.items() if acked.get(t) != v}
            removed = sorted(t for t in acked if t not in hosted)
        request = TSHeartbeat(
            uuid=self._uuid,
            address=self._address,
            incarnation=self._tablets.incarnation,
            sequence_number=self._sequence,
            is_incremental=acked is not None,
            updated_tablets=[
                ReportedTabletInfo.of(t, v, role, term, config)
                for t, (v, role, term, config) in sorted(updated.items())
            ],
            removed_tablet_ids=removed,
        )
        self.last_sent = request
        response = self._master.call(request)
        assert isinstance(response, HeartbeatResponse)
        if response.needs_full_report:
            self._acked = None
        elif response.acked_sequence_number == request.sequence_number:
            self._acked = hosted
        return response

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # a trigger from now on is seen by the wait below
            try:
                self.heartbeat()
                if self._logged_failure:
                    log.info("heartbeats to the master at %s succeed again", self._master.address)
                    self._logged_failure = False
            except NotTheLeader:
                pass  # a follower of replicated masters: the leader's heartbeater reports
            except Error as exc:
                if not self._logged_failure:
                    log.warning("heartbeat to the master failed: %s", exc)
                    self._logged_failure = True
            except Exception:
                log.exception("heartbeat failed")
            self._wake.wait(self._interval)
