import io
import struct

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32

from moldau.protocol import codec


def request_frame(api_key: int, version: int, body: bytes, flexible: bool, client_id: bytes | None = b"c") -> bytes:
    header = struct.pack(">hhi", api_key, version, 42)
    header += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    if flexible:
        header += b"\x00"
    return header + body


def metadata_body() -> bytes:
    buf = io.BytesIO()
    request = MetadataRequest(topics=(MetadataRequestTopic(name=TopicName("t"), topic_id=None),),
                              allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    entity_writer(MetadataRequest)(buf, request)
    return buf.getvalue()


def test_parse_header_and_decode_body() -> None:
    frame = request_frame(3, 12, metadata_body(), flexible=True)
    header = codec.parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 42, "c")
    schema = codec.api_schema(3, 12)
    request = codec.decode_request(schema, frame, header)
    assert request.topics[0].name == "t"


def test_null_client_id() -> None:
    header = codec.parse_request_header(request_frame(3, 12, b"", flexible=True, client_id=None))
    assert header.client_id is None


def test_unknown_tagged_field_in_header_is_skipped() -> None:
    frame = request_frame(3, 12, b"", flexible=False)  # header fields only, add a tag section by hand
    frame += bytes([1, 7, 2, 0xAA, 0xBB]) + metadata_body()
    header = codec.parse_request_header(frame)
    request = codec.decode_request(codec.api_schema(3, 12), frame, header)
    assert request.topics[0].name == "t"


@pytest.mark.parametrize("frame", [b"", b"\x00\x03\x00", struct.pack(">hhih", 3, 12, 1, 50) + b"short"])
def test_truncated_header_is_invalid(frame: bytes) -> None:
    with pytest.raises(codec.InvalidRequest):
        codec.parse_request_header(frame)


def test_garbage_body_is_invalid() -> None:
    frame = request_frame(3, 12, b"\xff\xff\xff\xff\xff\xff\xff", flexible=True)
    header = codec.parse_request_header(frame)
    with pytest.raises(codec.InvalidRequest):
        codec.decode_request(codec.api_schema(3, 12), frame, header)


def test_response_header_versions() -> None:
    # ApiVersions responses always use header v0, even for flexible versions (KIP-511).
    assert not codec.api_schema(18, 3).flexible_response_header
    assert codec.api_schema(3, 12).flexible_response_header
    assert not codec.api_schema(3, 8).flexible_response_header


def test_make_drops_fields_the_version_lacks() -> None:
    import kio.schema.metadata.v0.response as v0

    broker = codec.make(v0.MetadataResponseBroker, node_id=1, host="h", port=9, rack="r")
    assert broker == v0.MetadataResponseBroker(node_id=BrokerId(1), host="h", port=i32(9))
