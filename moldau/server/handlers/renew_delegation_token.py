"""RenewDelegationToken (key 39), v1-2: move a token's expiry (KIP-48), decided by the active controller.

The token is named by its HMAC. Its owner and renewers may renew it, to `renew_period_ms` from now (the
configured `delegation.token.expiry.time.ms` when -1 or longer), never past its max time. Errors:
DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH, and the two every token
request may get (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, DELEGATION_TOKEN_AUTH_DISABLED).
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
        expiry = await ctx.broker.controller.renew_delegation_token(
            ctx.broker.clock.time_ms(), bytes(request.hmac), ctx.principal, ms_from_timedelta(request.renew_period))
    except KafkaError as exc:
        return expiry_response(ctx, exc.code)
    return expiry_response(ctx, ErrorCode.none, expiry)


API = Api(key=39, name="RenewDelegationToken", min_version=1, max_version=2, handle=handle)
