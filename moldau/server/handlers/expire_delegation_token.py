"""ExpireDelegationToken (key 40), v1-2: end a token sooner (KIP-48), decided by the active controller.

The token is named by its HMAC. Its owner and renewers may set its expiry to `expiry_time_period_ms` from now
(never past its max time), or delete it at once with a negative period; the answer then carries the time it was
deleted. Errors as RenewDelegationToken's.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import ms_from_timedelta
from moldau.server.handlers.token_requests import expiry_response, token_requests_allowed


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not token_requests_allowed(ctx):
        return expiry_response(ctx, ErrorCode.delegation_token_request_not_allowed)
    forwarded = await ctx.broker.forward_enveloped(ctx, request)
    if forwarded is not None:
        return forwarded
    try:
        expiry = await ctx.broker.controller.expire_delegation_token(
            ctx.broker.clock.time_ms(), bytes(request.hmac), ctx.principal,
            ms_from_timedelta(request.expiry_time_period))
    except KafkaError as exc:
        return expiry_response(ctx, exc.code)
    return expiry_response(ctx, ErrorCode.none, expiry)


API = Api(key=40, name="ExpireDelegationToken", min_version=1, max_version=2, handle=handle)
