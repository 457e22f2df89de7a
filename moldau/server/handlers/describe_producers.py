"""DescribeProducers (key 61): the producers a partition leader remembers, with their open transactions.

For each requested partition led here: every producer id in the partition's producer state, with its epoch,
last sequence (-1 when it wrote no sequenced batch), last timestamp, the coordinator epoch of its last marker
and the first offset of its ongoing transaction here (-1 when none). Admin tools use it to find hanging
transactions. A partition not hosted here is UNKNOWN_TOPIC_OR_PARTITION, one followed but not led here
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    topic_cls = ctx.nested("TopicResponse")
    topics = tuple(
        make(topic_cls, name=t.name, partitions=tuple(_partition(ctx, t.name, p) for p in t.partition_indexes))
        for t in request.topics
    )
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics)


def _partition(ctx: RequestContext, topic: str, index: int) -> Any:
    cls = ctx.nested("PartitionResponse")
    try:
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic):
            raise KafkaError(ErrorCode.topic_authorization_failed, f"{ctx.principal} may not read {topic}")
        plog = ctx.broker.replicas.leader_partition(topic, index).log
        producers = plog.active_producers()
    except KafkaError as exc:
        return make(cls, partition_index=index, error_code=exc.code, error_message=exc.message,
                    active_producers=())
    state_cls = ctx.nested("ProducerState")
    states = tuple(
        make(state_cls, producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
             last_timestamp=p.last_timestamp_ms, coordinator_epoch=p.coordinator_epoch,
             current_txn_start_offset=p.current_txn_start_offset)
        for p in producers
    )
    return make(cls, partition_index=index, error_code=ErrorCode.none, error_message=None, active_producers=states)


API = Api(key=61, name="DescribeProducers", min_version=0, max_version=0, handle=handle)
