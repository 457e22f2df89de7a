"""CreateAcls (key 30): store ACLs in the metadata log (needs ALTER on the cluster: `acl_changes`).

Forwarded to the active controller, which validates each ACL (a concrete resource type, LITERAL or PREFIXED,
a concrete operation, ALLOW or DENY, a TYPE:NAME principal) and commits the valid ones in one entry; each
creation gets its own result, INVALID_REQUEST with the reason for a refused one. Creating an ACL that exists is
a success that stores nothing. Without an authorizer every creation is refused with SECURITY_DISABLED, as Kafka
does: ACLs nobody enforces would give a false sense of safety.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from moldau.server.context import RequestContext
from moldau.server.handlers.acl_changes import apply_valid, change_refusal, parse_each
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


def binding(resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str, operation: int,
            permission: int) -> AclBinding:
    """An AclBinding from wire codes. Raises KafkaError(INVALID_REQUEST) for a code Kafka does not define."""
    try:
        return AclBinding(ResourceType(resource_type), resource_name, PatternType(pattern_type), principal, host,
                          AclOperation(operation), AclPermissionType(permission))
    except ValueError as exc:
        raise KafkaError(ErrorCode.invalid_request, str(exc)) from exc


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = ctx.nested("AclCreationResult")
    refusal = change_refusal(ctx)
    if refusal is not None:
        result = make(cls, error_code=refusal.code, error_message=refusal.message)
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                    results=tuple(result for _ in request.creations))
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    parsed = parse_each(request.creations, _binding_of)
    valid = [p for p in parsed if isinstance(p, AclBinding)]
    outcomes = await apply_valid(parsed, valid, ctx.broker.controller.create_acls)
    results = tuple(make(cls, error_code=error.code if error else ErrorCode.none,
                         error_message=error.message if error else None) for error in outcomes)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=results)


def _binding_of(creation: Any) -> AclBinding:
    return binding(creation.resource_type, creation.resource_name, getattr(creation, "resource_pattern_type", 3),
                   creation.principal, creation.host, creation.operation, creation.permission_type)


API = Api(key=30, name="CreateAcls", min_version=1, max_version=3, handle=handle)
