"""controller.quorum.retry.backoff.ms in the core: after the driver reports a failed request to a peer, the node
sends that peer nothing for the backoff; a vote request of the election under way is asked again after it."""

from __future__ import annotations

from moldau.raft import (
    BeginEpoch,
    Config,
    FetchRequest,
    Message,
    PersistedState,
    RaftNode,
    Role,
    VoteRequest,
    VoteResponse,
)
from tests.unit.raft.harness import LATE_MS, TopOfRange, add_observer, elect, make_nodes, sent

RETRY_MS = 120  # longer than the fetch interval (50 ms), so that it is the backoff that delays a fetch
CONFIG = Config(retry_backoff_ms=RETRY_MS)
Logs = dict[int, tuple[int, list[int]]]
THREE: Logs = {1: (0, []), 2: (0, []), 3: (0, [])}
FIVE: Logs = {i: (0, []) for i in range(1, 6)}


def requests_to(node: RaftNode, peer: int, start_ms: int, end_ms: int) -> list[tuple[int, Message]]:
    """Tick `node` every millisecond in [start_ms, end_ms); each request it sends `peer`, with its time."""
    found = []
    for now in range(start_ms, end_ms):
        node.tick(now)
        found += [(now, m) for m in sent(node) if m.dst == peer]
    return found


def test_a_follower_fetches_from_the_leader_again_only_after_the_backoff() -> None:
    nodes = make_nodes(THREE, CONFIG)
    elect(nodes, 1)
    follower, now = nodes[2], LATE_MS + 100
    follower.tick(now)
    (fetch,) = sent(follower)
    assert isinstance(fetch, FetchRequest) and fetch.dst == 1
    follower.on_request_failed(fetch, now)
    assert sent(follower) == []  # a failure report emits nothing by itself
    fetches = requests_to(follower, 1, now + 1, now + 200)
    assert [t for t, _ in fetches] == [now + RETRY_MS, now + RETRY_MS + CONFIG.fetch_interval_ms]


def test_a_failed_pre_vote_request_is_sent_again_once_the_backoff_passed() -> None:
    node = make_nodes(THREE, CONFIG)[1]
    node.tick(LATE_MS)
    to_2 = next(m for m in sent(node) if m.dst == 2)
    node.on_request_failed(to_2, LATE_MS + 5)
    again = requests_to(node, 2, LATE_MS + 6, LATE_MS + 299)  # before the election timeout can pass
    assert again == [(LATE_MS + 5 + RETRY_MS, to_2)]


def test_a_voter_that_answered_meanwhile_is_not_asked_again() -> None:
    node = make_nodes(FIVE, CONFIG)[1]
    node.tick(LATE_MS)
    to_2 = next(m for m in sent(node) if m.dst == 2)
    node.on_request_failed(to_2, LATE_MS + 5)  # say the answer came on a retried connection after all
    node.on_message(VoteResponse(2, 1, 0, True, pre_vote=True), LATE_MS + 6)
    assert node.role is Role.PROSPECTIVE  # two of five
    assert requests_to(node, 2, LATE_MS + 7, LATE_MS + 299) == []


def test_the_failure_of_a_request_from_another_election_asks_nothing_again() -> None:
    node = make_nodes(THREE, CONFIG)[1]
    node.tick(LATE_MS)
    sent(node)
    old_vote = VoteRequest(1, 2, 1, 0, 0, pre_vote=False)  # this prospective node asks for pre-votes
    node.on_request_failed(old_vote, LATE_MS + 5)
    assert requests_to(node, 2, LATE_MS + 6, LATE_MS + 299) == []


def test_a_new_election_holds_its_request_to_a_peer_backing_off_until_the_backoff_passed() -> None:
    node = make_nodes(THREE, CONFIG)[1]
    node.tick(LATE_MS)
    to_2 = next(m for m in sent(node) if m.dst == 2)
    node.on_request_failed(to_2, LATE_MS)
    node.on_message(VoteResponse(3, 1, 0, True, pre_vote=True), LATE_MS + 1)
    assert node.role is Role.CANDIDATE
    assert [m.dst for m in sent(node) if isinstance(m, VoteRequest)] == [3]  # 2 is held back
    held = requests_to(node, 2, LATE_MS + 2, LATE_MS + 299)
    assert held == [(LATE_MS + RETRY_MS, VoteRequest(1, 2, 1, 0, 0, pre_vote=False))]


def test_a_candidate_backing_off_from_its_election_asks_nobody_again() -> None:
    # Its election backoff is 99 ms (the top of the first range), its retry backoff 20 ms: without the rule,
    # node 4 would be asked again for this election's vote while the candidate backs off.
    node = RaftNode(1, frozenset(FIVE), PersistedState(), TopOfRange(), 0, Config(retry_backoff_ms=20))
    node.tick(LATE_MS)
    for voter in (2, 3):
        node.on_message(VoteResponse(voter, 1, 0, True, pre_vote=True), LATE_MS)
    assert node.role is Role.CANDIDATE
    to_4 = next(m for m in sent(node) if isinstance(m, VoteRequest) and not m.pre_vote and m.dst == 4)
    node.on_request_failed(to_4, LATE_MS + 1)
    for voter in (2, 3, 5):
        node.on_message(VoteResponse(voter, 1, 1, False, pre_vote=False), LATE_MS + 2)  # lost: backing off
    assert requests_to(node, 4, LATE_MS + 3, LATE_MS + 2 + 99) == []


def test_an_observer_skips_voters_backing_off_in_its_rotation() -> None:
    nodes = make_nodes(THREE, CONFIG)
    observer = add_observer(nodes, 4, config=CONFIG)
    observer.tick(LATE_MS)
    (first,) = sent(observer)
    assert isinstance(first, FetchRequest)
    observer.on_request_failed(first, LATE_MS)
    second = next(v for v in (1, 2, 3) if v != first.dst)
    observer.on_request_failed(FetchRequest(4, second, 0, 0, 0), LATE_MS)
    targets = set()
    for step in (1, 2):  # every fetch within the backoff goes to the one voter left
        observer.tick(LATE_MS + step * CONFIG.fetch_interval_ms)
        targets |= {m.dst for m in sent(observer)}
    assert targets == {1, 2, 3} - {first.dst, second}


def test_a_leader_does_not_announce_itself_to_a_voter_backing_off() -> None:
    nodes = make_nodes(THREE, CONFIG)
    elect(nodes, 1)
    leader, interval = nodes[1], CONFIG.begin_epoch_interval_ms
    leader.tick(LATE_MS + interval)  # nobody fetched yet: both followers are announced to again
    announced = [m for m in sent(leader) if isinstance(m, BeginEpoch)]
    assert [m.dst for m in announced] == [2, 3]
    leader.on_request_failed(announced[1], LATE_MS + interval)
    leader.tick(LATE_MS + 2 * interval)  # 3 is backing off until interval + RETRY_MS
    assert [m.dst for m in sent(leader) if isinstance(m, BeginEpoch)] == [2]
    leader.tick(LATE_MS + 3 * interval)
    assert [m.dst for m in sent(leader) if isinstance(m, BeginEpoch)] == [2, 3]
