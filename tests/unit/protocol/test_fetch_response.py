"""The direct Fetch encoder produces exactly kio's bytes, for every served version."""

from __future__ import annotations

import datetime
import io
import os
import random
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from moldau.protocol import codec
from moldau.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from moldau.protocol.leader_hints import NodeEndpoint
from moldau.protocol.wire import FileRegion, Part
from moldau.server.handlers.fetch import API as FETCH
from tests.support.wire import in_memory


def kio_bytes(version: int, session_id: int, topics: list[TopicResult], endpoints: Sequence[NodeEndpoint] = ()
              ) -> bytes:
    schema = codec.api_schema(1, version)
    part_cls = codec.nested(schema, "PartitionData")
    aborted_cls = codec.nested(schema, "AbortedTransaction")
    epoch_cls = codec.nested(schema, "EpochEndOffset") if version >= 12 else None
    topic_cls = codec.nested(schema, "FetchableTopicResponse")
    kio_topics = tuple(
        codec.make(topic_cls, topic=t.name, topic_id=t.topic_id, partitions=tuple(
            codec.make(part_cls, partition_index=p.partition, error_code=ErrorCode(p.error_code),
                       high_watermark=p.high_watermark, last_stable_offset=p.last_stable_offset,
                       log_start_offset=p.log_start_offset, preferred_read_replica=p.preferred_read_replica,
                       aborted_transactions=None if p.aborted_transactions is None else tuple(
                           aborted_cls(producer_id=a, first_offset=b) for a, b in p.aborted_transactions),
                       records=_held_bytes(p.records),
                       **_diverging(epoch_cls, p), **_leader(schema, p))
            for p in t.partitions))
        for t in topics)
    endpoint_cls = getattr(schema.response_module, "NodeEndpoint", None)
    kio_endpoints = () if endpoint_cls is None else tuple(
        endpoint_cls(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack) for e in endpoints)
    response = codec.make(schema.response_type, throttle_time=datetime.timedelta(milliseconds=7),
                          error_code=ErrorCode.none, session_id=session_id, responses=kio_topics,
                          node_endpoints=kio_endpoints)
    buf = io.BytesIO()
    entity_writer(schema.response_type)(buf, response)
    return buf.getvalue()


def _held_bytes(records: Part | tuple[FileRegion, ...] | None) -> bytes | None:
    """A partition's records as kio takes them; these results hold their bytes, not regions of files."""
    if isinstance(records, tuple):
        raise AssertionError(f"file regions {records} where the records should be bytes")
    return None if records is None else bytes(records)


def _diverging(epoch_cls: Any, p: PartitionResult) -> dict[str, Any]:
    if epoch_cls is None or p.diverging_epoch is None:
        return {}
    return {"diverging_epoch": epoch_cls(epoch=p.diverging_epoch[0], end_offset=p.diverging_epoch[1])}


def _leader(schema: Any, p: PartitionResult) -> dict[str, Any]:
    leader_cls = getattr(schema.response_module, "LeaderIdAndEpoch", None)
    if leader_cls is None or p.current_leader is None:
        return {}
    return {"current_leader": leader_cls(leader_id=p.current_leader[0], leader_epoch=p.current_leader[1])}


def random_topics(rng: random.Random, version: int = 0) -> list[TopicResult]:
    topics = []
    for t in range(rng.randint(0, 3)):
        partitions = []
        for p in range(rng.randint(0, 4)):
            records = rng.choice([None, b"", bytes(rng.randint(1, 100)), bytes(5000), bytes(300) * 40])
            aborted = rng.choice([None, [], [(rng.randint(0, 99), rng.randint(0, 999)) for _ in range(3)]])
            partitions.append(PartitionResult(p, rng.choice([0, 1, 3]), rng.randint(-1, 10**12),
                                              rng.randint(-1, 10**6), rng.randint(-1, 10**6), aborted,
                                              rng.choice([-1, 2]), records))
            if version >= 12 and rng.random() < 0.5:
                partitions[-1].diverging_epoch = (rng.randint(0, 99), rng.randint(0, 10**9))
            if version >= 12 and rng.random() < 0.3:
                partitions[-1].current_leader = (rng.randint(0, 9), rng.randint(0, 10**6))
        topics.append(TopicResult(f"topic-{t}" * rng.randint(1, 30), uuid.uuid4(), partitions))
    return topics


@pytest.mark.parametrize("version", range(FETCH.min_version, FETCH.max_version + 1))
def test_matches_kio_for_every_served_version(version: int) -> None:
    rng = random.Random(version)
    for _ in range(30):
        topics = random_topics(rng, version)
        session_id = rng.choice([0, 12345])
        endpoints = [NodeEndpoint(n, f"broker-{n}.example" * rng.randint(1, 9), rng.randint(1, 65535),
                                  rng.choice([None, "rack-a"])) for n in range(rng.choice([0, 0, 1, 3]))]
        ours = in_memory(encode_fetch_response(version, 7, 0, session_id, topics, endpoints))
        assert ours == kio_bytes(version, session_id, topics, endpoints if version >= 16 else ())


def test_large_records_are_passed_through_without_copy() -> None:
    records = memoryview(bytes(1 << 20))
    parts = encode_fetch_response(16, 0, 0, 0, [TopicResult(None, uuid.uuid4(), [PartitionResult(0, 0, 1, 1, 0,
                                                                                              None, -1, records)])])
    assert any(part is records for part in parts)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_file_regions_stand_for_their_bytes(version: int, tmp_path: Any) -> None:
    """Records left in files encode to the same frame as the bytes, the regions as parts of their own."""
    data = random.Random(version).randbytes(300_000)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    with open(path, "rb") as file:
        regions = (FileRegion(file.fileno(), 10, 100_000), FileRegion(file.fileno(), 100_010, 150_000))
        in_files = [TopicResult("t", uuid.uuid4(), [PartitionResult(0, 0, 5, 5, 0, None, -1, regions)])]
        in_memory_topics = [TopicResult(in_files[0].name, in_files[0].topic_id,
                                        [PartitionResult(0, 0, 5, 5, 0, None, -1, data[10:250_010])])]
        parts = encode_fetch_response(version, 0, 0, 0, in_files)
        assert [part for part in parts if isinstance(part, FileRegion)] == list(regions)
        filled = b"".join(os.pread(p.fd, p.size, p.position) if isinstance(p, FileRegion) else bytes(p)
                          for p in parts)
    assert filled == in_memory(encode_fetch_response(version, 0, 0, 0, in_memory_topics))
