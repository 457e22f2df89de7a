"""The follower's direct Fetch encoder produces exactly kio's bytes, and the broker's decoder reads them back."""

from __future__ import annotations

import datetime
import io
import random
import uuid

import pytest
from kio.schema.fetch.v17 import request as fetch_req
from kio.serial import entity_writer

from moldau.net.client import ClientConnection
from moldau.protocol import codec
from moldau.protocol.fetch_request import FetchPosition, encode_replica_fetch

Topics = list[tuple[uuid.UUID, list[FetchPosition]]]
Forgotten = list[tuple[uuid.UUID, list[int]]]


def kio_body(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int, partition_max_bytes: int,
             topics: Topics, session_id: int = 0, session_epoch: int = -1, forgotten: Forgotten | None = None
             ) -> bytes:
    request = codec.make(
        fetch_req.FetchRequest, cluster_id=None,
        replica_state=codec.make(fetch_req.ReplicaState, replica_id=replica_id, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes, max_bytes=max_bytes,
        session_id=session_id, session_epoch=session_epoch,
        topics=tuple(codec.make(fetch_req.FetchTopic, topic_id=topic_id, partitions=tuple(
            codec.make(fetch_req.FetchPartition, partition=p.partition, current_leader_epoch=p.current_leader_epoch,
                       fetch_offset=p.fetch_offset, last_fetched_epoch=p.last_fetched_epoch,
                       log_start_offset=p.log_start_offset, partition_max_bytes=partition_max_bytes,
                       replica_directory_id=None)
            for p in positions)) for topic_id, positions in topics),
        forgotten_topics_data=tuple(codec.make(fetch_req.ForgottenTopic, topic_id=topic_id, partitions=tuple(indexes))
                                    for topic_id, indexes in forgotten or ()),
        rack_id="")
    out = io.BytesIO()
    entity_writer(fetch_req.FetchRequest)(out, request)
    return out.getvalue()


def random_topics(rng: random.Random, topic_count: int) -> Topics:
    return [(uuid.UUID(int=rng.getrandbits(128)), [
        FetchPosition(rng.randrange(2**31), rng.randrange(-1, 2**31), rng.randrange(2**63),
                      rng.randrange(-1, 2**31), rng.randrange(-1, 2**63))
        for _ in range(rng.randrange(0, 200))]) for _ in range(topic_count)]


@pytest.mark.parametrize("seed", range(30))
def test_same_bytes_as_kio(seed: int) -> None:
    rng = random.Random(seed)
    topics = random_topics(rng, rng.randrange(0, 4))
    settings = (rng.randrange(0, 2**31), rng.randrange(0, 60_000), rng.randrange(0, 2**31), rng.randrange(0, 2**31),
                rng.randrange(0, 2**31))
    assert encode_replica_fetch(*settings, topics).body == kio_body(*settings, topics)


@pytest.mark.parametrize("seed", range(30))
def test_same_bytes_as_kio_in_a_session(seed: int) -> None:
    rng = random.Random(seed)
    topics = random_topics(rng, rng.randrange(0, 3))
    forgotten = [(uuid.UUID(int=rng.getrandbits(128)), [rng.randrange(2**31) for _ in range(rng.randrange(0, 50))])
                 for _ in range(rng.randrange(0, 3))]
    settings = (rng.randrange(0, 2**31), rng.randrange(0, 60_000), rng.randrange(0, 2**31), rng.randrange(0, 2**31),
                rng.randrange(0, 2**31))
    session = (rng.randrange(0, 2**31), rng.randrange(-1, 2**31))
    assert (encode_replica_fetch(*settings, topics, *session, forgotten).body
            == kio_body(*settings, topics, *session, forgotten))


def test_the_broker_reads_what_a_follower_sends() -> None:
    topic_id = uuid.uuid4()
    positions = [FetchPosition(0, 7, 1234, 6, 10), FetchPosition(3, 7, 0, -1, 0)]
    request = encode_replica_fetch(2, 500, 1, 10 << 20, 1 << 20, [(topic_id, positions)])
    frame = ClientConnection("127.0.0.1", 1, "moldau-replica-fetcher-2")._encode(request, 42)[4:]
    header = codec.parse_request_header(frame)
    decoded = codec.decode_request(codec.api_schema(header.api_key, header.api_version), frame, header)
    assert (header.api_key, header.api_version, header.correlation_id) == (1, 17, 42)
    assert decoded.replica_state.replica_id == 2
    assert decoded.max_wait == datetime.timedelta(milliseconds=500)
    assert (decoded.min_bytes, decoded.max_bytes, decoded.session_id, decoded.session_epoch) == (1, 10 << 20, 0, -1)
    [topic] = decoded.topics
    assert topic.topic_id == topic_id
    assert [(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset,
             p.partition_max_bytes) for p in topic.partitions] == [(0, 7, 1234, 6, 10, 1 << 20),
                                                                   (3, 7, 0, -1, 0, 1 << 20)]
