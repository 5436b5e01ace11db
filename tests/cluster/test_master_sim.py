"""The master's catalog and DDL protocol under the deterministic simulator: many seeds,
faults everywhere, safety invariants after every event and liveness at quiescence."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kudusql.cluster.catalog.records import TableState
from kudusql.cluster.master_state import MasterState
from kudusql.cluster.sim.simulator import FaultRates, Simulation, SimulationFailure, run_seed


@pytest.mark.parametrize("seed", range(200))
def test_seed_keeps_every_invariant(seed: int) -> None:
    run_seed(seed)


@pytest.mark.parametrize("seed", range(60))
def test_replicated_tables_keep_every_invariant(seed: int) -> None:
    """Tables with 1 and 3 replicas per tablet, four servers, random elections."""
    run_seed(seed, tservers=4, replication=True)


@pytest.mark.parametrize("seed", [2, 3, 20, 22, 32, 154])
def test_re_replication_seeds_that_found_bugs(seed: int) -> None:
    """Seeds that failed while re-replication was built (an evicted replica never
    deleted, an ADD applied by a deposed leader or to a server the record still
    listed, a voter whose create was lost), and seeds that fail when the tablet
    server's delete ignores its compare-and-set (a delayed delete destroying a replica
    copied back to its server since): 2 and 3."""
    run_seed(seed, tservers=4, replication=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1000, 1100))
def test_long_replicated_runs_with_heavy_faults(seed: int) -> None:
    rates = FaultRates(master_crash=0.05, crash_before_send=0.2, tserver_crash=0.05, ddl=0.3)
    run_seed(seed, tservers=5, steps=500, table_names=4, faults=rates, replication=True)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200, 500))
def test_long_runs_with_more_servers_and_tables(seed: int) -> None:
    run_seed(seed, tservers=5, steps=600, table_names=5)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_heavy_faults(seed: int) -> None:
    rates = FaultRates(master_crash=0.08, crash_before_send=0.3, tserver_crash=0.08, ddl=0.3)
    run_seed(seed, steps=400, faults=rates)


def test_a_seed_replays_identically() -> None:
    assert Simulation(7).trace == []
    first, second = run_seed(7), run_seed(7)
    assert first.trace == second.trace
    assert len(first.trace) > 100


def test_a_violation_names_the_seed_and_shows_the_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    # A master that declares a table done without waiting for its tablets' reports.
    def finish_at_once(self: MasterState, table_id: str, batch: Any) -> None:
        table = self._tables[table_id]
        if table.state is not TableState.REMOVED:
            batch.put(replace(table, state=TableState.RUNNING))

    monkeypatch.setattr(MasterState, "_maybe_finish_table", finish_at_once)
    with pytest.raises(SimulationFailure) as failure:
        for seed in range(50):
            run_seed(seed)
    message = str(failure.value)
    assert message.startswith("seed ")
    assert "is RUNNING" in message
    assert "trace (last 200 events):" in message
    assert "master create t" in message or "master heartbeat" in message
