"""Heartbeat (key 12): a member says it is alive; REBALANCE_IN_PROGRESS in the answer tells it to rejoin."""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error = ctx.broker.groups.heartbeat(request.group_id, request.member_id,
                                            getattr(request, "group_instance_id", None), request.generation_id)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=error)


API = Api(key=12, name="Heartbeat", min_version=0, max_version=4, handle=handle)
