"""UnregisterBroker (key 64): remove a broker that is gone for good from the cluster's registrations (KIP-631).

The broker must be fenced (shut down, or silent past `broker.session.timeout.ms`); a live broker is refused
with INVALID_REQUEST, and an id with no registration gets BROKER_ID_NOT_REGISTERED. Its partitions keep it as a
replica (offline) until they are reassigned. Needs ALTER on the cluster; forwarded to the active controller,
which commits an UnregisterBrokerRecord.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return _response(ctx, ErrorCode.cluster_authorization_failed, f"{ctx.principal} may not ALTER the cluster")
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    try:
        await ctx.broker.controller.unregister_broker(request.broker_id)
    except KafkaError as exc:
        return _response(ctx, exc.code, exc.message)
    return _response(ctx, ErrorCode.none, None)


def _response(ctx: RequestContext, code: ErrorCode, message: str | None) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message)


API = Api(key=64, name="UnregisterBroker", min_version=0, max_version=0, handle=handle)
