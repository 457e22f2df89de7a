"""AlterPartition (key 56): a partition leader asks the controller to commit a new ISR.

Served on the controller listener by the active controller. Each partition is validated and committed on its
own (`Controller.alter_partition`); the answer carries the partition as committed (leader, leader epoch, ISR,
partition epoch), which the leader adopts. v2 names ISR members by id, v3 with their broker epochs (KIP-903):
a member whose broker has registered again since the leader saw it fetch is INELIGIBLE_REPLICA. A change that
completes a reassignment by moving leadership off the sender is answered NEW_LEADER_ELECTED, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.controller import Controller
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await serve(ctx.broker.controller, request, ctx.schema.response_module, ctx.schema.response_type)


async def serve(controller: Controller, request: Any, module: Any, response_type: Any) -> Any:
    """The answer of `controller` to `request`; also called directly when the leader is the active controller.
    A node that is not the active controller answers NOT_CONTROLLER per partition (the sender retries)."""
    topics = []
    for topic in request.topics:
        parts = [await _alter(controller, request, topic.topic_id, part, module) for part in topic.partitions]
        topics.append(make(module.TopicData, topic_id=topic.topic_id, partitions=tuple(parts)))
    return make(response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, topics=tuple(topics))


async def _alter(controller: Controller, request: Any, topic_id: Any, part: Any, module: Any) -> Any:
    isr, member_epochs = _isr(part)
    try:
        now = await controller.alter_partition(request.broker_id, request.broker_epoch, topic_id,
                                               part.partition_index, part.leader_epoch, part.partition_epoch, isr,
                                               member_epochs)
    except KafkaError as exc:
        return _failed(part, exc.code, module)
    if now.leader != request.broker_id:
        # Applied, and the change completed a reassignment that moved leadership off the sender (Kafka's answer
        # too): the sender must not adopt this ISR as its own, and stops leading when the metadata reaches it.
        return _failed(part, ErrorCode.new_leader_elected, module)
    return make(module.PartitionData, partition_index=part.partition_index, error_code=ErrorCode.none,
                leader_id=now.leader, leader_epoch=now.leader_epoch, isr=now.isr, partition_epoch=now.partition_epoch)


def _failed(part: Any, code: ErrorCode, module: Any) -> Any:
    return make(module.PartitionData, partition_index=part.partition_index, error_code=code, leader_id=-1,
                leader_epoch=-1, isr=(), partition_epoch=-1)


def _isr(part: Any) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """The proposed ISR, and its members' broker epochs (v3; None before)."""
    with_epochs = getattr(part, "new_isr_with_epochs", None)
    if with_epochs is not None:
        return tuple(int(b.broker_id) for b in with_epochs), tuple(int(b.broker_epoch) for b in with_epochs)
    return tuple(int(b) for b in part.new_isr), None


API = Api(key=56, name="AlterPartition", min_version=2, max_version=3, handle=handle)
