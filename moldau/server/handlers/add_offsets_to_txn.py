"""AddOffsetsToTxn (key 25): make a group's offset commits part of a producer's transaction.

The transaction gains the group's `__consumer_offsets` partition, so the coordinator writes its marker there too;
the offsets themselves come with TxnOffsetCommit, sent to the group coordinator.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.group.records import OFFSETS_TOPIC
from moldau.coordinator.txn.runtime import fence_code_for
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

PRODUCER_FENCED_FROM = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    await broker.ensure_offsets_topic()
    try:
        broker.groups.coordinator.ensure_topic()
    except KafkaError as exc:
        return _response(ctx, exc.code)
    partition = broker.groups.coordinator.partition_of(request.group_id)
    error = await broker.txn.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                                            [(OFFSETS_TOPIC, partition)], fence_code_for(PRODUCER_FENCED_FROM,
                                                                                         ctx.version))
    return _response(ctx, error)


def _response(ctx: RequestContext, code: ErrorCode) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code)


API = Api(key=25, name="AddOffsetsToTxn", min_version=0, max_version=3, handle=handle)
