"""Bad input: each malformed request gets Kafka's error code or a closed connection, the broker keeps serving
other clients, and stored data is not harmed."""

from __future__ import annotations

import datetime
import struct
import time
from collections.abc import Iterator

import crc32c
import pytest
from confluent_kafka import KafkaError as CKError
from confluent_kafka import Message, Producer
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9 import request as produce_req
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, create_topic
from tests.support.raw_client import RawClient

TOPIC = "bad-input"


def build_batch(values: list[bytes], compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=2**20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=None, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce_request(records: bytes | None, topic: str = TOPIC, partition: int = 0, acks: int = 1) -> object:
    return produce_req.ProduceRequest(
        transactional_id=None, acks=i16(acks), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(produce_req.TopicProduceData(
            name=TopicName(topic), partition_data=(produce_req.PartitionProduceData(
                index=i32(partition), records=None if records is None else Records(records)),)),),
    )


def fetch_request(offset: int = 0, topic: str = TOPIC) -> object:
    return fetch_req.FetchRequest(
        replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=i32(0),
        max_bytes=i32(2**20), isolation_level=i8(0),
        session_id=i32(0), session_epoch=i32(-1), forgotten_topics_data=(), rack_id="",
        topics=(fetch_req.FetchTopic(topic=TopicName(topic), partitions=(fetch_req.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset), log_start_offset=i64(-1),
            partition_max_bytes=i32(2**20)),)),),
    )


def produce_error(client: RawClient, records: bytes | None) -> tuple[ErrorCode, int]:
    response = client.request(produce_request(records))
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def stored_values(client: RawClient) -> list[bytes]:
    from kafka.record.default_records import DefaultRecordBatch

    response = client.request(fetch_request())
    records = response.responses[0].partitions[0].records or b""
    values, pos = [], 0
    while pos < len(records):
        size = struct.unpack_from(">i", records, pos + 8)[0] + 12
        values += [r.value for r in DefaultRecordBatch(records[pos : pos + size])]
        pos += size
    return values


@pytest.fixture
def seeded(broker: BrokerProcess) -> Iterator[BrokerProcess]:
    """A broker with a topic holding two known records."""
    with RawClient(broker.bootstrap) as client:
        client.request(MetadataRequest(topics=(MetadataRequestTopic(name=TopicName(TOPIC), topic_id=None),),
                                       allow_auto_topic_creation=True, include_topic_authorized_operations=False))
        assert produce_error(client, build_batch([b"one", b"two"])) == (ErrorCode.none, 0)
    yield broker


def assert_still_serving(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        assert stored_values(client) == [b"one", b"two"]


def test_wrong_crc_is_corrupt_message(seeded: BrokerProcess) -> None:
    batch = bytearray(build_batch([b"x"]))
    batch[-1] ^= 0xFF
    with RawClient(seeded.bootstrap) as client:
        assert produce_error(client, bytes(batch))[0] == ErrorCode.corrupt_message
    assert_still_serving(seeded)


def test_truncated_batch_is_corrupt_message(seeded: BrokerProcess) -> None:
    batch = build_batch([b"x" * 100])
    with RawClient(seeded.bootstrap) as client:
        assert produce_error(client, batch[:-10])[0] == ErrorCode.corrupt_message
        assert produce_error(client, batch[:30])[0] == ErrorCode.corrupt_message
    assert_still_serving(seeded)


def test_lying_batch_length_is_corrupt_message(seeded: BrokerProcess) -> None:
    batch = bytearray(build_batch([b"x"]))
    struct.pack_into(">i", batch, 8, 2**30)
    with RawClient(seeded.bootstrap) as client:
        assert produce_error(client, bytes(batch))[0] == ErrorCode.corrupt_message
    assert_still_serving(seeded)


def test_old_magic_is_rejected(seeded: BrokerProcess) -> None:
    batch = bytearray(build_batch([b"x"]))
    batch[16] = 1
    with RawClient(seeded.bootstrap) as client:
        code, _ = produce_error(client, bytes(batch))
    assert code in (ErrorCode.unsupported_for_message_format, ErrorCode.corrupt_message)
    assert_still_serving(seeded)


def test_unknown_compression_is_rejected(seeded: BrokerProcess) -> None:
    batch = bytearray(build_batch([b"x"]))
    struct.pack_into(">h", batch, 21, 7)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with RawClient(seeded.bootstrap) as client:
        assert produce_error(client, bytes(batch))[0] == ErrorCode.unsupported_compression_type
    assert_still_serving(seeded)


def test_empty_records_and_garbage_records(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        assert produce_error(client, b"")[0] == ErrorCode.corrupt_message
        assert produce_error(client, None)[0] == ErrorCode.corrupt_message
        assert produce_error(client, b"\x00" * 100)[0] == ErrorCode.corrupt_message
    assert_still_serving(seeded)


def test_unknown_partition_and_bad_acks(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        response = client.request(produce_request(build_batch([b"x"]), partition=99))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
        response = client.request(produce_request(build_batch([b"x"]), acks=2))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks
    assert_still_serving(seeded)


@pytest.mark.broker_config({"message.max.bytes": "2000"})
def test_batch_over_message_max_bytes(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        assert produce_error(client, build_batch([b"x" * 5000]))[0] == ErrorCode.message_too_large
    assert_still_serving(seeded)


@pytest.mark.parametrize("prefix", [2**31 - 1, 200 * 2**20, -5])
def test_oversized_or_negative_size_prefix_closes_connection(seeded: BrokerProcess, prefix: int) -> None:
    with RawClient(seeded.bootstrap) as client:
        client.send_raw(struct.pack(">i", prefix) + b"\x00" * 16)
        assert client.is_closed_by_peer()
    assert_still_serving(seeded)


def test_unknown_api_key_closes_connection(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        payload = struct.pack(">hhih", 9999, 0, 1, -1)
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        assert client.is_closed_by_peer()
    assert_still_serving(seeded)


def test_unsupported_version_of_other_api_closes_connection(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        payload = struct.pack(">hhih", 3, 99, 1, -1) + b"\x00" * 10
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        assert client.is_closed_by_peer()
    assert_still_serving(seeded)


def test_unknown_api_versions_version_gets_v0_answer(seeded: BrokerProcess) -> None:
    """KIP-511: answer with a v0 response carrying UNSUPPORTED_VERSION and our ranges."""
    with RawClient(seeded.bootstrap) as client:
        payload = struct.pack(">hhih", 18, 99, 5, -1) + b"\x00\x00\x00"
        client.send_raw(struct.pack(">i", len(payload)) + payload)
        client.correlation_id = 5
        response = client.read_response(18, 0)
        assert response.error_code == ErrorCode.unsupported_version
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[18] == (0, 4)
        # The connection stays usable: the client retries with a version we know.
        answer = client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert answer.error_code == ErrorCode.none


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x00\x04\xff\xff\xff\xff",
    b"\x00\x00\x00\x0a" + b"\x00\x03\x00\x0c\x00\x00\x00\x01\x7f\xff",
    b"\x00\x00\x00\x20" + b"\x00\x00\x00\x09" + b"\xfe" * 28,
])
def test_garbage_frames_close_connection(seeded: BrokerProcess, garbage: bytes) -> None:
    with RawClient(seeded.bootstrap) as client:
        client.send_raw(garbage)
        assert client.is_closed_by_peer()
    assert_still_serving(seeded)


def test_half_a_frame_then_disconnect(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        client.send_raw(struct.pack(">i", 1000) + b"\x00" * 10)
    assert_still_serving(seeded)


def test_random_bytes_fuzz(seeded: BrokerProcess) -> None:
    import random

    rng = random.Random(1234)
    for _ in range(200):
        size = rng.randint(0, 64)
        body = bytes(rng.getrandbits(8) for _ in range(size))
        with RawClient(seeded.bootstrap, timeout_s=5) as client:
            client.send_raw(struct.pack(">i", len(body)) + body)
            # Either an answer or a closed connection; never a hang beyond the timeout or a dead broker.
            client.is_closed_by_peer(timeout_s=2)
    assert_still_serving(seeded)


def test_other_clients_keep_being_served_while_one_misbehaves(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as bad, RawClient(seeded.bootstrap) as good:
        bad.send_raw(struct.pack(">i", 500))  # announces a frame and never sends it
        assert stored_values(good) == [b"one", b"two"]
        assert produce_error(good, build_batch([b"three"])) == (ErrorCode.none, 2)


def test_fetch_offset_out_of_range(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        response = client.request(fetch_request(offset=1000))
        part = response.responses[0].partitions[0]
        assert part.error_code == ErrorCode.offset_out_of_range
        assert part.high_watermark == 2


def test_failed_acks_0_produce_closes_the_connection(seeded: BrokerProcess) -> None:
    with RawClient(seeded.bootstrap) as client:
        client.send_raw(client.encode(produce_request(build_batch([b"x"]), partition=99, acks=0)))
        assert client.is_closed_by_peer()
    with RawClient(seeded.bootstrap) as client:
        client.send_raw(client.encode(produce_request(build_batch([b"three"]), acks=0)))
        assert not client.is_closed_by_peer(timeout_s=1)  # a good acks=0 produce: no answer, no close
    assert_still_serving_with_three(seeded)


def assert_still_serving_with_three(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as client:
        assert stored_values(client) == [b"one", b"two", b"three"]


# -- record-level validation: a batch whose CRC is right but whose records lie ------------------------------------

def with_records(batch: bytes, records: bytes, count: int | None = None, compression: int | None = None) -> bytes:
    """`batch`'s header over another records section, with length, count, codec and CRC made consistent."""
    out = bytearray(batch[:61]) + records
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
        struct.pack_into(">i", out, 23, count - 1)
    if compression is not None:
        struct.pack_into(">h", out, 21, compression)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def refused(client: RawClient, batch: bytes) -> tuple[ErrorCode, list[tuple[int, str]], str | None]:
    response = client.request(produce_request(batch))
    part = response.responses[0].partition_responses[0]
    errors = [(e.batch_index, e.batch_index_error_message) for e in part.record_errors]
    return part.error_code, errors, part.error_message


def second_offset_delta_set_to(batch: bytes, delta: int) -> bytes:
    records = bytearray(batch[61:])
    second = 1 + records[0] // 2  # after the first record's one-byte zigzag length and its body
    assert records[second + 3] == 2  # length, attributes, timestamp delta, then offset delta 1 (zigzag 2)
    records[second + 3] = delta * 2
    return with_records(batch, bytes(records))


@pytest.mark.parametrize("kind", ["count", "garbage", "value_past_record", "offset_delta", "compressed_garbage"])
def test_batches_whose_records_lie_are_refused_and_consumers_keep_reading(seeded: BrokerProcess, kind: str) -> None:
    good = build_batch([b"x", b"y"])
    batch = {
        "count": with_records(good, good[61:], count=1_000_000),
        "garbage": with_records(good, b"\x7f" * 40, count=2),
        "value_past_record": with_records(good, good[61:].replace(b"\x02", b"\x7e", 1), count=2),
        "offset_delta": second_offset_delta_set_to(good, 40),
        "compressed_garbage": with_records(build_batch([b"x"] * 50, compression=4), b"\x28\xb5\x2f\xfd" + b"\x00" * 40,
                                           compression=4),
    }[kind]
    with RawClient(seeded.bootstrap) as client:
        code, record_errors, message = refused(client, batch)
        assert code in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
        assert record_errors and message
        # Nothing of it was appended: the next valid batch takes offset 2.
        assert produce_error(client, build_batch([b"three"])) == (ErrorCode.none, 2)
    values = [r.value for r in ck_consume(seeded.bootstrap, TOPIC, 3, timeout_s=20)]
    assert values == [b"one", b"two", b"three"]


def test_a_record_without_a_key_on_a_compacted_topic_is_invalid_record(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "compacted-keys", config={"cleanup.policy": "compact"})
    errors = produce_and_collect_errors(broker.bootstrap, "compacted-keys", [{"key": b"k", "value": b"1"},
                                                                              {"value": b"no key"}])
    assert CKError.INVALID_RECORD in errors


def test_a_timestamp_too_far_ahead_is_invalid_timestamp(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "future")
    ahead = int(time.time() * 1000) + 48 * 3600 * 1000  # after.max.ms defaults to one hour
    errors = produce_and_collect_errors(broker.bootstrap, "future", [{"value": b"late", "timestamp": ahead}])
    assert errors == [CKError.INVALID_TIMESTAMP]


def produce_and_collect_errors(bootstrap: str, topic: str, records: list[dict[str, object]]) -> list[int]:
    """Produce with confluent-kafka, one record per batch; the error code of each failed delivery."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "retries": 0,
                         "enable.idempotence": False})
    failures: list[int] = []

    def delivered(err: CKError | None, _msg: Message) -> None:
        if err:
            failures.append(err.code())

    for record in records:
        producer.produce(topic, on_delivery=delivered, **record)  # type: ignore[arg-type]
        producer.flush(20)
    return failures
