"""DescribeDelegationToken (key 41), v1-3: the tokens a principal may see (KIP-48), from this node's image.

Null owners lists every token the principal may see, an empty list none. A principal sees the tokens it owns,
requested or may renew, those it may DESCRIBE (DelegationToken resource, by token id) and those of owners it may
DESCRIBE_TOKENS (User resource, KIP-373). Each comes with its HMAC, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.security.delegation_tokens import token_hmac, visible_to
from moldau.security.principal import KafkaPrincipal
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.server.handlers.token_requests import token_requests_allowed


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not token_requests_allowed(ctx):
        return _response(ctx, ErrorCode.delegation_token_request_not_allowed)
    secret = ctx.broker.controller.token_settings.secret_key
    if not secret:
        return _response(ctx, ErrorCode.delegation_token_auth_disabled)
    owners = None if request.owners is None else frozenset(
        f"{o.principal_type}:{o.principal_name}" for o in request.owners)
    if owners is not None and not owners:
        return _response(ctx, ErrorCode.none)
    token_cls, renewer_cls = ctx.nested("DescribedDelegationToken"), ctx.nested("DescribedDelegationTokenRenewer")
    tokens = []
    for record in sorted(ctx.broker.image.delegation_tokens.values(), key=lambda t: (t.issue_timestamp, t.token_id)):
        if not visible_to(record, ctx.principal, owners,
                          lambda token_id: ctx.authorize(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN,
                                                         token_id),
                          lambda owner: ctx.authorize(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, owner)):
            continue
        owner, requester = KafkaPrincipal.parse(record.owner), KafkaPrincipal.parse(record.requester)
        renewers = tuple(KafkaPrincipal.parse(r) for r in record.renewers)
        tokens.append(make(
            token_cls, principal_type=owner.principal_type, principal_name=owner.name,
            token_requester_principal_type=requester.principal_type, token_requester_principal_name=requester.name,
            issue_timestamp=record.issue_timestamp, expiry_timestamp=record.expiry_timestamp,
            max_timestamp=record.max_timestamp, token_id=record.token_id, hmac=token_hmac(secret, record.token_id),
            renewers=tuple(make(renewer_cls, principal_type=r.principal_type, principal_name=r.name)
                           for r in renewers)))
    return _response(ctx, ErrorCode.none, tuple(tokens))


def _response(ctx: RequestContext, code: ErrorCode, tokens: tuple[Any, ...] = ()) -> Any:
    return make(ctx.schema.response_type, error_code=code, tokens=tokens, throttle_time=NO_THROTTLE)


API = Api(key=41, name="DescribeDelegationToken", min_version=1, max_version=3, handle=handle)
