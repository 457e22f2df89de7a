"""The direct Produce encoder produces exactly kio's bytes, for every served version."""

from __future__ import annotations

import datetime
import io
import random
import uuid
from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from moldau.protocol import codec
from moldau.protocol.leader_hints import NodeEndpoint
from moldau.protocol.produce_response import (
    FIRST_LEADER_HINT_VERSION,
    PartitionResponse,
    TopicResponse,
    encode_produce_response,
)
from moldau.server.handlers.common import datetime_from_ms
from moldau.server.handlers.produce import API as PRODUCE
from tests.support.wire import in_memory


def kio_bytes(version: int, topics: list[TopicResponse], endpoints: Sequence[NodeEndpoint] = ()) -> bytes:
    schema = codec.api_schema(0, version)
    part_cls = codec.nested(schema, "PartitionProduceResponse")
    topic_cls = codec.nested(schema, "TopicProduceResponse")
    leader_cls = getattr(schema.response_module, "LeaderIdAndEpoch", None)
    endpoint_cls = getattr(schema.response_module, "NodeEndpoint", None)

    def leader(p: PartitionResponse) -> object:
        if leader_cls is None or p.current_leader is None:
            return None if leader_cls is None else leader_cls()
        return leader_cls(leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])

    kio_topics = tuple(
        codec.make(topic_cls, name=t.name, topic_id=t.topic_id, partition_responses=tuple(
            codec.make(part_cls, index=p.partition, error_code=ErrorCode(p.error_code), base_offset=p.base_offset,
                       log_append_time=datetime_from_ms(p.log_append_time_ms), log_start_offset=p.log_start_offset,
                       record_errors=(), error_message=p.error_message, current_leader=leader(p))
            for p in t.partitions))
        for t in topics)
    kio_endpoints = () if endpoint_cls is None else tuple(
        endpoint_cls(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack) for e in endpoints)
    response = codec.make(schema.response_type, responses=kio_topics,
                          throttle_time=datetime.timedelta(milliseconds=3), node_endpoints=kio_endpoints)
    buf = io.BytesIO()
    entity_writer(schema.response_type)(buf, response)
    return buf.getvalue()


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
def test_matches_kio_for_every_served_version(version: int) -> None:
    rng = random.Random(version)
    for _ in range(40):
        topics = [
            TopicResponse(f"t{t}" * rng.randint(1, 80), uuid.uuid4(), [
                PartitionResponse(p, rng.choice([0, 2, 10]), rng.randint(-1, 10**12),
                                  rng.choice([-1, 1_700_000_000_123]), rng.randint(-1, 10**6),
                                  rng.choice([None, "", "batch too large" * rng.randint(1, 20)]),
                                  current_leader=rng.choice([None, (rng.randint(0, 9), rng.randint(0, 10**6))]))
                for p in range(rng.randint(0, 4))])
            for t in range(rng.randint(0, 3))]
        endpoints = [NodeEndpoint(n, f"broker-{n}.example" * rng.randint(1, 9), rng.randint(1, 65535),
                                  rng.choice([None, "rack-a"])) for n in range(rng.choice([0, 0, 1, 3]))]
        ours = in_memory(encode_produce_response(version, 3, topics, endpoints))
        expected = kio_bytes(version, topics, endpoints) if version >= FIRST_LEADER_HINT_VERSION else kio_bytes(
            version, topics)
        assert ours == expected
