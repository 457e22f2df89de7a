"""AddPartitionsToTxn (key 24): add partitions to a producer's transaction, before it writes to them.

v0-v3 come from producers: one transactional id and its partitions. Partitions of unknown topics get
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing is added, as in Kafka). v4 comes from
brokers: several transactions, each possibly `verify_only` (KIP-890: "is this partition already in the open
transaction?", asked by a partition leader before a producer's first transactional write to it). Adding
partitions to a batched (v4) request is not done for clients, which never send v4.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from moldau.coordinator.txn.records import TopicPartition
from moldau.coordinator.txn.runtime import fence_code_for
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

PRODUCER_FENCED_FROM = 2
BATCHED_FROM = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= BATCHED_FROM:
        # v4+ is what brokers send each other (KIP-890 verification): CLUSTER_ACTION, as Kafka asks.
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                        error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=())
        results = tuple([await _transaction(ctx, t) for t in request.transactions])
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                    results_by_transaction=results)
    partitions = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    errors = await _add(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                        request.v3_and_below_producer_epoch, partitions, verify_only=False)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                results_by_topic_v3_and_below=_topic_results(ctx, errors))


async def _transaction(ctx: RequestContext, txn: Any) -> Any:
    partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
    errors = await _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions, txn.verify_only)
    return make(ctx.nested("AddPartitionsToTxnResult"), transactional_id=txn.transactional_id,
                topic_results=_topic_results(ctx, errors))


async def _add(ctx: RequestContext, transactional_id: str, producer_id: int, epoch: int,
               partitions: Sequence[TopicPartition], verify_only: bool) -> dict[TopicPartition, ErrorCode]:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    refused = {tp for tp in partitions if not ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, tp[0])}
    if refused:
        return {tp: ErrorCode.topic_authorization_failed if tp in refused else ErrorCode.operation_not_attempted
                for tp in partitions}
    txn = ctx.broker.txn
    if verify_only:
        return txn.verify_partitions(transactional_id, producer_id, epoch, partitions)
    image = ctx.broker.image
    unknown = {tp for tp in partitions
               if tp[0] not in image.topics_by_name or tp[1] not in image.topics_by_name[tp[0]].partitions}
    if unknown:
        return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                for tp in partitions}
    error = await txn.add_partitions(transactional_id, producer_id, epoch, partitions,
                                     fence_code_for(PRODUCER_FENCED_FROM, ctx.version))
    return dict.fromkeys(partitions, error)


def _topic_results(ctx: RequestContext, errors: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    cls = ctx.nested("AddPartitionsToTxnPartitionResult")
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(make(cls, partition_index=partition, partition_error_code=code))
    topic_cls = ctx.nested("AddPartitionsToTxnTopicResult")
    return tuple(make(topic_cls, name=t, results_by_partition=tuple(ps)) for t, ps in by_topic.items())


API = Api(key=24, name="AddPartitionsToTxn", min_version=0, max_version=4, handle=handle)
