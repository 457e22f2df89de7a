"""The direct ListOffsetsResponse encoder writes what kio writes, for every served version."""

from __future__ import annotations

import datetime
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from moldau.protocol import codec
from moldau.protocol.list_offsets_response import (
    ListOffsetsPartition,
    ListOffsetsResponse,
    ListOffsetsTopic,
    encode_list_offsets_response,
)
from moldau.server.handlers.list_offsets import API as LIST_OFFSETS

VERSIONS = range(LIST_OFFSETS.min_version, LIST_OFFSETS.max_version + 1)
KEY = LIST_OFFSETS.key

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
error_codes = st.sampled_from([e.value for e in ErrorCode])
partitions = st.lists(st.builds(ListOffsetsPartition, i32, error_codes, i64, i64, i32), max_size=5)
topics = st.lists(st.builds(ListOffsetsTopic, st.text(max_size=40), partitions), max_size=4)


def _kio_bytes(version: int, ours: ListOffsetsResponse) -> bytes:
    schema = codec.api_schema(KEY, version)
    module = __import__(schema.response_type.__module__, fromlist=["x"])
    response = codec.make(
        schema.response_type, throttle_time=datetime.timedelta(milliseconds=ours.throttle_time_ms),
        topics=tuple(codec.make(module.ListOffsetsTopicResponse, name=t.name, partitions=tuple(
            codec.make(module.ListOffsetsPartitionResponse, partition_index=p.partition_index,
                       error_code=ErrorCode(p.error_code), timestamp=p.timestamp, offset=p.offset,
                       leader_epoch=p.leader_epoch) for p in t.partitions)) for t in ours.topics))
    buf = io.BytesIO()
    entity_writer(schema.response_type)(buf, response)
    return buf.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(throttle_ms=st.integers(0, 2**31 - 1), topic_list=topics)
def test_response_is_what_kio_writes(version: int, throttle_ms: int, topic_list: list[ListOffsetsTopic]) -> None:
    response = ListOffsetsResponse(throttle_ms, topic_list)
    assert encode_list_offsets_response(version, response) == _kio_bytes(version, response)


@pytest.mark.parametrize("version", VERSIONS)
def test_many_partitions_take_a_multi_byte_length(version: int) -> None:
    response = ListOffsetsResponse(0, [ListOffsetsTopic("t", [ListOffsetsPartition(p, 0, -1, p, 3)
                                                               for p in range(300)])])
    assert encode_list_offsets_response(version, response) == _kio_bytes(version, response)
