"""The direct Produce parser reads what kio reads, without copying records, and refuses malformed input."""

from __future__ import annotations

import datetime
import io
import random
import uuid

import pytest
from kio.serial import entity_writer

from moldau.protocol import codec
from moldau.protocol.codec import InvalidRequest
from moldau.protocol.produce_request import parse_produce_request
from moldau.server.handlers.produce import API as PRODUCE


def kio_request(version: int, rng: random.Random) -> tuple[bytes, object]:
    schema = codec.api_schema(0, version)
    module = __import__(schema.request_type.__module__, fromlist=["x"])
    topics = tuple(
        codec.make(module.TopicProduceData, name=f"topic-{t}" * rng.randint(1, 40), topic_id=uuid.uuid4(),
                   partition_data=tuple(
                       codec.make(module.PartitionProduceData, index=p,
                                  records=rng.choice([None, b"", bytes(rng.randint(1, 300)), bytes(70_000)]))
                       for p in range(rng.randint(0, 3))))
        for t in range(rng.randint(0, 3)))
    request = codec.make(schema.request_type, transactional_id=rng.choice([None, "", "txn-1"]),
                         acks=rng.choice([-1, 0, 1]), timeout=datetime.timedelta(milliseconds=rng.randint(0, 30000)),
                         topic_data=topics)
    buf = io.BytesIO()
    entity_writer(schema.request_type)(buf, request)
    return buf.getvalue(), request


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
def test_matches_kio(version: int) -> None:
    rng = random.Random(version)
    for _ in range(30):
        body, expected = kio_request(version, rng)
        frame = b"HEADER" + body
        ours = parse_produce_request(frame, 6, version)
        assert ours.transactional_id == expected.transactional_id  # type: ignore[attr-defined]
        assert ours.acks == expected.acks  # type: ignore[attr-defined]
        assert ours.timeout_ms == round(expected.timeout.total_seconds() * 1000)  # type: ignore[attr-defined]
        got = [(t.name, t.topic_id, [(p.index, None if p.records is None else bytes(p.records))
                                     for p in t.partition_data]) for t in ours.topic_data]
        want = [(getattr(t, "name", None), getattr(t, "topic_id", None),
                 [(p.index, p.records) for p in t.partition_data])
                for t in expected.topic_data]  # type: ignore[attr-defined]
        assert got == want


def test_records_are_views_into_the_frame() -> None:
    body, _ = kio_request(9, random.Random(3))
    frame = memoryview(bytearray(body)).toreadonly()
    request = parse_produce_request(frame, 0, 9)
    for topic in request.topic_data:
        for partition in topic.partition_data:
            assert partition.records is None or partition.records.obj is frame.obj


@pytest.mark.parametrize("version", [3, 8, 9, 13])
def test_every_truncation_is_invalid_request(version: int) -> None:
    rng = random.Random(100 + version)
    body = b""
    while len(body) < 40:
        body, _ = kio_request(version, rng)
    for cut in range(len(body)):
        try:
            parse_produce_request(body[:cut], 0, version)
        except InvalidRequest:
            continue
        # A shorter prefix may still be a complete request only if it parses to fewer bytes: never silently.
        pytest.fail(f"a request cut at {cut} of {len(body)} bytes was accepted")


def test_unknown_tagged_fields_are_skipped() -> None:
    body, _ = kio_request(9, random.Random(5))
    # The top-level tag section is the last byte (empty); replace it with one unknown tag.
    tagged = body[:-1] + bytes([1, 42, 3, 1, 2, 3])
    assert parse_produce_request(tagged, 0, 9).acks == parse_produce_request(body, 0, 9).acks
