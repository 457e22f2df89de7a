"""The direct Fetch response reader reads what kio reads, leaves records in the frame, and hands kio anything else."""

from __future__ import annotations

import datetime
import io
import random
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from moldau.coordinator.internal_topic import build_batch
from moldau.net.client import ConnectionFailed, decode_response
from moldau.protocol import codec
from moldau.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from moldau.protocol.fetch_response_reader import FIRST_VERSION, LAST_VERSION, FetchResponse, read_fetch_response
from moldau.protocol.framing import FrameBufferPool, FrameReader
from moldau.protocol.record_batch import split_batches
from moldau.protocol.wire import uvarint
from tests.support.wire import in_memory

VERSIONS = range(FIRST_VERSION, LAST_VERSION + 1)
HEADER = struct.pack(">i", 42) + b"\x00"  # correlation id, no header tags (a flexible response header)
BODY_AT = len(HEADER)


def kio_body(version: int, rng: random.Random) -> bytes:
    """A random FetchResponse of `version`, encoded by kio's writer."""
    schema = codec.api_schema(1, version)
    module = __import__(schema.response_type.__module__, fromlist=["x"])
    topics = tuple(
        codec.make(module.FetchableTopicResponse, topic_id=rng.choice([uuid.uuid4(), uuid.UUID(int=0)]),
                   partitions=tuple(_kio_partition(module, p, rng) for p in range(rng.randint(0, 4))))
        for _ in range(rng.randint(0, 3)))
    endpoints = ()
    if version >= 16 and rng.random() < 0.5:
        endpoints = tuple(module.NodeEndpoint(node_id=n, host=f"host-{n}.example", port=9092 + n,
                                              rack=rng.choice([None, "", "rack-a"]))
                          for n in range(rng.randint(0, 3)))
    response = codec.make(schema.response_type, throttle_time=datetime.timedelta(milliseconds=rng.randint(0, 99)),
                          error_code=rng.choice([ErrorCode.none, ErrorCode.fetch_session_id_not_found]),
                          session_id=rng.randint(-1, 2**31 - 1), responses=topics, node_endpoints=endpoints)
    buf = io.BytesIO()
    entity_writer(schema.response_type)(buf, response)
    return buf.getvalue()


def _kio_partition(module: Any, index: int, rng: random.Random) -> Any:
    tags: dict[str, Any] = {}
    if rng.random() < 0.4:
        tags["diverging_epoch"] = module.EpochEndOffset(epoch=rng.randint(0, 99), end_offset=rng.randint(0, 10**12))
    if rng.random() < 0.3:
        tags["current_leader"] = module.LeaderIdAndEpoch(leader_id=rng.randint(0, 9), leader_epoch=rng.randint(0, 99))
    if rng.random() < 0.3:
        tags["snapshot_id"] = module.SnapshotId(end_offset=rng.randint(0, 10**9), epoch=rng.randint(0, 99))
    aborted = rng.choice([None, (), tuple(module.AbortedTransaction(producer_id=rng.randint(0, 10**6),
                                                                    first_offset=rng.randint(0, 10**9))
                                          for _ in range(rng.randint(1, 3)))])
    return codec.make(module.PartitionData, partition_index=index,
                      error_code=rng.choice([ErrorCode.none, ErrorCode.offset_out_of_range,
                                             ErrorCode.not_leader_or_follower]),
                      high_watermark=rng.randint(-1, 10**12), last_stable_offset=rng.randint(-1, 10**12),
                      log_start_offset=rng.randint(-1, 10**12), aborted_transactions=aborted,
                      preferred_read_replica=rng.choice([-1, 2]),
                      records=rng.choice([None, b"", bytes(rng.randint(1, 200)), bytes(70_000)]), **tags)


def decode_both(frame: bytes | memoryview, version: int) -> tuple[Any, Any]:
    """(the direct reader's answer or None, kio's decoded response or the ConnectionFailed it raised)."""
    direct = read_fetch_response(frame, BODY_AT, version)
    try:
        generic: Any = decode_response(frame, 1, version)
    except ConnectionFailed as exc:
        generic = exc
    return direct, generic


def assert_same(direct: Any, generic: Any) -> None:
    """Every attribute the follower reads (and the rest of the response) is what kio decoded."""
    assert direct.error_code == generic.error_code
    assert direct.session_id == generic.session_id
    assert datetime.timedelta(milliseconds=direct.throttle_time_ms) == generic.throttle_time
    assert [(e.node_id, e.host, e.port, e.rack) for e in direct.node_endpoints] == [
        (e.node_id, e.host, e.port, e.rack) for e in getattr(generic, "node_endpoints", ())]
    assert len(direct.responses) == len(generic.responses)
    for topic, kio_topic in zip(direct.responses, generic.responses, strict=True):
        assert topic.topic_id == kio_topic.topic_id
        assert len(topic.partitions) == len(kio_topic.partitions)
        for part, kio_part in zip(topic.partitions, kio_topic.partitions, strict=True):
            for name in ("partition_index", "error_code", "high_watermark", "last_stable_offset",
                         "log_start_offset", "preferred_read_replica"):
                assert getattr(part, name) == getattr(kio_part, name), name
            assert (part.records is None) == (kio_part.records is None)
            if part.records is not None:
                assert isinstance(part.records, memoryview)
                assert part.records.tobytes() == kio_part.records
            assert (part.aborted_transactions is None) == (kio_part.aborted_transactions is None)
            assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()] == [
                (a.producer_id, a.first_offset) for a in kio_part.aborted_transactions or ()]
            assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (
                kio_part.diverging_epoch.epoch, kio_part.diverging_epoch.end_offset)
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
                kio_part.current_leader.leader_id, kio_part.current_leader.leader_epoch)
            assert (part.snapshot_id.end_offset, part.snapshot_id.epoch) == (
                kio_part.snapshot_id.end_offset, kio_part.snapshot_id.epoch)


@pytest.mark.parametrize("version", VERSIONS)
def test_reads_what_kio_reads(version: int) -> None:
    rng = random.Random(version)
    for _ in range(40):
        frame = HEADER + kio_body(version, rng)
        direct, generic = decode_both(frame, version)
        assert direct is not None
        assert_same(direct, generic)


@pytest.mark.parametrize("version", VERSIONS)
def test_reads_the_brokers_own_encoding(version: int) -> None:
    rng = random.Random(100 + version)
    for _ in range(20):
        topics = [TopicResult(None, uuid.uuid4(), [
            PartitionResult(p, 0, rng.randint(0, 10**9), rng.randint(0, 10**9), rng.randint(0, 10**9),
                            rng.choice([None, [], [(7, 70), (8, 80)]]), -1,
                            rng.choice([None, b"", bytes(rng.randint(1, 100)), bytes(9000)]),
                            rng.choice([None, (rng.randint(0, 9), rng.randint(0, 10**6))]))
            for p in range(rng.randint(0, 5))]) for _ in range(rng.randint(0, 3))]
        frame = HEADER + in_memory(encode_fetch_response(version, 0, 0, 123, topics))
        direct, generic = decode_both(frame, version)
        assert direct is not None
        assert_same(direct, generic)


def test_other_versions_are_left_to_kio() -> None:
    assert read_fetch_response(HEADER + bytes(64), BODY_AT, FIRST_VERSION - 1) is None
    assert read_fetch_response(HEADER + bytes(64), BODY_AT, LAST_VERSION + 1) is None


def test_records_are_views_of_the_frame_not_copies() -> None:
    frame = memoryview(bytearray(HEADER + kio_body(17, random.Random(3))))
    records = [p.records for t in _read(frame, 17).responses for p in t.partitions if p.records]
    assert records
    for view in records:
        assert view.obj is frame.obj


def _read(frame: bytes | memoryview, version: int) -> Any:
    response = read_fetch_response(frame, BODY_AT, version)
    assert response is not None
    return response


# A hand-written body, to place tagged fields kio's writer never writes (unknown ones, out of order).
def body(partition_tags: bytes = b"\x00", top_tags: bytes = b"\x00", records: bytes = b"abc",
         topic_count: bytes = b"\x02", partition_count: bytes = b"\x02") -> bytes:
    partition = (struct.pack(">ihqqq", 0, 0, 10, 9, 1) + b"\x00" + struct.pack(">i", -1)
                 + uvarint(len(records) + 1) + records + partition_tags)
    topic = uuid.UUID(int=5).bytes + partition_count + partition + b"\x00"
    return struct.pack(">ihi", 0, 0, 7) + topic_count + topic + top_tags


def tag(number: int, value: bytes) -> bytes:
    return uvarint(number) + uvarint(len(value)) + value


EPOCH = struct.pack(">iq", 4, 1000) + b"\x00"
LEADER = struct.pack(">ii", 2, 4) + b"\x00"


@pytest.mark.parametrize("partition_tags, top_tags", [
    (b"\x01" + tag(9, b"xyz"), b"\x00"),  # an unknown partition tag
    (b"\x02" + tag(0, EPOCH) + tag(7, b""), b"\x00"),  # a known one and an unknown one
    (b"\x02" + tag(0, EPOCH) + tag(1, LEADER), b"\x01" + tag(3, b"\x00\x01")),  # an unknown top-level tag
    (b"\x01" + tag(0, struct.pack(">iq", 4, 1000) + b"\x01" + tag(5, b"zz")), b"\x00"),  # a tag inside a tag
])
def test_unknown_tagged_fields_are_skipped_as_kio_does(partition_tags: bytes, top_tags: bytes) -> None:
    frame = HEADER + body(partition_tags, top_tags)
    direct, generic = decode_both(frame, 17)
    assert direct is not None
    assert_same(direct, generic)


@pytest.mark.parametrize("partition_tags, top_tags", [
    (b"\x02" + tag(1, LEADER) + tag(0, EPOCH), b"\x00"),  # out of order
    (b"\x02" + tag(0, EPOCH) + tag(0, EPOCH), b"\x00"),  # twice
    (b"\x01" + tag(0, EPOCH + b"\x00"), b"\x00"),  # longer than its value
    (b"\x01" + tag(0, EPOCH[:-2]), b"\x00"),  # shorter
    (b"\x00", b"\x01" + tag(0, b"\x02" + struct.pack(">i", 1) + b"\x00")),  # a null host in node endpoints
    (b"\x00", b"\x01" + tag(0, b"\x02" + struct.pack(">i", 1) + b"\x03\xff\xfe")),  # a host not UTF-8
])
def test_odd_tagged_fields_are_left_to_kio(partition_tags: bytes, top_tags: bytes) -> None:
    frame = HEADER + body(partition_tags, top_tags)
    assert read_fetch_response(frame, BODY_AT, 17) is None
    _, generic = decode_both(frame, 17)  # kio's answer, whatever it is: a response or ConnectionFailed
    assert generic is not None


def test_error_codes_kio_does_not_know_are_left_to_kio() -> None:
    frame = bytearray(HEADER + body())
    struct.pack_into(">h", frame, BODY_AT + 4, 9999)
    assert read_fetch_response(bytes(frame), BODY_AT, 17) is None
    with pytest.raises(ConnectionFailed):
        decode_response(bytes(frame), 1, 17, direct_reader=read_fetch_response)


@pytest.mark.parametrize("fields", [
    {"records": b"x" * 10 + b""},  # fine, for reference
    {"topic_count": b"\xff\xff\xff\xff\x0f"},  # four billion topics
    {"partition_count": b"\xff\xff\xff\x7f"},
    {"topic_count": b"\x00"},  # null where the schema allows none
    {"partition_count": b"\x00"},
    {"topic_count": b"\xff\xff\xff\xff\xff\x01"},  # a varint of six bytes
])
def test_huge_or_null_counts_never_crash(fields: dict[str, bytes]) -> None:
    frame = HEADER + body(**fields)
    direct, generic = decode_both(frame, 17)
    if direct is not None:
        assert_same(direct, generic)
    else:
        assert isinstance(generic, ConnectionFailed)


def test_records_longer_than_the_frame_are_left_to_kio() -> None:
    frame = bytearray(HEADER + body(records=b"abc"))
    records_length_at = frame.index(uvarint(4) + b"abc")
    frame[records_length_at : records_length_at + 1] = uvarint(2**31 - 1)
    direct, generic = decode_both(bytes(frame), 17)
    assert direct is None
    assert isinstance(generic, ConnectionFailed)


@pytest.mark.parametrize("version", [13, 17])
def test_every_truncation_either_reads_as_kio_or_is_left_to_it(version: int) -> None:
    whole = HEADER + kio_body(version, random.Random(7 + version))
    for end in range(BODY_AT, len(whole)):
        direct, generic = decode_both(whole[:end], version)
        if direct is None:
            continue
        assert not isinstance(generic, ConnectionFailed)
        assert_same(direct, generic)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                                  min_size=1, max_size=4))
def test_corrupted_bodies_read_as_kio_or_are_left_to_it(seed: int, flips: list[tuple[int, int]]) -> None:
    frame = bytearray(HEADER + kio_body(17, random.Random(seed)))
    for at, value in flips:
        frame[BODY_AT + at % (len(frame) - BODY_AT)] = value
    direct, generic = decode_both(bytes(frame), 17)
    if direct is not None:
        assert not isinstance(generic, ConnectionFailed)
        assert_same(direct, generic)


def test_a_pooled_frame_is_not_reused_while_a_records_view_lives() -> None:
    """The follower keeps views of a pooled receive buffer: the pool hands it out again only once they are gone."""
    pool = FrameBufferPool()
    reader = FrameReader(1 << 24, receive_buffer=memoryview(bytearray(1 << 16)), large_frame_bytes=1024, pool=pool)
    payload = HEADER + body(records=bytes(100_000))
    (frame,) = reader.feed(struct.pack(">i", len(payload)) + payload)
    assert isinstance(frame, memoryview)
    records = [p.records for t in _read(frame, 17).responses for p in t.partitions if p.records]
    assert records
    del frame
    assert pool.take(len(payload)) is None
    records.clear()
    assert pool.take(len(payload)) is not None


def test_split_batches_takes_the_records_views() -> None:
    batch = build_batch([(b"k1", b"v1"), (b"k2", b"v2")], 1_000)
    frame = HEADER + in_memory(encode_fetch_response(17, 0, 0, 0, [TopicResult(None, uuid.uuid4(), [
        PartitionResult(0, 0, 2, 2, 0, None, -1, batch)])]))
    (records,) = [p.records for t in _read(frame, 17).responses for p in t.partitions]
    ((header, view),) = split_batches(records, from_client=False)
    assert header.records_count == 2 and view.tobytes() == batch


def test_the_client_returns_the_direct_reading_and_falls_back_to_kio() -> None:
    frame = HEADER + body()
    assert isinstance(decode_response(frame, 1, 17, direct_reader=read_fetch_response), FetchResponse)
    odd = HEADER + body(b"\x02" + tag(1, LEADER) + tag(0, EPOCH))  # tags out of order: kio's
    assert not isinstance(decode_response(odd, 1, 17, direct_reader=read_fetch_response), FetchResponse)
