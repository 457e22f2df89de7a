"""AllocateProducerIds (key 67): a broker reserves a block of producer ids from the controller.

Blocks are recorded in the metadata log, so no id is handed out twice, across brokers and restarts.
"""

from __future__ import annotations

from typing import Any

from moldau.metadata.controller import PRODUCER_ID_BLOCK_SIZE, Controller
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await serve(ctx.broker.controller, request, ctx.schema.response_type)


async def serve(controller: Controller, request: Any, response_type: Any) -> Any:
    registration = controller.image.brokers.get(request.broker_id)
    if registration is None or registration.broker_epoch != request.broker_epoch:
        return _answer(response_type, ErrorCode.stale_broker_epoch, -1, 0)
    try:
        first = await controller.allocate_producer_ids(request.broker_id, PRODUCER_ID_BLOCK_SIZE)
    except KafkaError as exc:
        return _answer(response_type, exc.code, -1, 0)
    return _answer(response_type, ErrorCode.none, first, PRODUCER_ID_BLOCK_SIZE)


def _answer(response_type: Any, code: ErrorCode, first: int, count: int) -> Any:
    return make(response_type, throttle_time=NO_THROTTLE, error_code=code, producer_id_start=first,
                producer_id_len=count)


API = Api(key=67, name="AllocateProducerIds", min_version=0, max_version=0, handle=handle)
