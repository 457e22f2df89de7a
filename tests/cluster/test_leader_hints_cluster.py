"""KIP-951 on a real two-broker cluster: a Produce, Fetch, ShareFetch or ShareAcknowledge sent to a broker that does
not lead the partition is refused with NOT_LEADER_OR_FOLLOWER, names the leader and its epoch, and gives the leader's
address as Metadata does, so that clients (librdkafka 2.4+, Java 3.7+) move without a metadata refresh. Older
versions get no hint."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.fetch.v16 import request as fetch16
from kio.schema.fetch.v17 import request as fetch17
from kio.schema.produce.v9 import request as produce9
from kio.schema.produce.v10 import request as produce10
from kio.schema.produce.v13 import request as produce13
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64

from moldau.protocol.errors import ErrorCode
from tests.support.clients import create_topic
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.raw_client import RawClient

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "hinted"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("leader-hints"), 2) as nodes:
        nodes.active_controller()
        create_topic(nodes.bootstrap, TOPIC)  # one replica: the other broker does not host it
        yield nodes


def roles(cluster: LocalCluster) -> tuple[Any, Any, str]:
    """(the partition's Metadata entry with the leader's broker entry, the metadata, a broker not leading it)."""
    meta = cluster.wait_until(lambda: _led(cluster), 20, f"a leader for {TOPIC}")
    partition = meta.topics[0].partitions[0]
    leader = next(b for b in meta.brokers if b.node_id == partition.leader_id)
    other = next(n.kafka_address for n in cluster.brokers if n.node_id != partition.leader_id)
    assert other is not None
    return partition, leader, other


def _led(cluster: LocalCluster) -> Any:
    meta = metadata_at(cluster.bootstrap.split(",")[0], [TOPIC])
    partitions = meta.topics[0].partitions if meta.topics else ()
    return meta if partitions and partitions[0].leader_id >= 0 else None


def batch() -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
    builder.append(0, timestamp=None, key=None, value=b"v", headers=[])
    return bytes(builder.build())


def produce(module: Any, topic_id: uuid.UUID | None = None) -> Any:
    partition = module.PartitionProduceData(index=i32(0), records=Records(batch()))
    data = module.TopicProduceData(partition_data=(partition,),
                                   **({"topic_id": topic_id} if topic_id else {"name": TopicName(TOPIC)}))
    return module.ProduceRequest(transactional_id=None, acks=i16(1),
                                 timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)), topic_data=(data,))


def fetch(module: Any, topic_id: uuid.UUID) -> Any:
    part = module.FetchPartition(partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                                 last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(1 << 16))
    topic = module.FetchTopic(topic_id=topic_id, partitions=(part,))
    return module.FetchRequest(max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=i32(1),
                               max_bytes=i32(1 << 20), isolation_level=0, session_id=i32(0),
                               session_epoch=i32(-1), topics=(topic,), forgotten_topics_data=(), rack_id="")


@pytest.mark.parametrize("version", [10, 13])
def test_produce_to_a_follower_names_the_leader_and_its_address(cluster: LocalCluster, version: int) -> None:
    partition, leader, other = roles(cluster)
    topic_id = _topic_id(cluster)
    request = produce(produce10 if version == 10 else produce13, topic_id if version == 13 else None)
    with RawClient(other) as client:
        answer = client.request(request)
    part = answer.responses[0].partition_responses[0]
    assert_names_the_leader(answer, part, partition, leader)


def test_produce_before_version_10_gets_no_hint(cluster: LocalCluster) -> None:
    _, _, other = roles(cluster)
    with RawClient(other) as client:
        answer = client.request(produce(produce9))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower
    assert not hasattr(answer, "node_endpoints")


@pytest.mark.parametrize("module", [fetch16, fetch17], ids=["v16", "v17"])
def test_fetch_from_a_follower_names_the_leader_and_its_address(cluster: LocalCluster, module: Any) -> None:
    partition, leader, other = roles(cluster)
    with RawClient(other) as client:
        answer = client.request(fetch(module, _topic_id(cluster)))
    part = answer.responses[0].partitions[0]
    assert_names_the_leader(answer, part, partition, leader)


def test_the_leader_itself_answers_without_hints(cluster: LocalCluster) -> None:
    _, leader, _ = roles(cluster)
    with RawClient(f"{leader.host}:{leader.port}") as client:
        answer = client.request(produce(produce10))
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none and part.current_leader.leader_id == -1
    assert answer.node_endpoints == ()


def assert_names_the_leader(answer: Any, part: Any, partition: Any, leader: Any) -> None:
    """`part` of `answer` is refused, names the leader and epoch Metadata gives, and `answer` gives its address."""
    assert part.error_code == ErrorCode.not_leader_or_follower
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
        partition.leader_id, partition.leader_epoch)
    assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [(leader.node_id, leader.host, leader.port)]


def _topic_id(cluster: LocalCluster) -> uuid.UUID:
    meta = metadata_at(cluster.bootstrap.split(",")[0], [TOPIC])
    topic_id = meta.topics[0].topic_id
    assert isinstance(topic_id, uuid.UUID)
    return topic_id


def test_share_fetch_and_acknowledge_from_a_follower_name_the_leader(cluster: LocalCluster) -> None:
    """KIP-932's share APIs carry the same two fields: a share consumer's fetch or acknowledgement that reaches a
    broker that does not lead the partition learns where the leader is."""
    from kio.schema.share_acknowledge.v1 import request as share_ack
    from kio.schema.share_fetch.v1 import request as share_fetch

    partition, leader, other = roles(cluster)
    topic_id = _topic_id(cluster)
    fetch_request = share_fetch.ShareFetchRequest(
        group_id=GroupId("hinted-share"), member_id=str(uuid.uuid4()), share_session_epoch=i32(0),
        max_wait=i32Timedelta.parse(datetime.timedelta(0)), min_bytes=i32(1), max_records=i32(10),
        batch_size=i32(10), topics=(share_fetch.FetchTopic(topic_id=topic_id, partitions=(
            share_fetch.FetchPartition(partition_index=i32(0), acknowledgement_batches=()),)),),
        forgotten_topics_data=())
    with RawClient(other) as client:
        fetched = client.request(fetch_request)
        acked = client.request(share_ack.ShareAcknowledgeRequest(
            group_id=GroupId("hinted-share"), member_id=fetch_request.member_id, share_session_epoch=i32(1),
            topics=(share_ack.AcknowledgeTopic(topic_id=topic_id, partitions=(share_ack.AcknowledgePartition(
                partition_index=i32(0), acknowledgement_batches=(share_ack.AcknowledgementBatch(
                    first_offset=i64(0), last_offset=i64(0), acknowledge_types=(i8(1),)),)),)),)))
    assert_names_the_leader(fetched, fetched.responses[0].partitions[0], partition, leader)
    assert_names_the_leader(acked, acked.responses[0].partitions[0], partition, leader)
