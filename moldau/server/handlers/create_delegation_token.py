"""CreateDelegationToken (key 38), v1-3: issue a delegation token (KIP-48), decided by the active controller.

The owner is the requester unless the request names another (v3, KIP-373), which takes CREATE_TOKENS on that
User resource (DELEGATION_TOKEN_AUTHORIZATION_FAILED otherwise). Renewers must be User principals
(INVALID_PRINCIPAL_TYPE). A broker forwards the request in an Envelope, so the controller records the client as
the token's requester; the answer carries the token id and its HMAC, the token's password.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.security.delegation_tokens import token_hmac
from moldau.security.principal import USER_TYPE, KafkaPrincipal
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, ms_from_timedelta
from moldau.server.handlers.token_requests import ERROR_TIME, token_requests_allowed, wire_time


async def handle(ctx: RequestContext, request: Any) -> Any:
    requester = ctx.principal
    owner = _owner(request, requester)
    if not token_requests_allowed(ctx):
        return _error(ctx, ErrorCode.delegation_token_request_not_allowed, owner, requester)
    if owner != requester and not ctx.authorize(AclOperation.CREATE_TOKENS, ResourceType.USER, str(owner)):
        return _error(ctx, ErrorCode.delegation_token_authorization_failed, owner, requester)
    forwarded = await ctx.broker.forward_enveloped(ctx, request)
    if forwarded is not None:
        return forwarded
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in request.renewers]
    controller = ctx.broker.controller
    try:
        token = await controller.create_delegation_token(ctx.broker.clock.time_ms(), owner, requester, renewers,
                                                         ms_from_timedelta(request.max_lifetime))
    except KafkaError as exc:
        return _error(ctx, exc.code, owner, requester)
    secret = controller.token_settings.check_enabled()
    return _response(ctx, ErrorCode.none, owner, requester, issue_timestamp=wire_time(token.issue_timestamp),
                     expiry_timestamp=wire_time(token.expiry_timestamp),
                     max_timestamp=wire_time(token.max_timestamp), token_id=token.token_id,
                     hmac=token_hmac(secret, token.token_id))


def _owner(request: Any, requester: KafkaPrincipal) -> KafkaPrincipal:
    name = getattr(request, "owner_principal_name", None)
    if not name:
        return requester
    return KafkaPrincipal(getattr(request, "owner_principal_type", None) or USER_TYPE, name)


def _error(ctx: RequestContext, code: ErrorCode, owner: KafkaPrincipal, requester: KafkaPrincipal) -> Any:
    return _response(ctx, code, owner, requester, issue_timestamp=ERROR_TIME, expiry_timestamp=ERROR_TIME,
                     max_timestamp=ERROR_TIME, token_id="", hmac=b"")


def _response(ctx: RequestContext, code: ErrorCode, owner: KafkaPrincipal, requester: KafkaPrincipal,
              **fields: Any) -> Any:
    return make(ctx.schema.response_type, error_code=code, principal_type=owner.principal_type,
                principal_name=owner.name, token_requester_principal_type=requester.principal_type,
                token_requester_principal_name=requester.name, throttle_time=NO_THROTTLE, **fields)


API = Api(key=38, name="CreateDelegationToken", min_version=1, max_version=3, handle=handle)
