"""Tests for moldau.protocol.tagged: unknown tagged fields are dropped so kio can decode the message."""

from __future__ import annotations

import datetime
import io
import uuid
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.consumer_group_heartbeat.v0.response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from kio.schema.create_topics.v7.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4.request import FetchPartition as FetchPartitionV4
from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v4.request import FetchTopic as FetchTopicV4
from kio.schema.fetch.v12.response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import BrokerId, ProducerId, TopicName, TransactionalId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from moldau.protocol.tagged import MalformedMessageError, encode_uvarint, strip_unknown_tagged_fields

# --- helpers ---------------------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    """Independent unsigned varint encoder, so the module's own encoder is not trusted by the tests."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tagged_section(entries: list[tuple[int, bytes]]) -> bytes:
    """A tagged-field section: count, then per field its tag, its size and its bytes."""
    body = b"".join(uvarint(tag) + uvarint(len(value)) + value for tag, value in entries)
    return uvarint(len(entries)) + body


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def decode(entity_type: type[Any], buf: bytes, offset: int = 0) -> Any:
    entity, _size = entity_reader(entity_type)(buf, offset)
    return entity


def with_tags(message: bytes, struct: bytes, entries: list[tuple[int, bytes]]) -> bytes:
    """Replace the empty tagged section ending ``struct`` (found once inside ``message``) by ``entries``."""
    assert struct.endswith(b"\x00"), "struct must end with an empty tagged section"
    assert message.count(struct) == 1, "struct must occur exactly once"
    return message.replace(struct, struct[:-1] + tagged_section(entries))


def top_level_tags(message: bytes, entries: list[tuple[int, bytes]]) -> bytes:
    assert message.endswith(b"\x00")
    return message[:-1] + tagged_section(entries)


def assert_stripped_decodes(entity_type: type[Any], buf: bytes, expected: Any) -> bytes:
    with pytest.raises(KeyError, match="Unknown tagged field tag"):
        decode(entity_type, buf)
    stripped = strip_unknown_tagged_fields(entity_type, buf)
    assert decode(entity_type, stripped) == expected
    assert stripped == encode(expected)
    return stripped


UNKNOWN = [(17, b"\x01\x02\x03"), (300, b"")]


# --- fixtures: real requests -----------------------------------------------------------------------


def metadata_request() -> MetadataRequest:
    return MetadataRequest(
        topics=(
            MetadataRequestTopic(topic_id=uuid.UUID(int=7), name=TopicName("orders")),
            MetadataRequestTopic(topic_id=None, name=None),
        ),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def produce_request() -> ProduceRequest:
    partition = PartitionProduceData(index=i32(3), records=Records(b"record-batch-bytes"))
    return ProduceRequest(
        transactional_id=TransactionalId("tx-1"),
        acks=i16(-1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(name=TopicName("orders"), partition_data=(partition,)),
            TopicProduceData(
                name=TopicName("empty"), partition_data=(PartitionProduceData(index=i32(0), records=None),)
            ),
        ),
    )


def fetch_partition(index: int) -> FetchPartition:
    return FetchPartition(
        partition=i32(index), fetch_offset=i64(1000 + index), partition_max_bytes=i32(1 << 20)
    )


def fetch_request(cluster_id: str | None = None) -> FetchRequest:
    return FetchRequest(
        cluster_id=cluster_id,
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
        min_bytes=i32(1),
        topics=(
            FetchTopic(topic_id=uuid.UUID(int=1), partitions=(fetch_partition(0), fetch_partition(1))),
            FetchTopic(topic_id=uuid.UUID(int=2), partitions=(fetch_partition(9),)),
        ),
        forgotten_topics_data=(ForgottenTopic(topic_id=uuid.UUID(int=3), partitions=(i32(4), i32(5))),),
        rack_id="rack-a",
    )


def create_topics_request() -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=TopicName("orders"),
                num_partitions=i32(-1),
                replication_factor=i16(-1),
                assignments=(
                    CreatableReplicaAssignment(partition_index=i32(0), broker_ids=(BrokerId(1), BrokerId(2))),
                ),
                configs=(
                    CreatableTopicConfig(name="cleanup.policy", value="compact"),
                    CreatableTopicConfig(name="retention.ms", value=None),
                ),
            ),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        validate_only=False,
    )


def request_header(client_id: str | None = "console-producer") -> RequestHeader:
    return RequestHeader(
        request_api_key=i16(3), request_api_version=i16(12), correlation_id=i32(42), client_id=client_id
    )


# --- unknown tags are removed ----------------------------------------------------------------------


def test_metadata_unknown_tags_top_level_and_in_topic() -> None:
    request = metadata_request()
    buf = encode(request)
    buf = with_tags(buf, encode(request.topics[0]), UNKNOWN)  # type: ignore[index]
    buf = top_level_tags(buf, [(9, b"\xff" * 40)])
    assert_stripped_decodes(MetadataRequest, buf, request)


def test_produce_unknown_tags_in_topic_and_partition() -> None:
    request = produce_request()
    buf = encode(request)
    buf = with_tags(buf, encode(request.topic_data[0].partition_data[0]), UNKNOWN)
    buf = with_tags(buf, encode(request.topic_data[1]), [(1, b"x")])
    assert_stripped_decodes(ProduceRequest, buf, request)


def test_fetch_nested_unknown_tags_and_known_cluster_id_kept() -> None:
    request = fetch_request(cluster_id="cluster-xyz")
    buf = encode(request)
    # The known tag 0 (cluster_id) is encoded by kio; rebuild the top-level section around it.
    known = (0, b"\x0c" + b"cluster-xyz")
    assert buf.endswith(tagged_section([known]))
    buf = buf[: -len(tagged_section([known]))] + tagged_section([known, (5, b"\x00\x00")])
    buf = with_tags(buf, encode(request.topics[0].partitions[1]), UNKNOWN)
    buf = with_tags(buf, encode(request.topics[1]), [(2, b"")])
    buf = with_tags(buf, encode(request.forgotten_topics_data[0]), [(99, b"abc")])
    stripped = assert_stripped_decodes(FetchRequest, buf, request)
    assert decode(FetchRequest, stripped).cluster_id == "cluster-xyz"


def test_api_versions_unknown_top_level_tag() -> None:
    request = ApiVersionsRequest(client_software_name="moldau-test", client_software_version="1.0")
    buf = top_level_tags(encode(request), [(0, b"\x01"), (1, b"\x02\x03")])
    assert_stripped_decodes(ApiVersionsRequest, buf, request)


def test_create_topics_unknown_tags_in_assignment_and_null_config() -> None:
    request = create_topics_request()
    topic = request.topics[0]
    buf = encode(request)
    buf = with_tags(buf, encode(topic.assignments[0]), UNKNOWN)
    buf = with_tags(buf, encode(topic.configs[1]), [(4, b"\x00")])
    buf = top_level_tags(buf, [(8, b"")])
    assert_stripped_decodes(CreateTopicsRequest, buf, request)


@pytest.mark.parametrize("client_id", ["console-producer", None])
def test_request_header_unknown_tag(client_id: str | None) -> None:
    header = request_header(client_id)
    buf = top_level_tags(encode(header), [(3, b"\x00\x01")])
    assert_stripped_decodes(RequestHeader, buf, header)


def test_known_tagged_struct_keeps_value_and_loses_inner_unknown_tag() -> None:
    partition = PartitionData(
        partition_index=i32(0),
        error_code=ErrorCode.none,
        high_watermark=i64(10),
        diverging_epoch=EpochEndOffset(epoch=i32(4), end_offset=i64(77)),
        aborted_transactions=(AbortedTransaction(producer_id=ProducerId(5), first_offset=i64(2)),),
        records=None,
    )
    response = FetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        responses=(FetchableTopicResponse(topic=TopicName("t"), partitions=(partition,)),),
    )
    buf = encode(response)
    inner = encode(partition.diverging_epoch)
    old_entry = uvarint(0) + uvarint(len(inner)) + inner
    new_inner = inner[:-1] + tagged_section(UNKNOWN)
    assert buf.count(old_entry) == 1
    buf = buf.replace(old_entry, uvarint(0) + uvarint(len(new_inner)) + new_inner)
    assert_stripped_decodes(FetchResponse, buf, response)


@pytest.mark.parametrize("with_assignment", [True, False])
def test_nullable_struct_marker(with_assignment: bool) -> None:
    assignment = Assignment(
        topic_partitions=(TopicPartitions(topic_id=uuid.UUID(int=5), partitions=(i32(1),)),)
    )
    response = ConsumerGroupHeartbeatResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        error_code=ErrorCode.none,
        member_id="m-1",
        member_epoch=i32(3),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        assignment=assignment if with_assignment else None,
    )
    buf = encode(response)
    if with_assignment:
        buf = with_tags(buf, encode(assignment.topic_partitions[0]), UNKNOWN)
    buf = top_level_tags(buf, [(6, b"z")])
    assert_stripped_decodes(ConsumerGroupHeartbeatResponse, buf, response)


# --- buffer handling -------------------------------------------------------------------------------


def test_result_starts_at_offset_and_keeps_the_bytes_after_the_entity() -> None:
    header, body = request_header(), metadata_request()
    frame = top_level_tags(encode(header), UNKNOWN) + top_level_tags(encode(body), [(2, b"b")])
    stripped = strip_unknown_tagged_fields(RequestHeader, frame)
    assert stripped == encode(header) + top_level_tags(encode(body), [(2, b"b")])
    decoded_header, header_size = entity_reader(RequestHeader)(stripped, 0)
    assert decoded_header == header
    body_offset = len(frame) - (len(stripped) - header_size)
    assert strip_unknown_tagged_fields(MetadataRequest, frame, body_offset) == encode(body)
    assert decode(MetadataRequest, strip_unknown_tagged_fields(MetadataRequest, frame, body_offset)) == body


def test_message_without_unknown_tags_is_unchanged() -> None:
    for entity in (metadata_request(), produce_request(), fetch_request("c"), create_topics_request()):
        buf = encode(entity)
        assert strip_unknown_tagged_fields(type(entity), buf) == buf


def test_non_flexible_message_is_returned_unchanged() -> None:
    request = FetchRequestV4(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
        min_bytes=i32(1),
        isolation_level=i8(0),
        topics=(
            FetchTopicV4(
                topic=TopicName("t"),
                partitions=(
                    FetchPartitionV4(partition=i32(0), fetch_offset=i64(0), partition_max_bytes=i32(1)),
                ),
            ),
        ),
    )
    buf = encode(request)
    assert strip_unknown_tagged_fields(FetchRequestV4, buf) == buf
    assert strip_unknown_tagged_fields(FetchRequestV4, b"prefix" + buf, 6) == buf


def test_accepts_bytearray_and_memoryview() -> None:
    request = metadata_request()
    buf = top_level_tags(encode(request), UNKNOWN)
    assert strip_unknown_tagged_fields(MetadataRequest, bytearray(buf)) == encode(request)
    assert strip_unknown_tagged_fields(MetadataRequest, memoryview(buf)) == encode(request)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16383, 16384, 2**31 - 1, 2**32 - 1])
def test_encode_uvarint_matches_reference(value: int) -> None:
    assert encode_uvarint(value) == uvarint(value)


# --- malformed input -------------------------------------------------------------------------------


def test_every_truncation_inside_the_tag_section_raises_value_error() -> None:
    request = metadata_request()
    base = encode(request)
    buf = top_level_tags(base, [(17, b"\x01\x02\x03\x04"), (400, b"abc")])
    # Cut anywhere after the fixed fields: inside the count, a tag number, a size or a value.
    for cut in range(len(base) - 1, len(buf)):
        with pytest.raises(MalformedMessageError):
            strip_unknown_tagged_fields(MetadataRequest, buf[:cut])


def test_every_truncation_of_a_nested_message_raises_value_error() -> None:
    request = fetch_request("c")
    buf = with_tags(encode(request), encode(request.topics[0].partitions[0]), UNKNOWN)
    for cut in range(len(buf)):
        with pytest.raises(ValueError):
            strip_unknown_tagged_fields(FetchRequest, buf[:cut])


def test_error_names_the_path_and_position() -> None:
    request = fetch_request()
    buf = with_tags(encode(request), encode(request.topics[1].partitions[0]), [(7, b"abcdef")])
    with pytest.raises(
        MalformedMessageError, match=r"FetchRequest\.topics: FetchTopic\.partitions: .*truncated"
    ):
        strip_unknown_tagged_fields(FetchRequest, buf[: buf.index(b"abcdef") + 2])


def test_huge_tag_count_is_rejected_without_looping() -> None:
    buf = encode(ApiVersionsRequest(client_software_name="a", client_software_version="b"))
    corrupt = buf[:-1] + uvarint(2**31)
    with pytest.raises(MalformedMessageError, match="tagged fields"):
        strip_unknown_tagged_fields(ApiVersionsRequest, corrupt)


def test_huge_array_count_is_rejected() -> None:
    corrupt = uvarint(2**30) + b"\x00" * 8
    with pytest.raises(MalformedMessageError, match="array of"):
        strip_unknown_tagged_fields(MetadataRequest, corrupt)


def test_overlong_varint_is_rejected() -> None:
    buf = encode(ApiVersionsRequest(client_software_name="a", client_software_version="b"))
    with pytest.raises(MalformedMessageError, match="varint longer"):
        strip_unknown_tagged_fields(ApiVersionsRequest, buf[:-1] + b"\x80" * 6 + b"\x00")


def test_known_tag_with_trailing_bytes_is_rejected() -> None:
    request = fetch_request("c")
    buf = encode(request)
    section = tagged_section([(0, b"\x02c")])
    assert buf.endswith(section)
    corrupt = buf[: -len(section)] + tagged_section([(0, b"\x02c!")])
    with pytest.raises(MalformedMessageError, match=r"cluster_id \(tag 0\): 1 bytes left"):
        strip_unknown_tagged_fields(FetchRequest, corrupt)


def test_offset_outside_buffer_is_rejected() -> None:
    with pytest.raises(MalformedMessageError, match="offset"):
        strip_unknown_tagged_fields(MetadataRequest, b"\x00", 5)
