"""The backoff functions on their own (moldau.raft.backoff), driven by seeded generators."""

from __future__ import annotations

import random

import pytest

from moldau.raft.backoff import ELECTION_BACKOFF_STEP_MS, RetryBackoff, election_backoff_ms

STEP = ELECTION_BACKOFF_STEP_MS
DRAWS = 2_000


def draws(failed_elections: int, max_ms: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    return [election_backoff_ms(failed_elections, max_ms, rng) for _ in range(DRAWS)]


@pytest.mark.parametrize("failed", [1, 2, 3, 4, 5])
def test_the_range_doubles_with_each_failed_election_in_a_row(failed: int) -> None:
    values = draws(failed, max_ms=100_000)
    top = STEP * (2**failed - 1) + STEP - 1  # the most steps, plus the most jitter
    assert min(values) >= 0 and max(values) <= top
    assert max(values) > top - STEP  # the top of the range is reached: it did double
    assert min(values) < STEP  # and the bottom is still a wait of less than one step


def test_the_wait_is_capped_at_the_maximum_plus_a_jitter_under_one_step() -> None:
    values = draws(20, max_ms=1_000)
    assert max(values) < 1_000 + STEP
    at_cap = [v for v in values if v >= 1_000]
    assert len(at_cap) > DRAWS * 0.9  # 2**20 steps: nearly every draw is capped
    assert len(set(at_cap)) > STEP // 2  # the jitter spreads those that reached the cap


def test_a_maximum_of_zero_leaves_only_the_jitter() -> None:
    assert set(draws(3, max_ms=0)) <= set(range(STEP))


def test_the_range_stops_doubling_after_eleven_failures() -> None:
    assert max(draws(40, max_ms=10**9)) <= STEP * 2**11 + STEP


def test_the_same_seed_draws_the_same_waits() -> None:
    assert draws(4, 1_000, seed=3) == draws(4, 1_000, seed=3)


def test_there_is_no_backoff_before_a_failure() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        election_backoff_ms(0, 1_000, random.Random(0))


def test_a_node_is_ready_again_once_the_retry_backoff_passed() -> None:
    retry = RetryBackoff(20)
    assert retry.ready(2, 0)
    retry.failed(2, 100)
    assert not retry.ready(2, 100) and not retry.ready(2, 119) and retry.ready(3, 100)
    assert retry.ready(2, 120) and retry.ready(2, 105)  # once passed, forgotten
    retry.failed(2, 200)
    retry.failed(2, 210)  # a later failure extends it
    assert not retry.ready(2, 225) and retry.ready(2, 230)


def test_a_retry_backoff_of_zero_holds_nothing_back() -> None:
    retry = RetryBackoff(0)
    retry.failed(2, 100)
    assert retry.ready(2, 100)
