"""The direct MetadataResponse encoder writes what kio writes, for every served version."""

from __future__ import annotations

import datetime
import io
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from moldau.protocol import codec
from moldau.protocol.metadata_response import (
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
    encode_metadata_response,
)
from moldau.server.handlers.metadata import API as METADATA

VERSIONS = range(METADATA.min_version, METADATA.max_version + 1)
KEY = METADATA.key

i32 = st.integers(-(2**31), 2**31 - 1)
error_codes = st.sampled_from([e.value for e in ErrorCode])
node_lists = st.lists(i32, max_size=5)
brokers = st.lists(st.builds(MetadataBroker, i32, st.text(max_size=30), i32, st.none() | st.text(max_size=10)),
                   max_size=4)
partitions = st.lists(st.builds(MetadataPartition, error_codes, i32, i32, i32, node_lists, node_lists, node_lists),
                      max_size=5)
topics = st.lists(st.builds(MetadataTopic, error_codes, st.text(max_size=40), st.uuids(), st.booleans(), partitions,
                            i32), max_size=4)


def _kio_bytes(version: int, ours: MetadataResponse) -> bytes:
    schema = codec.api_schema(KEY, version)
    module = __import__(schema.response_type.__module__, fromlist=["x"])
    response = codec.make(
        schema.response_type, throttle_time=datetime.timedelta(milliseconds=ours.throttle_time_ms),
        brokers=tuple(codec.make(module.MetadataResponseBroker, node_id=b.node_id, host=b.host, port=b.port,
                                 rack=b.rack) for b in ours.brokers),
        cluster_id=ours.cluster_id, controller_id=ours.controller_id,
        topics=tuple(codec.make(
            module.MetadataResponseTopic, error_code=ErrorCode(t.error_code), name=t.name, topic_id=t.topic_id,
            is_internal=t.is_internal, topic_authorized_operations=t.topic_authorized_operations,
            partitions=tuple(codec.make(
                module.MetadataResponsePartition, error_code=ErrorCode(p.error_code),
                partition_index=p.partition_index, leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                replica_nodes=tuple(p.replica_nodes), isr_nodes=tuple(p.isr_nodes),
                offline_replicas=tuple(p.offline_replicas)) for p in t.partitions))
            for t in ours.topics),
        cluster_authorized_operations=ours.cluster_authorized_operations, error_code=ErrorCode(ours.error_code))
    buf = io.BytesIO()
    entity_writer(schema.response_type)(buf, response)
    return buf.getvalue()


def _ours(version: int, response: MetadataResponse) -> bytes:
    return encode_metadata_response(version, response)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(throttle_ms=st.integers(0, 2**31 - 1), broker_list=brokers, cluster_id=st.none() | st.text(max_size=30),
       controller_id=i32, topic_list=topics, cluster_operations=i32, error=error_codes)
def test_response_is_what_kio_writes(version: int, throttle_ms: int, broker_list: list[MetadataBroker],
                                     cluster_id: str | None, controller_id: int, topic_list: list[MetadataTopic],
                                     cluster_operations: int, error: int) -> None:
    response = MetadataResponse(throttle_ms, broker_list, cluster_id, controller_id, topic_list, cluster_operations,
                                error)
    assert _ours(version, response) == _kio_bytes(version, response)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 12])
def test_a_null_topic_name_is_written_as_kio_writes_it(version: int) -> None:
    topic = MetadataTopic(ErrorCode.unknown_topic_id.value, None, uuid.uuid4(), False, (), -(2**31))
    response = MetadataResponse(0, [MetadataBroker(1, "h", 9092, None)], "c", 1, [topic], -(2**31))
    assert _ours(version, response) == _kio_bytes(version, response)


@pytest.mark.parametrize("version", [0, 9, 12])
def test_a_long_replica_list_takes_a_multi_byte_length(version: int) -> None:
    nodes = list(range(200))
    topic = MetadataTopic(0, "t", uuid.uuid4(), False, [MetadataPartition(0, 0, 1, 5, nodes, nodes, nodes)], 0)
    response = MetadataResponse(0, [], "c", 1, [topic], 0)
    assert _ours(version, response) == _kio_bytes(version, response)


