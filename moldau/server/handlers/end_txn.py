"""EndTxn (key 26): commit or abort a producer's transaction.

Answered once the PrepareCommit/PrepareAbort record is on every in-sync replica of the transaction's state
partition: from then on the outcome is decided and survives a coordinator failover. The markers are written
afterwards; until they are all written, the producer's next transactional request gets CONCURRENT_TRANSACTIONS
and is retried. Repeating an EndTxn that already completed succeeds (a retry after a lost answer).
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.txn.runtime import fence_code_for
from moldau.protocol.codec import make
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

PRODUCER_FENCED_FROM = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    error = await ctx.broker.txn.end_transaction(request.transactional_id, request.producer_id,
                                                 request.producer_epoch, request.committed,
                                                 fence_code_for(PRODUCER_FENCED_FROM, ctx.version))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=error)


API = Api(key=26, name="EndTxn", min_version=0, max_version=3, handle=handle)
