"""The share-partition simulation holds its rules over many seeds."""

from __future__ import annotations

import pytest

from tests.sim.share_membership_simulation import MembershipSimulation
from tests.sim.share_simulation import ShareSimulation
from tests.sim.share_state_simulation import DurableShareSimulation

SEEDS = 300
DURABLE_SEEDS = 40
MEMBERSHIP_SEEDS = 50


@pytest.mark.parametrize("seed", range(SEEDS))
def test_share_partition_simulation(seed: int) -> None:
    ShareSimulation(seed).run()


@pytest.mark.parametrize("seed", range(DURABLE_SEEDS))
def test_share_partition_survives_leader_crashes(seed: int) -> None:
    DurableShareSimulation(seed).run()


def test_the_durable_simulation_writes_updates_and_crashes() -> None:
    """The runs above exercise what they claim: leaders crash, and states are replayed from updates."""
    runs = [DurableShareSimulation(seed) for seed in range(8)]
    for run in runs:
        run.run()
    assert sum(r.crashes for r in runs) > 0
    assert sum(r.coordinator_updates() for r in runs) > 0


@pytest.mark.parametrize("seed", range(MEMBERSHIP_SEEDS))
def test_share_group_members_survive_coordinator_restarts(seed: int) -> None:
    MembershipSimulation(seed).run()


def test_the_membership_simulation_restarts_and_expires() -> None:
    """The runs above exercise what they claim: coordinators restart with members, and silent members expire."""
    runs = [MembershipSimulation(seed) for seed in range(8)]
    for run in runs:
        run.run()
    assert sum(r.restarts for r in runs) > 10
    assert all(r.gone for r in runs)
