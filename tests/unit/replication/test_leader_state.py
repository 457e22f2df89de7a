"""The leader's bookkeeping of followers: high watermark, ISR shrink and expansion, pending proposals."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.replication.leader_state import (
    EXPANSION_BACKOFF_MS,
    UNKNOWN_OFFSET,
    LeaderState,
    ProposalOutcome,
    proposal_outcome,
)

LAG_MS = 1000


def leader(isr: tuple[int, ...] = (1, 2, 3), replicas: tuple[int, ...] = (1, 2, 3), epoch_start: int = 0,
           now_ms: int = 0) -> LeaderState:
    return LeaderState(node_id=1, replicas=replicas, isr=isr, leader_epoch=5, partition_epoch=7,
                       epoch_start_offset=epoch_start, lag_max_ms=LAG_MS, now_ms=now_ms)


def test_high_watermark_is_the_lowest_isr_position_and_unknown_until_every_member_fetched() -> None:
    state = leader()
    assert state.high_watermark(10) == UNKNOWN_OFFSET
    state.on_follower_fetch(2, 8, 10, now_ms=1)
    assert state.high_watermark(10) == UNKNOWN_OFFSET
    state.on_follower_fetch(3, 6, 10, now_ms=1)
    assert state.high_watermark(10) == 6
    state.on_follower_fetch(3, 10, 10, now_ms=2)
    assert state.high_watermark(10) == 8


def test_a_lone_leader_commits_its_whole_log() -> None:
    assert leader(isr=(1,), replicas=(1,)).high_watermark(42) == 42


def test_replicas_outside_the_isr_do_not_hold_the_high_watermark_back() -> None:
    state = leader(isr=(1, 2))
    state.on_follower_fetch(2, 9, 10, now_ms=1)
    assert state.high_watermark(10) == 9


def test_a_follower_lagging_longer_than_the_limit_is_proposed_out() -> None:
    state = leader()
    state.on_follower_fetch(2, 10, 10, now_ms=500)
    state.on_follower_fetch(3, 4, 10, now_ms=500)
    assert state.shrunk_isr(now_ms=1000) is None, "both were caught up within the limit"
    assert state.shrunk_isr(now_ms=1001) == (1, 2), "3 never caught up since the leader started"
    state.on_follower_fetch(2, 10, 10, now_ms=1400)
    assert state.shrunk_isr(now_ms=1600) == (1, 2)


def test_keeping_up_with_a_moving_log_counts_as_caught_up() -> None:
    # Records arrive between fetches, so the follower never reaches the *current* end, but each fetch reaches the
    # end as it was at the previous one: Kafka counts it caught up as of that previous fetch.
    state = leader(isr=(1, 2), replicas=(1, 2))
    end = 10
    for t in range(100, 5000, 100):
        state.on_follower_fetch(2, end, end + 5, now_ms=t)
        end += 5
    assert state.shrunk_isr(now_ms=5000) is None


def test_a_follower_stuck_behind_is_out_even_while_fetching() -> None:
    state = leader(isr=(1, 2), replicas=(1, 2))
    for t in range(100, 3000, 100):
        state.on_follower_fetch(2, 3, 10 + t, now_ms=t)
    assert state.shrunk_isr(now_ms=3000) == (1,)


def test_expansion_needs_the_high_watermark_and_the_epoch_start() -> None:
    state = leader(isr=(1, 2), epoch_start=20)
    state.on_follower_fetch(2, 30, 30, now_ms=1)
    state.on_follower_fetch(3, 15, 30, now_ms=1)
    assert state.expanded_isr(3, high_watermark=10, now_ms=10) is None, "below the start of the leader's epoch"
    state.on_follower_fetch(3, 25, 30, now_ms=2)
    assert state.expanded_isr(3, high_watermark=28, now_ms=10) is None, "below the high watermark"
    assert state.expanded_isr(3, high_watermark=25, now_ms=10) == (1, 2, 3)
    assert state.expanded_isr(2, high_watermark=25, now_ms=10) is None, "already in"


def test_pending_expansion_counts_for_the_high_watermark_but_a_pending_shrink_does_not() -> None:
    state = leader(isr=(1, 2))
    state.on_follower_fetch(2, 10, 10, now_ms=1)
    state.on_follower_fetch(3, 7, 10, now_ms=1)
    assert state.high_watermark(10) == 10
    state.propose((1, 2, 3))
    assert state.high_watermark(10) == 7, "the maximal ISR includes the member being added"
    assert state.shrunk_isr(now_ms=10_000) is None, "one proposal at a time"
    state.on_committed((1, 2, 3), (1, 2, 3), 8, now_ms=2)
    assert state.pending_isr is None and state.isr == (1, 2, 3) and state.partition_epoch == 8


def test_a_refused_proposal_is_forgotten_and_stale_commits_ignored() -> None:
    state = leader()
    state.propose((1, 2))
    state.on_proposal_refused(now_ms=0)
    assert state.pending_isr is None
    state.on_committed((1, 2, 3), (1,), 6, now_ms=0)
    assert state.isr == (1, 2, 3), "an older partition epoch than the one known"


def test_after_a_refusal_no_member_is_proposed_for_a_while() -> None:
    state = leader(isr=(1, 2))
    state.on_follower_fetch(2, 12, 12, now_ms=1)
    state.on_follower_fetch(3, 10, 12, now_ms=1)
    state.propose((1, 2, 3))
    assert state.high_watermark(12) == 10
    state.on_proposal_refused(now_ms=100)
    assert state.high_watermark(12) == 12, "back on the committed ISR at once"
    assert state.expanded_isr(3, high_watermark=10, now_ms=100 + EXPANSION_BACKOFF_MS - 1) is None
    assert state.expanded_isr(3, high_watermark=10, now_ms=100 + EXPANSION_BACKOFF_MS) == (1, 2, 3)


def test_reassignment_adds_and_removes_followers() -> None:
    state = leader()
    state.on_committed((1, 2, 3, 4), (1, 2, 3), 8, now_ms=5)
    assert 4 in state.followers
    state.on_follower_fetch(4, 0, 0, now_ms=6)
    assert state.expanded_isr(4, high_watermark=0, now_ms=10) == (1, 2, 3, 4)
    state.on_committed((1, 4), (1, 4), 9, now_ms=7)
    assert set(state.followers) == {4}


@pytest.mark.parametrize(("error", "answer_epoch", "outcome"), [
    (ErrorCode.none, 5, ProposalOutcome.COMMITTED),
    # Applied, but in a change that also moved leadership (a reassignment completing): not this leader's ISR.
    (ErrorCode.none, 6, ProposalOutcome.AWAIT_METADATA),
    (ErrorCode.new_leader_elected, -1, ProposalOutcome.AWAIT_METADATA),
    (ErrorCode.invalid_update_version, -1, ProposalOutcome.AWAIT_METADATA),
    (ErrorCode.fenced_leader_epoch, -1, ProposalOutcome.AWAIT_METADATA),
    (ErrorCode.not_leader_or_follower, -1, ProposalOutcome.AWAIT_METADATA),
    (ErrorCode.unknown_topic_id, -1, ProposalOutcome.AWAIT_METADATA),
    (ErrorCode.operation_not_attempted, -1, ProposalOutcome.REFUSED),
    (ErrorCode.ineligible_replica, -1, ProposalOutcome.REFUSED),
    # No answer, or one that does not say whether the change was applied.
    (ErrorCode.request_timed_out, -1, ProposalOutcome.RETRY),
    (ErrorCode.not_controller, -1, ProposalOutcome.RETRY),
    (ErrorCode.unknown_server_error, -1, ProposalOutcome.RETRY),
])
def test_only_an_answer_that_says_not_applied_drops_a_pending_proposal(error: ErrorCode, answer_epoch: int,
                                                                       outcome: ProposalOutcome) -> None:
    assert proposal_outcome(error, answer_epoch, leader_epoch=5) is outcome
