"""The direct Heartbeat codec reads what kio writes and writes what kio writes, for every served version."""

from __future__ import annotations

import datetime
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from moldau.protocol import codec
from moldau.protocol.heartbeat import HeartbeatResponse, parse_heartbeat_request
from moldau.server.handlers.heartbeat import API as HEARTBEAT
from tests.support.wire import in_memory

VERSIONS = range(HEARTBEAT.min_version, HEARTBEAT.max_version + 1)
KEY = HEARTBEAT.key
names = st.text(max_size=60)


def kio_request_bytes(version: int, group: str, generation: int, member: str, instance: str | None) -> bytes:
    schema = codec.api_schema(KEY, version)
    request = codec.make(schema.request_type, group_id=group, generation_id=generation, member_id=member,
                         group_instance_id=instance)
    buf = io.BytesIO()
    entity_writer(schema.request_type)(buf, request)
    return buf.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=100, deadline=None)
@given(group=names, generation=st.integers(-(2**31), 2**31 - 1), member=names, instance=st.none() | names)
def test_request_reads_what_kio_writes(version: int, group: str, generation: int, member: str,
                                       instance: str | None) -> None:
    body = kio_request_bytes(version, group, generation, member, instance)
    ours = parse_heartbeat_request(b"HDR" + body, 3, version)
    theirs = entity_reader(codec.api_schema(KEY, version).request_type)(body, 0)[0]
    assert ours is not None
    assert (ours.group_id, ours.generation_id, ours.member_id, ours.group_instance_id) == (
        theirs.group_id, theirs.generation_id, theirs.member_id, getattr(theirs, "group_instance_id", None))


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=50, deadline=None)
@given(throttle_ms=st.integers(0, 2**31 - 1), error=st.sampled_from([e.value for e in ErrorCode]))
def test_response_is_what_kio_writes(version: int, throttle_ms: int, error: int) -> None:
    schema = codec.api_schema(KEY, version)
    response = codec.make(schema.response_type, throttle_time=datetime.timedelta(milliseconds=throttle_ms),
                          error_code=ErrorCode(error))
    buf = io.BytesIO()
    entity_writer(schema.response_type)(buf, response)
    assert in_memory(HeartbeatResponse(throttle_ms, error).encode(version)) == buf.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
def test_unusual_bodies_are_left_to_kio(version: int) -> None:
    body = kio_request_bytes(version, "group", 3, "member", "instance")
    for cut in range(len(body)):
        assert parse_heartbeat_request(body[:cut], 0, version) is None
    assert parse_heartbeat_request(body + b"\x00", 0, version) is None
    if version >= 4:
        assert parse_heartbeat_request(body[:-1] + b"\x01\x05\x00", 0, version) is None  # an unknown tag
