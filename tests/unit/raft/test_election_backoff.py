"""controller.quorum.election.backoff.max.ms in the core: a candidate whose election failed (it timed out, or a
majority refused it) waits a random backoff, growing with each failure in a row, before it stands again.

Node 1 draws the top of every range (`TopOfRange`), so its election timeout and its backoffs are exact:
the timeout is 599 ms and the n-th backoff in a row min(50 * (2**n - 1), max) + 49 ms."""

from __future__ import annotations

from moldau.raft import BeginEpoch, Config, Message, PersistedState, RaftNode, Role, VoteRequest, VoteResponse
from tests.unit.raft.harness import LATE_MS, TopOfRange, sent

CONFIG = Config(election_timeout_ms_min=300, election_timeout_ms_max=600, election_backoff_max_ms=300)
TIMEOUT_MS = 599


def backoff_ms(failures_in_a_row: int) -> int:
    return min(50 * ((1 << failures_in_a_row) - 1), CONFIG.election_backoff_max_ms) + 49


def voter() -> RaftNode:
    return RaftNode(1, frozenset({1, 2, 3}), PersistedState(), TopOfRange(), 0, CONFIG)


def pre_votes(messages: list[Message]) -> list[VoteRequest]:
    return [m for m in messages if isinstance(m, VoteRequest) and m.pre_vote]


def stand(node: RaftNode, now_ms: int) -> None:
    """Time out at `now_ms` and become the candidate of the next term."""
    node.tick(now_ms)
    assert pre_votes(sent(node)), "the node did not stand"
    win_pre_vote(node, now_ms)


def win_pre_vote(node: RaftNode, now_ms: int) -> None:
    """Get node 2's pre-vote: the prospective node becomes the candidate of the next term."""
    node.on_message(VoteResponse(2, 1, node.term, True, pre_vote=True), now_ms)  # a voter answers in its term
    assert node.role is Role.CANDIDATE
    sent(node)  # its vote requests are lost


def next_stand_ms(node: RaftNode, start_ms: int) -> int:
    """Tick every millisecond from `start_ms`; the first time the node pre-votes again."""
    for now in range(start_ms, start_ms + 5_000):
        node.tick(now)
        if pre_votes(sent(node)):
            return now
    raise AssertionError("the node never stood again")


def test_a_timed_out_election_is_followed_by_a_backoff_before_the_next() -> None:
    node = voter()
    stand(node, LATE_MS)
    again = next_stand_ms(node, LATE_MS + 1)
    assert again == LATE_MS + TIMEOUT_MS + backoff_ms(1)
    assert node.role is Role.PROSPECTIVE and node.term == 1


def test_a_candidate_refused_by_a_majority_backs_off_at_once() -> None:
    node = voter()
    stand(node, LATE_MS)
    node.on_message(VoteResponse(2, 1, 1, False, pre_vote=False), LATE_MS + 5)
    node.tick(LATE_MS + 5)
    assert not pre_votes(sent(node))  # one refusal of three: a majority is still possible
    node.on_message(VoteResponse(3, 1, 1, False, pre_vote=False), LATE_MS + 7)
    assert next_stand_ms(node, LATE_MS + 7) == LATE_MS + 7 + backoff_ms(1)  # well before the timeout


def test_the_backoff_grows_with_each_failed_election_up_to_the_maximum() -> None:
    node = voter()
    stand(node, LATE_MS)
    now, waits = LATE_MS, []
    for _ in range(4):
        again = next_stand_ms(node, now + 1)
        waits.append(again - now - TIMEOUT_MS)
        now = again
        win_pre_vote(node, now)
    assert waits == [99, 199, 349, 349] == [backoff_ms(n) for n in (1, 2, 3, 4)]
    assert node.term == 5


def test_following_a_leader_resets_the_backoff() -> None:
    node = voter()
    stand(node, LATE_MS)
    now = next_stand_ms(node, LATE_MS + 1)
    win_pre_vote(node, now)
    now = next_stand_ms(node, now + 1)  # two failures: the next backoff would be 349 ms
    node.on_message(BeginEpoch(3, 1, 3), now)  # node 3 leads epoch 3
    assert node.role is Role.FOLLOWER and node.leader_id == 3
    stand(node, now + TIMEOUT_MS)  # node 3 went silent
    assert next_stand_ms(node, now + TIMEOUT_MS + 1) == now + 2 * TIMEOUT_MS + backoff_ms(1)


def test_a_backing_off_candidate_still_wins_with_late_votes() -> None:
    node = voter()
    stand(node, LATE_MS)
    node.tick(LATE_MS + TIMEOUT_MS)  # timed out: backing off
    node.on_message(VoteResponse(3, 1, 1, True, pre_vote=False), LATE_MS + TIMEOUT_MS + 1)
    assert node.role is Role.LEADER and node.term == 1
