"""InitProducerId (key 22): give a producer its producer id and epoch.

Without a transactional id every call gets a fresh producer id with epoch 0, as in Kafka; ids come from a block
reserved durably through the controller, so an id is never handed out twice, even across restarts.

With a transactional id the transaction coordinator answers (this broker must lead the id's `__transaction_state`
partition, else NOT_COORDINATOR): the id keeps its producer id and gets the next epoch, which fences every older
incarnation of the producer. A transaction the previous incarnation left open is aborted first; the answer is
then CONCURRENT_TRANSACTIONS and the client retries until the abort is done (see `moldau.coordinator.txn`).
From v3 a client may name the producer id and epoch it has (KIP-360); they must still be current.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.txn.runtime import fence_code_for
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, ms_from_timedelta

PRODUCER_FENCED_FROM = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return await _transactional(ctx, request)
    try:
        producer_id = await ctx.broker.next_producer_id()
    except KafkaError as exc:
        return _response(ctx, exc.code, -1, -1)  # clients retry COORDINATOR_NOT_AVAILABLE
    return _response(ctx, ErrorCode.none, producer_id, 0)


async def _transactional(ctx: RequestContext, request: Any) -> Any:
    expected = (int(getattr(request, "producer_id", -1)), int(getattr(request, "producer_epoch", -1)))
    try:
        outcome = await ctx.broker.txn.init_producer_id(
            request.transactional_id, ms_from_timedelta(request.transaction_timeout), expected,
            fence_code_for(PRODUCER_FENCED_FROM, ctx.version))
    except KafkaError as exc:
        return _response(ctx, exc.code, -1, -1)
    if outcome.error != ErrorCode.none:
        return _response(ctx, outcome.error, -1, -1)
    return _response(ctx, ErrorCode.none, outcome.producer_id, outcome.producer_epoch)


def _response(ctx: RequestContext, code: ErrorCode, producer_id: int, epoch: int) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, producer_id=producer_id,
                producer_epoch=epoch, ongoing_txn_producer_id=-1, ongoing_txn_producer_epoch=-1)


API = Api(key=22, name="InitProducerId", min_version=0, max_version=5, handle=handle)
