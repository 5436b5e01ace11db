"""Tablet reports in heartbeats: full on the first heartbeat and when the master asks,
incremental after, dirty marks cleared only by the master's acknowledgement. An
in-process master and tablet manager."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kudusql.cluster.heartbeat_messages import TSHeartbeat
from kudusql.cluster.master.server import MasterServer
from kudusql.cluster.master_state import MasterOptions
from kudusql.cluster.tserver.heartbeater import Heartbeater
from kudusql.cluster.tserver.tablet_manager import TabletManager
from kudusql.common.errors import OperationalError
from kudusql.common.hybrid_time import HybridClock
from tests.cluster.mini_cluster import partitions_text, schema


@pytest.fixture
def master(tmp_path: Path) -> Iterator[MasterServer]:
    # A long tick: the master sends nothing to the (absent) tablet server by itself.
    server = MasterServer(str(tmp_path / "master"), options=MasterOptions(), tick_interval=60)
    try:
        yield server
    finally:
        server.shutdown()
        server.close()


@pytest.fixture
def tablets(tmp_path: Path) -> Iterator[TabletManager]:
    manager = TabletManager(str(tmp_path / "ts"), clock=HybridClock(), maintenance=False)
    try:
        yield manager
    finally:
        manager.close()


def make_tablet(tablets: TabletManager, tablet_id: str) -> None:
    tablets.create_tablet(
        tablet_id,
        table_id="t",
        table_name="t",
        partition=partitions_text(1)[0],
        schema=schema(),
        schema_version=0,
    )


def test_reports_are_full_then_incremental(master: MasterServer, tablets: TabletManager) -> None:
    sent: list[TSHeartbeat] = []
    beater = Heartbeater(
        tablets, uuid="ts0", address="127.0.0.1:9", master_address=str(master.address)
    )

    def heartbeat() -> None:
        beater.heartbeat()
        assert beater.last_sent is not None
        sent.append(beater.last_sent)

    make_tablet(tablets, "a")
    heartbeat()
    assert not sent[-1].is_incremental and [t.tablet_id for t in sent[-1].updated_tablets] == ["a"]
    heartbeat()
    assert sent[-1].is_incremental and sent[-1].updated_tablets == []
    make_tablet(tablets, "b")
    tablets.alter_tablet("a", schema(extra=True), 1)
    heartbeat()
    assert sent[-1].is_incremental
    assert {(t.tablet_id, t.schema_version) for t in sent[-1].updated_tablets} == {
        ("a", 1),
        ("b", 0),
    }
    tablets.delete_tablet("b")
    heartbeat()
    assert sent[-1].removed_tablet_ids == ["b"] and sent[-1].updated_tablets == []
    assert [s.sequence_number for s in sent] == [1, 2, 3, 4]


def test_a_restarted_master_gets_a_full_report(
    tmp_path: Path, master: MasterServer, tablets: TabletManager
) -> None:
    beater = Heartbeater(
        tablets, uuid="ts0", address="127.0.0.1:9", master_address=str(master.address)
    )
    make_tablet(tablets, "a")
    assert not beater.heartbeat().needs_full_report
    port = master.address.port
    master.shutdown()
    master.close()
    make_tablet(tablets, "b")
    with pytest.raises(OperationalError, match="master"):
        beater.heartbeat()  # lost: the change stays dirty
    again = MasterServer(str(tmp_path / "master"), f"127.0.0.1:{port}", tick_interval=60)
    try:
        # The change is still dirty; the new master does not know this server's
        # incarnation, so it asks for everything, and gets it.
        assert beater.heartbeat().needs_full_report
        assert beater.last_sent is not None and beater.last_sent.is_incremental
        assert [t.tablet_id for t in beater.last_sent.updated_tablets] == ["b"]
        assert not beater.heartbeat().needs_full_report
        assert beater.last_sent is not None and not beater.last_sent.is_incremental
        assert {t.tablet_id for t in beater.last_sent.updated_tablets} == {"a", "b"}
        servers = again._run(lambda st, now: st.tservers())
        assert [s.uuid for s in servers] == ["ts0"]
    finally:
        again.shutdown()
        again.close()
