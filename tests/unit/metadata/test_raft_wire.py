"""The Raft core's messages survive the trip through Kafka's quorum APIs, encoded and decoded by kio."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from moldau.config import Voter
from moldau.metadata import raft_wire as wire
from moldau.metadata.records import TopicRecord
from moldau.raft import (
    BeginEpoch,
    EndEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Snapshot,
    VoteRequest,
    VoteResponse,
)


def through_the_wire(entity: Any) -> Any:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return entity_reader(type(entity))(buffer.getvalue(), 0)[0]


@pytest.mark.parametrize("pre_vote", [True, False])
def test_vote_round_trip(pre_vote: bool) -> None:
    request = VoteRequest(src=2, dst=1, term=7, last_epoch=6, end_offset=42, pre_vote=pre_vote)
    assert wire.decode_vote_request(through_the_wire(wire.encode_vote_request(request, "c")), 1) == request
    answer = VoteResponse(src=1, dst=2, term=7, granted=True, pre_vote=pre_vote, leader_id=3)
    encoded = through_the_wire(wire.encode_vote_response(answer))
    assert wire.decode_vote_response(encoded, 1, 2, pre_vote) == answer


def test_epoch_announcements_round_trip() -> None:
    begin = BeginEpoch(src=3, dst=1, term=9)
    assert wire.decode_begin_epoch(through_the_wire(wire.encode_begin_epoch(begin, "c")), 1) == begin
    end = EndEpoch(src=3, dst=2, term=9)
    assert wire.decode_end_epoch(through_the_wire(wire.encode_end_epoch(end, "c")), 2) == end


def test_fetch_round_trip_with_entries_divergence_and_redirect() -> None:
    request = FetchRequest(src=2, dst=1, term=4, offset=10, last_epoch=3)
    encoded = through_the_wire(wire.encode_fetch_request(request, "c"))
    assert wire.is_metadata_fetch(encoded)
    assert wire.decode_fetch_request(encoded, 1) == request

    entries = (Entry(4, None), Entry(4, (TopicRecord("t", uuid.UUID(int=5)),)))
    full = FetchResponse(src=1, dst=2, term=4, ok=True, offset=10, entries=entries, high_watermark=11,
                         last_epoch=3)
    assert wire.decode_fetch_response(through_the_wire(wire.encode_fetch_response(full, 0)), request) == full
    diverging = FetchResponse(src=1, dst=2, term=4, ok=True, offset=10, entries=(), high_watermark=8,
                              diverging_end=8, last_epoch=3)
    assert wire.decode_fetch_response(through_the_wire(wire.encode_fetch_response(diverging, 0)),
                                      request) == diverging
    snapshot = FetchResponse(src=1, dst=2, term=4, ok=True, offset=10, entries=(), high_watermark=50,
                             snapshot_id=(40, 3), last_epoch=3)
    assert wire.decode_fetch_response(through_the_wire(wire.encode_fetch_response(snapshot, 40)),
                                      request) == snapshot
    redirect = FetchResponse(src=3, dst=2, term=4, ok=False, offset=10, entries=(), high_watermark=0, leader_id=1,
                             last_epoch=3)
    to_follower = FetchRequest(src=2, dst=3, term=4, offset=10, last_epoch=3)
    assert wire.decode_fetch_response(through_the_wire(wire.encode_fetch_response(redirect, 0)),
                                      to_follower) == redirect


def test_answers_give_the_named_leaders_address_in_node_endpoints() -> None:
    """As Kafka's Vote and Fetch answers do: a voter whose own set lacks the leader learns where it is."""
    leader = Voter(3, "127.0.0.1", 9093)
    vote = VoteResponse(src=1, dst=2, term=7, granted=False, pre_vote=True, leader_id=3)
    encoded = through_the_wire(wire.encode_vote_response(vote, leader))
    assert wire.node_endpoints(encoded) == [leader]
    assert wire.decode_vote_response(encoded, 1, 2, True) == vote
    redirect = FetchResponse(src=1, dst=2, term=4, ok=False, offset=10, entries=(), high_watermark=0, leader_id=3)
    assert wire.node_endpoints(through_the_wire(wire.encode_fetch_response(redirect, 0, leader))) == [leader]
    # Unknown, or no leader at all: nothing is given.
    assert wire.node_endpoints(through_the_wire(wire.encode_vote_response(vote))) == []
    assert wire.node_endpoints(through_the_wire(wire.encode_fetch_response(redirect, 0, Voter(3, "h", 0)))) == []


def test_corrupt_fetched_entries_are_refused() -> None:
    data = bytearray(wire.encode_entries(0, (Entry(1, (TopicRecord("t", uuid.UUID(int=1)),)),)))
    data[-2] ^= 0x01
    with pytest.raises(wire.WireError):
        wire.decode_entries(0, bytes(data))
    with pytest.raises(wire.WireError):
        wire.decode_entries(5, wire.encode_entries(0, (Entry(1, None),)))  # not the offset asked for


def test_snapshot_chunks() -> None:
    request = FetchSnapshotRequest(src=2, dst=1, term=4, end_offset=40, last_epoch=3)
    decoded, position = wire.decode_fetch_snapshot_request(
        through_the_wire(wire.encode_fetch_snapshot_request(request, "c", 5)), 1)
    assert (decoded, position) == (request, 5)
    answer = FetchSnapshotResponse(src=1, dst=2, term=4, ok=True, snapshot=Snapshot(40, 3, b"0123456789"))
    chunk = wire.decode_fetch_snapshot_chunk(through_the_wire(wire.encode_fetch_snapshot_response(answer, 5, 3,
                                                                                                  1)))
    assert chunk[2:] == (40, 3, 10, b"567")
