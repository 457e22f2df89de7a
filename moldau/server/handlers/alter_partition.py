"""AlterPartition (key 56): a partition leader asks the controller to commit a new ISR.

Served on the controller listener by the active controller. Each partition is validated and committed on its
own (`Controller.alter_partition`); the answer carries the partition as committed (leader, leader epoch, ISR,
partition epoch), which the leader adopts. v2 names ISR members by id, v3 with their broker epochs (KIP-903);
the epochs are not checked here: a fenced broker cannot join an ISR at all.
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
    isr = _isr(part)
    try:
        now = await controller.alter_partition(request.broker_id, request.broker_epoch, topic_id,
                                               part.partition_index, part.leader_epoch, part.partition_epoch, isr)
    except KafkaError as exc:
        return make(module.PartitionData, partition_index=part.partition_index, error_code=exc.code, leader_id=-1,
                    leader_epoch=-1, isr=(), partition_epoch=-1)
    return make(module.PartitionData, partition_index=part.partition_index, error_code=ErrorCode.none,
                leader_id=now.leader, leader_epoch=now.leader_epoch, isr=now.isr, partition_epoch=now.partition_epoch)


def _isr(part: Any) -> tuple[int, ...]:
    with_epochs = getattr(part, "new_isr_with_epochs", None)
    if with_epochs is not None:
        return tuple(int(b.broker_id) for b in with_epochs)
    return tuple(int(b) for b in part.new_isr)


API = Api(key=56, name="AlterPartition", min_version=2, max_version=3, handle=handle)
