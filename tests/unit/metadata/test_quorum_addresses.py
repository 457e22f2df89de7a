"""The quorum's address book learns the leaders its peers name, and its answers name where the leader is."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from kio.serial import entity_reader, entity_writer

from moldau.clock import ManualClock
from moldau.config import Voter
from moldau.metadata import raft_wire as wire
from moldau.metadata.quorum import MetadataQuorum
from moldau.raft import Config, Endpoint, FetchResponse, VoteResponse


def through_the_wire(entity: Any) -> Any:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return entity_reader(type(entity))(buffer.getvalue(), 0)[0]


def quorum(tmp_path: Path, node_id: int, voters: list[Voter]) -> MetadataQuorum:
    return MetadataQuorum(node_id, voters, "cluster", str(tmp_path), ManualClock(), Config(), 1 << 20)


def test_a_leader_named_in_an_answer_joins_the_address_book(tmp_path: Path) -> None:
    q = quorum(tmp_path, 5, [Voter(2, "127.0.0.1", 9002), Voter(3, "127.0.0.1", 9003)])
    answer = VoteResponse(src=2, dst=5, term=4, granted=False, pre_vote=True, leader_id=4)
    q._learn_from_answer(through_the_wire(wire.encode_vote_response(answer, Voter(4, "127.0.0.1", 9004))), 4)
    assert q.voters[4] == Voter(4, "127.0.0.1", 9004)
    # A known address is kept: the voter records, not a peer's answer, are the authority on it.
    q._learn_from_answer(through_the_wire(wire.encode_vote_response(answer, Voter(2, "10.0.0.9", 1))), 2)
    assert q.voters[2] == Voter(2, "127.0.0.1", 9002)
    redirect = FetchResponse(src=3, dst=5, term=4, ok=False, offset=0, entries=(), high_watermark=0, leader_id=6)
    q._learn_from_answer(through_the_wire(wire.encode_fetch_response(redirect, 0, Voter(6, "127.0.0.1", 9006))), 6)
    assert q.voters[6] == Voter(6, "127.0.0.1", 9006)
    # Only the leader the answer names is learned: an address for any other node is not taken.
    q._learn_from_answer(through_the_wire(wire.encode_vote_response(answer, Voter(7, "127.0.0.1", 9007))), 4)
    assert 7 not in q.voters


def test_answers_name_our_own_bound_listener_when_we_lead(tmp_path: Path) -> None:
    q = quorum(tmp_path, 1, [Voter(1, "127.0.0.1", 0), Voter(2, "127.0.0.1", 9002)])
    assert q._address(1) == Voter(1, "127.0.0.1", 0)  # not bound yet: the configured entry (port 0 is not sent)
    q.own_endpoints = (Endpoint("CONTROLLER", "127.0.0.1", 9001),)
    assert q._address(1) == Voter(1, "127.0.0.1", 9001)
    assert q._address(2) == Voter(2, "127.0.0.1", 9002) and q._address(7) is None and q._address(None) is None
