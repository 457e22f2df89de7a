"""The share-partition simulation holds its rules over many seeds."""

from __future__ import annotations

import pytest

from tests.sim.share_simulation import ShareSimulation

SEEDS = 300


@pytest.mark.parametrize("seed", range(SEEDS))
def test_share_partition_simulation(seed: int) -> None:
    ShareSimulation(seed).run()
