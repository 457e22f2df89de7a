"""The direct OffsetCommit codec reads what kio writes and writes what kio writes, for every served version."""

from __future__ import annotations

import datetime
import io
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from moldau.protocol import codec
from moldau.protocol.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponseTopic,
    _parse,
    _parse_short_flexible,
    parse_offset_commit_request,
)
from moldau.server.handlers.offset_commit import API as OFFSET_COMMIT
from tests.support.wire import in_memory

VERSIONS = range(OFFSET_COMMIT.min_version, OFFSET_COMMIT.max_version + 1)
KEY = OFFSET_COMMIT.key

names = st.text(max_size=40)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.lists(st.tuples(i32, i64, i32, st.none() | st.text(max_size=300)), max_size=4)
topics = st.lists(st.tuples(names, st.uuids(), partitions), max_size=4)
error_codes = st.sampled_from([e.value for e in ErrorCode])


def _module(version: int, kind: str) -> Any:
    schema = codec.api_schema(KEY, version)
    entity = schema.request_type if kind == "request" else schema.response_type
    return __import__(entity.__module__, fromlist=["x"])


def kio_request_bytes(version: int, group: str, generation: int, member: str, instance: str | None,
                      retention_ms: int, topic_list: list[Any]) -> bytes:
    schema = codec.api_schema(KEY, version)
    module = _module(version, "request")
    kio_topics = tuple(
        codec.make(module.OffsetCommitRequestTopic, name=name, topic_id=topic_id, partitions=tuple(
            codec.make(module.OffsetCommitRequestPartition, partition_index=index, committed_offset=offset,
                       committed_leader_epoch=epoch, committed_metadata=metadata)
            for index, offset, epoch, metadata in parts))
        for name, topic_id, parts in topic_list)
    request = codec.make(schema.request_type, group_id=group, generation_id_or_member_epoch=generation,
                         member_id=member, group_instance_id=instance,
                         retention_time=datetime.timedelta(milliseconds=retention_ms), topics=kio_topics)
    buf = io.BytesIO()
    entity_writer(schema.request_type)(buf, request)
    return buf.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(group=names, generation=i32, member=names, instance=st.none() | names,
       retention_ms=st.integers(-1, 10**9), topic_list=topics)
def test_request_reads_what_kio_writes(version: int, group: str, generation: int, member: str,
                                       instance: str | None, retention_ms: int, topic_list: list[Any]) -> None:
    body = kio_request_bytes(version, group, generation, member, instance, retention_ms, topic_list)
    ours = parse_offset_commit_request(b"HEADER" + body, 6, version)
    theirs = entity_reader(codec.api_schema(KEY, version).request_type)(body, 0)[0]
    assert ours is not None
    assert (ours.group_id, ours.generation_id_or_member_epoch, ours.member_id) == (
        theirs.group_id, theirs.generation_id_or_member_epoch, theirs.member_id)
    assert ours.group_instance_id == getattr(theirs, "group_instance_id", None)
    got = [(t.name, t.topic_id, [(p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                  p.committed_metadata) for p in t.partitions]) for t in ours.topics]
    want = [(getattr(t, "name", None), getattr(t, "topic_id", None),
             [(p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
              for p in t.partitions]) for t in theirs.topics]
    assert got == want


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(throttle_ms=st.integers(0, 2**31 - 1),
       topic_list=st.lists(st.tuples(names, st.uuids(), st.lists(st.tuples(i32, error_codes), max_size=4)),
                           max_size=4))
def test_response_is_what_kio_writes(version: int, throttle_ms: int, topic_list: list[Any]) -> None:
    schema = codec.api_schema(KEY, version)
    module = _module(version, "response")
    response = codec.make(schema.response_type, throttle_time=datetime.timedelta(milliseconds=throttle_ms),
                          topics=tuple(codec.make(module.OffsetCommitResponseTopic, name=name, topic_id=topic_id,
                                                  partitions=tuple(
                                                      codec.make(module.OffsetCommitResponsePartition,
                                                                 partition_index=index, error_code=ErrorCode(error))
                                                      for index, error in parts))
                                       for name, topic_id, parts in topic_list))
    buf = io.BytesIO()
    entity_writer(schema.response_type)(buf, response)
    ours = OffsetCommitResponse(throttle_ms, [OffsetCommitResponseTopic(name, topic_id, parts)
                                              for name, topic_id, parts in topic_list])
    assert in_memory(ours.encode(version)) == buf.getvalue()


short_names = st.text(st.characters(max_codepoint=127), max_size=40)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])
@settings(max_examples=60, deadline=None)
@given(group=short_names, generation=i32, member=short_names, instance=st.none() | short_names,
       topic_list=st.lists(st.tuples(short_names, st.uuids(), st.lists(
           st.tuples(i32, i64, i32, st.none() | short_names), max_size=4)), max_size=4))
def test_short_requests_are_read_inline_as_field_by_field(version: int, group: str, generation: int, member: str,
                                                          instance: str | None, topic_list: list[Any]) -> None:
    body = memoryview(b"HEADER" + kio_request_bytes(version, group, generation, member, instance, -1, topic_list))
    short = _parse_short_flexible(body, 6, version)
    assert short is not None  # every length and count here fits one byte
    assert short == _parse(body, 6, version)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 8])
def test_tagged_fields_are_left_to_kio(version: int) -> None:
    body = kio_request_bytes(version, "g", 1, "m", None, -1, [("t", uuid.uuid4(), [(0, 5, -1, None)])])
    tagged = body[:-1] + b"\x01\x07\x01\x00"  # one unknown tag (7) of one byte at the end of the request
    assert parse_offset_commit_request(tagged, 0, version) is None
    assert parse_offset_commit_request(body, 0, version) is not None


@pytest.mark.parametrize("version", VERSIONS)
def test_truncated_or_padded_bodies_are_left_to_kio(version: int) -> None:
    body = kio_request_bytes(version, "group", 3, "member", "i", 1000, [("t", uuid.uuid4(), [(0, 5, 2, "m")])])
    for cut in range(len(body)):
        assert parse_offset_commit_request(body[:cut], 0, version) is None
    assert parse_offset_commit_request(body + b"\x00", 0, version) is None
