"""The schema-generated bounds check that runs before kio's native readers."""

from __future__ import annotations

import io
import random
import struct
import subprocess
import sys
from typing import Any

import pytest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest
from kio.schema.describe_configs.v3.request import DescribeConfigsRequest
from kio.schema.fetch.v16.request import FetchRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.serial import entity_writer

from moldau.protocol import codec
from moldau.protocol.body_check import BodyCheckError, check_body, min_wire_size
from moldau.protocol.error_response import error_response
from moldau.protocol.errors import ErrorCode
from tests.support.entities import random_entity, schemas

SCHEMAS = list(schemas())


def encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def test_every_schema_is_known() -> None:
    # Every request and response kio has, 300 (api, version) pairs in kio 0.6.5.
    assert len(SCHEMAS) > 250


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: f"{s.request_type.__module__.split('.')[2]}-v{s.version}")
def test_valid_bodies_pass_and_end_where_kio_wrote(schema: codec.ApiSchema) -> None:
    rng = random.Random(schema.api_key * 100 + schema.version)
    for entity_type in (schema.request_type, schema.response_type):
        for _ in range(8):
            body = encode(random_entity(entity_type, rng))
            assert check_body(entity_type, body + b"trailing", 0) == len(body)


def test_the_25_byte_frame_that_aborted_the_broker_is_refused() -> None:
    frame = bytes.fromhex("0014000600007f47000466757a7a0099a2c2d45f98")
    header = codec.parse_request_header(frame)
    with pytest.raises(codec.MalformedBody, match=r"DeleteTopicsRequest\.topics: length 25678614808"):
        codec.decode_request(codec.api_schema(header.api_key, header.api_version), frame, header)


def test_array_count_is_bounded_by_the_smallest_element() -> None:
    # Four partitions of a Fetch v16 need far more than the bytes left after the count.
    body = bytearray(encode(random_entity(FetchRequest, random.Random(1))))
    smallest = min_wire_size(FetchRequest)
    assert smallest > 20
    with pytest.raises(BodyCheckError):
        check_body(FetchRequest, bytes(body[:smallest - 1]), 0)


def test_null_where_the_schema_forbids_it() -> None:
    # DeleteTopics v6 topics: a compact array, not nullable; 0 encodes null.
    body = b"\x00" + struct.pack(">i", 1000) + b"\x00"
    with pytest.raises(BodyCheckError, match="null where the schema requires a value"):
        check_body(DeleteTopicsRequest, body, 0)


def test_null_where_the_schema_allows_it() -> None:
    # Metadata v12 topics=null means "all topics".
    body = encode(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False))
    assert check_body(MetadataRequest, body, 0) == len(body)


def test_legacy_negative_lengths_are_refused() -> None:
    # DescribeConfigs v3 is not flexible: int32 array count, int16 string length.
    body = struct.pack(">i", 1) + b"\x02" + struct.pack(">h", -7) + bytes(16)
    with pytest.raises(BodyCheckError, match="negative length"):
        check_body(DescribeConfigsRequest, body, 0)


def test_unknown_tags_are_skipped_and_oversized_tags_refused() -> None:
    body = encode(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False))
    assert body[-1] == 0  # empty tagged section
    with_unknown_tag = body[:-1] + bytes([1, 99, 3, 1, 2, 3])
    assert check_body(MetadataRequest, with_unknown_tag, 0) == len(with_unknown_tag)
    with pytest.raises(BodyCheckError, match="tag 99"):
        check_body(MetadataRequest, body[:-1] + bytes([1, 99, 0x7F, 1]), 0)


def test_overlong_varint_is_refused() -> None:
    with pytest.raises(BodyCheckError, match="varint longer"):
        check_body(DeleteTopicsRequest, b"\xff" * 8, 0)


def test_checked_bodies_never_abort_kios_readers() -> None:
    """Mutated bodies that pass the check must decode or raise, never abort: run in a child process."""
    code = """
import io, random, resource
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
from kio.serial import entity_writer, entity_reader
from moldau.protocol.body_check import BodyCheckError, check_body
from tests.support.entities import random_entity, schemas
rng = random.Random(7)
types = [s.request_type for s in schemas()]
for _ in range(6000):
    entity_type = rng.choice(types)
    buf = io.BytesIO()
    entity_writer(entity_type)(buf, random_entity(entity_type, rng))
    data = bytearray(buf.getvalue())
    if data:
        i = rng.randrange(len(data))
        if rng.random() < 0.5:
            data[i] ^= 1 << rng.randrange(8)
        else:
            data[i:i + 5] = b"\\xff\\xff\\xff\\xff\\x0f"
    try:
        check_body(entity_type, bytes(data), 0)
    except BodyCheckError:
        continue
    try:
        entity_reader(entity_type)(bytes(data), 0)
    except Exception:
        pass
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


def test_error_responses_encode_for_every_api_with_a_top_level_error_code() -> None:
    answered = 0
    for schema in SCHEMAS:
        response = error_response(schema.response_type, ErrorCode.invalid_request)
        if response is not None:
            assert response.error_code == ErrorCode.invalid_request
            assert check_body(schema.response_type, encode(response), 0) > 0
            answered += 1
    assert answered > 100


def test_no_error_response_where_errors_are_per_item() -> None:
    assert error_response(MetadataResponse, ErrorCode.invalid_request) is None
