"""The Raft simulator: many seeds pass every safety check and reach liveness; a seed
replays exactly; with one rule disabled the checks find a violation."""

from __future__ import annotations

import pytest

from kudusql.consensus.raft_consensus import RaftOptions
from kudusql.consensus.sim.simulator import (
    SimOptions,
    Simulation,
    SimulationFailure,
    run_seeds,
    run_varied_seeds,
)

#: A small run per seed keeps the default suite quick.
SMALL = SimOptions(fault_steps=100)


def _unsafe(**flag: bool) -> SimOptions:
    raft = RaftOptions(follower_unavailable_considered_failed_ms=4_000, **flag)
    return SimOptions(fault_steps=150, raft=raft)


def _first_failure(options: SimOptions, seeds: range) -> SimulationFailure | None:
    for seed in seeds:
        try:
            Simulation(seed, options).run()
        except SimulationFailure as failure:
            return failure
    return None


@pytest.mark.parametrize("block", range(3))
def test_seeds_are_safe_and_live(block: int) -> None:
    stats = run_seeds(range(block * 500, (block + 1) * 500), SMALL)
    # The runs did exercise what they check.
    assert stats.elections > 500 and stats.crashes > 100
    assert stats.tablet_copies > 50 and stats.config_changes > 100
    assert stats.writes_acknowledged > 1000


def test_seeds_in_varied_shapes() -> None:
    stats = run_varied_seeds(range(500), max_fault_steps=150)
    assert stats.elections > 500 and stats.writes_acknowledged > 1000


def test_five_voters() -> None:
    stats = run_seeds(range(100), SimOptions(fault_steps=200, initial_voters=5))
    assert stats.elections > 100


def test_without_pre_election_or_eviction() -> None:
    raft = RaftOptions(enable_pre_election=False, evict_failed_followers=False)
    run_seeds(range(100), SimOptions(fault_steps=200, raft=raft))


def test_slow_leader_disks() -> None:
    """Leaders' own writes take up to 400 ms to become durable: deposed leaders often
    hold an unsynced tail, and crashes lose more of it."""
    stats = run_seeds(range(100), SimOptions(fault_steps=200, max_sync_delay_ms=400))
    assert stats.writes_acknowledged > 100


def test_a_run_replays_exactly() -> None:
    first = Simulation(7).run()
    second = Simulation(7).run()
    assert first == second
    assert Simulation(8).run() != first


def test_the_checks_catch_a_vote_without_the_up_to_date_check() -> None:
    failure = _first_failure(_unsafe(test_only_skip_up_to_date_check=True), range(100))
    assert failure is not None
    assert "leader completeness" in failure.violation or "safety" in failure.violation


def test_a_failing_seed_reproduces_with_a_readable_trace() -> None:
    options = _unsafe(test_only_skip_up_to_date_check=True)
    failure = _first_failure(options, range(100))
    assert failure is not None
    with pytest.raises(SimulationFailure) as again:
        Simulation(failure.seed, options).run()
    assert str(again.value) == str(failure)
    text = str(failure)
    assert f"seed {failure.seed}, step {failure.step}" in text
    assert "Vote(" in text and "Update(" in text


@pytest.mark.slow
def test_a_million_simulated_steps() -> None:
    total = run_seeds(range(10_000, 14_000), SimOptions(fault_steps=250)).steps
    long_runs = run_seeds(range(20_000, 20_050), SimOptions(fault_steps=5_000)).steps
    five = run_seeds(range(30_000, 30_300), SimOptions(fault_steps=400, initial_voters=5)).steps
    # Long runs in varied shapes found a follower committing past its matched entries.
    varied = run_varied_seeds(range(40_000, 40_600)).steps
    assert total + long_runs + five + varied >= 1_000_000


def test_seed_16_without_the_up_to_date_check_elects_a_leader_missing_a_commit() -> None:
    """Pinned: ts2 leads term 1 and commits, with ts1, the removal of ts0 (1.4); ts0,
    whose log ends at 1.3, restarts when the faults stop, gets ts2's vote without the
    up-to-date check and leads term 2 without 1.4."""
    with pytest.raises(SimulationFailure) as failure:
        Simulation(16, _unsafe(test_only_skip_up_to_date_check=True)).run()
    assert failure.value.violation == (
        "leader completeness: leader ts0 of term 2 lacks 1.4:CONFIG[ts1,ts2]@4"
    )
    Simulation(16, SMALL).run()


def test_seed_400312_a_deposed_leader_is_not_the_one_checked_at_quiescence() -> None:
    """Pinned (a simulator bug): ts0, the term-1 leader, was cut off and removed from the
    config by ts1, leader of term 2. When the faults stopped ts0 still believed it led,
    and the acknowledged-writes check asked ts0's config instead of ts1's."""
    stats = Simulation(400312, SimOptions(fault_steps=250)).run()
    assert stats.config_changes >= 2 and stats.writes_acknowledged > 0


def test_the_checks_catch_a_leader_serving_reads_without_a_lease() -> None:
    raft = RaftOptions(
        follower_unavailable_considered_failed_ms=4_000,
        max_clock_error_ms=SimOptions().raft.max_clock_error_ms,
        test_only_skip_leader_lease=True,
    )
    failure = _first_failure(SimOptions(fault_steps=250, raft=raft), range(200))
    assert failure is not None
    assert failure.violation.startswith("safe time:")


def test_replicas_claim_safe_times_the_checks_hold_them_to() -> None:
    stats = run_seeds(range(30))
    assert stats.safe_time_claims > 1_000
