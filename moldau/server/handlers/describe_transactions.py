"""DescribeTransactions (key 65): the state of transactional ids coordinated by this broker.

Per id: its state ("Ongoing", "PrepareCommit", "CompleteAbort", ...), timeout, start time (-1 when no transaction
has started), producer id and epoch, and the partitions of its open transaction. An id coordinated elsewhere gets
NOT_COORDINATOR; an unknown one TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

import datetime
from typing import Any

from moldau.coordinator.txn.records import TxnValue
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    states = tuple(_state(ctx, txn_id) for txn_id in request.transactional_ids)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, transaction_states=states)


def _state(ctx: RequestContext, transactional_id: str) -> Any:
    cls = ctx.nested("TransactionState")
    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        error, value = ctx.broker.txn.describe(transactional_id)
    else:
        error, value = ErrorCode.transactional_id_authorization_failed, None
    if value is None:
        return make(cls, error_code=error, transactional_id=transactional_id, transaction_state="",
                    transaction_timeout=datetime.timedelta(0), transaction_start_time=_time(-1), producer_id=-1,
                    producer_epoch=-1, topics=())
    return make(cls, error_code=ErrorCode.none, transactional_id=transactional_id,
                transaction_state=value.state.display_name,
                transaction_timeout=datetime.timedelta(milliseconds=value.timeout_ms),
                transaction_start_time=_time(value.start_ms), producer_id=value.producer_id,
                producer_epoch=value.producer_epoch, topics=_topics(ctx, value))


def _topics(ctx: RequestContext, value: TxnValue) -> tuple[Any, ...]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return tuple(make(ctx.nested("TopicData"), topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())


def _time(timestamp_ms: int) -> datetime.datetime:
    # kio's non-nullable timestamp: -1 ("not started") is the instant 1 ms before the epoch.
    return datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.UTC)


API = Api(key=65, name="DescribeTransactions", min_version=0, max_version=0, handle=handle)
