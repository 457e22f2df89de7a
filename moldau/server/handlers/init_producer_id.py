"""InitProducerId (key 22): give an idempotent producer its producer id and epoch.

Without a transactional id every call gets a fresh producer id with epoch 0, as in Kafka; ids come from a
block reserved durably through the controller, so an id is never handed out twice, even across restarts.
Transactional ids need the transaction coordinator, which does not exist yet: those requests are refused
with COORDINATOR_NOT_AVAILABLE rather than given a producer that cannot work.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return _response(ctx, ErrorCode.coordinator_not_available, -1, -1)
    try:
        producer_id = await ctx.broker.next_producer_id()
    except KafkaError as exc:
        return _response(ctx, exc.code, -1, -1)  # clients retry COORDINATOR_NOT_AVAILABLE
    return _response(ctx, ErrorCode.none, producer_id, 0)


def _response(ctx: RequestContext, code: ErrorCode, producer_id: int, epoch: int) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, producer_id=producer_id,
                producer_epoch=epoch, ongoing_txn_producer_id=-1, ongoing_txn_producer_epoch=-1)


API = Api(key=22, name="InitProducerId", min_version=0, max_version=5, handle=handle)
