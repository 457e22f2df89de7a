"""The dead-letter topic of share groups (KIP-1191): records a share group gives up on, written to the topic its
`errors.deadletterqueue.topic.name` group config names.

A record goes there when a member REJECTs it or when it is released (or its lock expires) after its last allowed
delivery (`share.delivery.count.limit`). The share-partition notes those as `ArchivedRecord` events; once their
archiving is durable, the share-partition leader produces one record per event to the dead-letter topic, on
partition `source partition % dead-letter partitions`, with Kafka's context headers:

    __dlq.errors.topic, __dlq.errors.partition, __dlq.errors.offset, __dlq.errors.group,
    __dlq.errors.delivery.count, __dlq.errors.message

and, when `errors.deadletterqueue.copy.record.enable` is true, the original record's key, value and headers.

Delivery is best effort and at most once: a record whose write fails (no such topic, no leader, a broker down) is
logged and not retried, since its archiving, already durable, is what the group relies on. The topic is not
created here: it must exist.
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING

import kio.schema.produce.v9.request as produce_req

from moldau.net.client import ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import MAGIC_V2, BatchHeader
from moldau.protocol.record_codec import Header, StoredRecord, decode_batch, whole_batches
from moldau.share.partition import ArchivedRecord, ArchiveReason
from moldau.share.settings import ShareBrokerSettings
from moldau.storage.batch_rewrite import rebuild_batch

if TYPE_CHECKING:
    from moldau.server.broker import Broker
    from moldau.share.manager import PartitionKey

log = logging.getLogger(__name__)

_READ_BYTES = 1024 * 1024
MESSAGES = {
    ArchiveReason.REJECTED: "Offset rejected by client.",
    ArchiveReason.DELIVERY_COUNT_EXCEEDED: "Offset delivery count exceeded the threshold.",
}

Original = tuple[bytes | None, bytes | None, tuple[Header, ...]]  # key, value, headers


class DeadLetters:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._pool = ConnectionPool(f"moldau-dlq-{broker.node_id}", broker.inter_broker_security,
                                    broker.inter_broker_authenticator(), broker.client_timeouts.setup)

    def close(self) -> None:
        self._pool.close()

    async def __call__(self, key: PartitionKey, settings: ShareBrokerSettings, archived: list[ArchivedRecord]
                       ) -> None:
        group_id, topic, partition = key
        target = self._broker.image.topics_by_name.get(settings.dead_letter_topic)
        if target is None or not target.partitions:
            log.warning("share group %s: dead-letter topic %s does not exist; %d records of %s-%d not written",
                        group_id, settings.dead_letter_topic, len(archived), topic, partition)
            return
        originals = self._originals(topic, partition, archived) if settings.dead_letter_copy_record else {}
        now_ms = self._broker.clock.time_ms()
        records = []
        for i, event in enumerate(archived):
            record_key, value, headers = originals.get(event.offset, (None, None, ()))
            records.append(StoredRecord(i, now_ms, record_key, value, headers + _context(group_id, topic, partition,
                                                                                          event)))
        target_partition = partition % len(target.partitions)
        await self._produce(target.name, target_partition, _new_batch(records, now_ms), len(archived), group_id)

    def _originals(self, topic: str, partition: int, archived: list[ArchivedRecord]) -> dict[int, Original]:
        """The archived records as the log holds them (those it still has)."""
        hosted = self._broker.replicas.partitions.get((topic, partition))
        wanted = {e.offset for e in archived}
        found: dict[int, Original] = {}
        if hosted is None:
            return found
        offset, last = min(wanted), max(wanted)
        while offset <= last:
            data = hosted.log.read(offset, _READ_BYTES, True).read_bytes()
            if not data:
                break
            for header, batch in whole_batches(data):
                if not header.is_control:
                    for record in decode_batch(batch):
                        if record.offset in wanted:
                            found[record.offset] = (record.key, record.value, record.headers)
                offset = max(offset, header.next_offset)
        return found

    async def _produce(self, topic: str, partition: int, records: bytes, count: int, group_id: str) -> None:
        image = self._broker.image.topics_by_name[topic].partitions[partition]
        address = self._broker.inter_broker_address(image.leader)
        if address is None:
            log.warning("dead-letter topic %s-%d has no leader; %d records of group %s not written", topic,
                        partition, count, group_id)
            return
        timeout_s = self._broker.client_timeouts.request_timeout_s  # request.timeout.ms, the acks' wait too
        request = make(produce_req.ProduceRequest, transactional_id=None, acks=-1,
                       timeout=datetime.timedelta(seconds=timeout_s),
                       topic_data=(make(produce_req.TopicProduceData, name=topic, partition_data=(
                           make(produce_req.PartitionProduceData, index=partition, records=records),)),))
        try:
            response = await self._pool.request(*address, request, timeout_s)
        except (ConnectionFailed, TimeoutError) as exc:
            log.warning("writing %d records of group %s to dead-letter topic %s failed: %s", count, group_id, topic,
                        exc)
            return
        error = ErrorCode(response.responses[0].partition_responses[0].error_code)
        if error != ErrorCode.none:
            log.warning("dead-letter topic %s-%d refused %d records of group %s: %s", topic, partition, count,
                        group_id, error.name)


def _new_batch(records: list[StoredRecord], now_ms: int) -> bytes:
    """An uncompressed batch of `records` (offsets from 0) without a producer id, as a plain producer sends."""
    header = BatchHeader(base_offset=0, batch_length=0, partition_leader_epoch=-1, magic=MAGIC_V2, crc=0,
                         attributes=0, last_offset_delta=len(records) - 1, base_timestamp=now_ms,
                         max_timestamp=now_ms, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                         records_count=len(records))
    return rebuild_batch(header, records, None)


def _context(group_id: str, topic: str, partition: int, event: ArchivedRecord) -> tuple[Header, ...]:
    return (("__dlq.errors.topic", topic.encode()), ("__dlq.errors.partition", str(partition).encode()),
            ("__dlq.errors.offset", str(event.offset).encode()), ("__dlq.errors.group", group_id.encode()),
            ("__dlq.errors.delivery.count", str(event.delivery_count).encode()),
            ("__dlq.errors.message", MESSAGES[event.reason].encode()))
