"""Request bodies that lie about their sizes: refused before they are decoded, the broker keeps serving.

kio's native readers reserve memory for the lengths a body declares; before the bounds check, the 25-byte
DeleteTopics frame below made the broker abort. Each case here goes to a real broker over TCP.
"""

from __future__ import annotations

import struct

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.find_coordinator.v3 import request as fc_req
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.static.primitive import i8

from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawClient


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def assert_serving(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        response = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert response.error_code == ErrorCode.none
    assert broker.running
    assert "Traceback" not in broker.log_path.read_text(errors="replace")


def test_the_25_byte_delete_topics_frame_closes_only_its_connection(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        client.send_raw(bytes.fromhex("000000150014000600007f47000466757a7a0099a2c2d45f98"))
        # DeleteTopics answers errors per topic, so there is no honest answer: the connection closes.
        assert client.is_closed_by_peer()
    assert_serving(broker)


def test_huge_string_in_find_coordinator_is_answered_with_invalid_request(broker: BrokerProcess) -> None:
    # FindCoordinator v3 (flexible): header v2, then key as a compact string declaring 2**31 bytes.
    header = struct.pack(">hhih", 10, 3, 77, 1) + b"c" + b"\x00"
    body = b"\x81\x80\x80\x80\x08" + b"k" * 4 + b"\x00\x00"
    with RawClient(broker.bootstrap) as client:
        client.send_raw(frame(header + body))
        client.correlation_id = 77
        response = client.read_response(10, 3)
        assert isinstance(response, FindCoordinatorResponse)
        assert response.error_code == ErrorCode.invalid_request
        # The connection stays usable after an answered bad request.
        answer = client.request(fc_req.FindCoordinatorRequest(key="g", key_type=i8(0)))
        assert answer.error_code in (ErrorCode.none, ErrorCode.coordinator_not_available)
    assert_serving(broker)


def test_null_array_where_the_schema_forbids_it(broker: BrokerProcess) -> None:
    # DeleteTopics v6 with topics=null (compact length 0), then the timeout and an empty tag section.
    header = struct.pack(">hhih", 20, 6, 5, 1) + b"c" + b"\x00"
    with RawClient(broker.bootstrap) as client:
        client.send_raw(frame(header + b"\x00" + struct.pack(">i", 1000) + b"\x00"))
        assert client.is_closed_by_peer()
    assert_serving(broker)
